"""This instance's role in a deployment: the writer, or a replica that follows the log.

A store that one instance owns (SQLite) makes that instance the writer, always. A shared
store (PostgreSQL) hands out a :class:`~app.storage.base.Coordinator`: the instance that
holds its lease is the writer (it learns, numbers and commits events, creates and deletes
models); every other one is a replica, which follows the log
(:class:`~app.replication.Follower`) and forwards writes to the writer
(:mod:`app.forwarding`).

A replica that takes the lease (the writer died, stopped or left) first brings every model
to the log's end (nobody else can append any more) and only then writes; a writer that
loses the lease (a commit refused by the fence, or a renewal that failed) is a replica from
that moment, and its models whose commit was refused are rebuilt from the log.

An instance with a model it could not rebuild from the store (:mod:`app.recovery`) is not
*eligible* for the lease: it gives the lease up if it holds it (once, when the model becomes
unavailable) and takes a free lease only after a further lease length, so an instance that
serves every model becomes the writer when there is one, and the cluster keeps a writer for
its other models when there is none.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from .replication import Follower
from .settings import Settings
from .storage import Coordinator, EventStore, Lease

if TYPE_CHECKING:
    from .hosting import ModelHost

__all__ = ["Cluster", "Role"]

log = logging.getLogger("streamtree.app")

Role = Literal["writer", "replica"]


class Cluster:
    """The role of this instance and what comes with it.

    Parameters
    ----------
    settings
        Service settings (lease timing, the URL others reach this instance at).
    follower
        Applies the log to the models while this instance is not the writer.
    unavailable
        The models that could not be rebuilt from the store, and why (none: eligible for the lease).
    hosts
        The hosted models (their replication lag is reported).

    Attributes
    ----------
    is_writer
        True while this instance is the writer and its models are at the log's end: only
        then does it learn, create or delete.
    me
        This instance's id in the lease (host name, process id and a random part).
    url
        Where other instances forward writes to this one.
    """

    def __init__(
        self,
        settings: Settings,
        follower: Follower,
        unavailable: Callable[[], Mapping[str, str]],
        hosts: Callable[[], Sequence[ModelHost]],
    ) -> None:
        self.settings = settings
        self.me = f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.url = settings.own_url()
        self.is_writer = False
        self.follower = follower
        self.unavailable = unavailable
        self.hosts = hosts
        self._coordinator: Coordinator | None = None
        self._lease: Lease | None = None
        self._opened_with: Lease | None = None  # the lease held when the models were loaded
        self._started = False
        self._healthy = True  # every model could be rebuilt (eligible for the lease)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._promotion: asyncio.Task[None] | None = None
        self._handover: asyncio.Task[None] | None = None

    @property
    def role(self) -> Role:
        """``"writer"`` or ``"replica"`` (also while taking over, until the models are at the log's end)."""
        return "writer" if self.is_writer else "replica"

    async def open(self, store: EventStore) -> None:
        """Ask the store for its coordinator, try to take the lease, and keep it renewed
        while the models load (a store of its own has none: this instance is the writer)."""
        self._loop = asyncio.get_running_loop()
        s = self.settings
        self._coordinator = store.coordinator(self.me, self.url, s.lease_seconds, s.lease_poll_seconds)
        if self._coordinator is None:
            return
        self._lease = self._opened_with = await asyncio.to_thread(self._coordinator.try_acquire)
        self._coordinator.start(self._on_loop(self._lease_changed), self._on_loop(self.follower.notice))

    def start(self) -> None:
        """Once the models are loaded: write if the lease was held all along, follow the log otherwise."""
        self._started = True
        if self._coordinator is None:
            self.is_writer = True
            return
        self._healthy = not self.unavailable()
        self._coordinator.set_eligible(self._healthy)
        # loaded under the same lease: nobody else appended since, the models are at the log's end
        self.is_writer = self._healthy and self._lease is not None and self._lease is self._opened_with
        log.warning("this instance is the %s (%s, reached at %s)", self.role, self.me, self.url)
        self.follower.start()
        if self._lease is not None and not self._healthy:
            self._hand_over()
        elif self._lease is not None and not self.is_writer:  # taken while loading: catch up first
            self._lease_changed(self._lease)

    def health_changed(self) -> None:
        """Called (on the loop) when a model became unavailable or available again: eligible
        for the lease only while every model is served; a writer that stops being so hands the
        lease over."""
        healthy = not self.unavailable()
        if healthy == self._healthy:
            return
        self._healthy = healthy
        if self._coordinator is None:
            return
        self._coordinator.set_eligible(healthy)
        log.warning(
            "this instance %s every model: %s for the writer's lease",
            "serves" if healthy else "cannot serve",
            "eligible" if healthy else "not eligible (it takes it only if no other does)",
        )
        if not healthy and self._started and self._lease is not None:
            self._hand_over()

    def _hand_over(self) -> None:
        """Give the lease up (on the coordinator's thread; ``_lease_changed(None)`` follows)."""
        assert self._loop is not None and self._coordinator is not None
        self.is_writer = False
        coordinator = self._coordinator
        self._handover = self._loop.create_task(asyncio.to_thread(coordinator.release), name="hand-over")

    def _on_loop(self, fn: Callable[..., None]) -> Callable[..., None]:
        """``fn`` called on the event loop, from whatever thread calls the result."""
        loop = self._loop
        assert loop is not None

        def call(*args: Any) -> None:
            try:
                loop.call_soon_threadsafe(fn, *args)
            except RuntimeError:  # the loop is closed: the service is stopping
                pass

        return call

    def _lease_changed(self, lease: Lease | None) -> None:
        self._lease = lease
        if not self._started:  # the models are loading: start() decides
            return
        if lease is None:
            self.demote()
        elif not self.is_writer and (self._promotion is None or self._promotion.done()):
            assert self._loop is not None
            self._promotion = self._loop.create_task(self._promote(lease), name="promotion")

    def demote(self) -> None:
        """Stop writing at once (the lease is lost, or a commit was refused by the fence)."""
        if self.is_writer:
            log.warning("this instance is a replica now")
        self.is_writer = False
        self.follower.notice(None, 0)

    async def _promote(self, lease: Lease) -> None:
        """Bring every model to the log's end, then write (unless the lease was lost meanwhile)."""
        while self._lease is lease:
            try:
                await self.follower.catch_up_all()
            except Exception:
                log.exception("taking over as the writer: catching up with the log failed; retrying")
                await asyncio.sleep(0.1)
                continue
            if self._lease is lease:
                self.is_writer = True
                log.warning("this instance is the writer now (token %d)", lease.token)
            return

    def writer_url(self) -> str | None:
        """The URL of the writer to forward a write to; None when there is none to forward
        to (no live lease, or this instance itself is taking over)."""
        if self._coordinator is None:
            return None
        lease = self._coordinator.holder()
        if lease is None or lease.holder == self.me:
            return None
        return lease.url

    def lags(self) -> dict[str, tuple[int, float]]:
        """Per model, ``(events, seconds)`` behind the log (zeros on the writer)."""
        hosts = self.hosts()
        if self.is_writer:
            return {h.name: (0, 0.0) for h in hosts}
        return {h.name: self.follower.lag(h) for h in hosts}

    async def close(self) -> None:
        """Stop following and release the lease (after the models finished their writes)."""
        if self._promotion is not None:
            self._promotion.cancel()
        await self.follower.stop()
        if self._coordinator is not None:
            coordinator, self._coordinator = self._coordinator, None
            self.is_writer = False
            await asyncio.to_thread(coordinator.close)
