"""A replica follows the writer: it applies the log's new events to its models, in seq order.

Woken by the store's notices (``(model, seq)``: events up to ``seq`` are committed; ``(None,
0)``: models were created or deleted, or a periodic re-read), it reads each model's events
after the seq it has applied and learns them with :meth:`app.hosting.ModelHost.apply_logged`,
the code of the replay at start, so a replica at seq ``n`` predicts exactly what the writer
predicted at ``n``. A full re-read also creates the models the log has and this instance
does not, and drops those deleted (or deleted and created again).

The lag it reports per model is in events (the newest seq noticed minus the seq applied) and
in seconds (since the first notice of an event not applied yet).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from .background import LoopTask
from .learning import REPLAY_PAGE
from .pacing import stretch_events
from .storage import StorageError
from .storage.thread import StoreThread

if TYPE_CHECKING:
    from .hosting import ModelHost

__all__ = ["Follower", "Models"]

log = logging.getLogger("streamtree.app")

#: Events applied in one stretch of the event loop. A replica's loop also forwards writes to
#: the writer, and a longer slice holds a forwarded request's body chunks and answer behind it
#: (the library learns a batch in slices exactly as in one piece; what each slice length cost:
#: ``docs/decisions/forwarding.md``).
APPLY_SLICE = 50


class Models(Protocol):
    """What the follower reads and drives of the hosted models (:class:`app.registry.Registry`)."""

    @property
    def db(self) -> StoreThread:
        """The store (and its thread) the log is read from."""
        ...

    def get(self, name: str) -> ModelHost | None:
        """The model named ``name``, if hosted."""
        ...

    def all(self) -> list[ModelHost]:
        """Every hosted model."""
        ...

    async def sync_models(self) -> None:
        """Host the stored models not hosted yet, drop those no longer stored."""
        ...


class Follower(LoopTask):
    """Applies the log to the hosted models while this instance is not the writer.

    Parameters
    ----------
    models
        The models to keep up to date (and whose store is read).
    is_writer
        Whether this instance is the writer now (then its models are the log's source and
        the notices are dropped).
    """

    task_name = "follower"

    def __init__(self, models: Models, is_writer: Callable[[], bool]) -> None:
        self.models = models
        self.is_writer = is_writer
        self.noticed: dict[str, int] = {}  # newest committed seq seen per model
        self._behind_since: dict[str, float] = {}  # monotonic time of the first notice not yet applied
        self._dirty: set[str] = set()
        self._full = True
        self._wake = asyncio.Event()

    def notice(self, model: str | None, seq: int) -> None:
        """Record a notice of the store (on the loop): ``model`` has events up to ``seq``, or
        (``model`` None) re-read every model and the set of models."""
        if model is None:
            self._full = True
        else:
            if seq > self.noticed.get(model, 0):
                self.noticed[model] = seq
            host = self.models.get(model)
            if host is not None and seq > host.seq:
                self._behind_since.setdefault(model, time.monotonic())
            self._dirty.add(model)
        self._wake.set()

    def lag(self, host: ModelHost) -> tuple[int, float]:
        """``(events, seconds)`` the model is behind the log, as far as this instance has heard."""
        behind = max(0, self.noticed.get(host.name, 0) - host.seq)
        since = self._behind_since.get(host.name)
        return behind, (time.monotonic() - since) if behind and since is not None else 0.0

    async def catch_up(self, host: ModelHost) -> None:
        """Apply every logged event of ``host`` after its seq (the models' store is read).

        A model whose log cannot be applied (a gap, a refused event) is rebuilt from the
        store, as a writer does after a failure.
        """
        db = self.models.db
        broken = False
        async with host.apply_lock:
            while not host.recovering:
                try:
                    page = await db.run(db.store.read_events, host.name, host.seq, REPLAY_PAGE)
                except StorageError:
                    log.exception("model %r: reading the log after seq %d failed", host.name, host.seq)
                    return
                if not page:
                    break
                try:
                    size = stretch_events(host.model, APPLY_SLICE)  # fewer for a forest, or many classes
                    for i in range(0, len(page), size):
                        host.apply_logged(page[i : i + size])
                        await asyncio.sleep(0)  # forwarded writes and predictions between two slices
                except RuntimeError:
                    log.exception("model %r: applying the log failed; rebuilding it from the store", host.name)
                    broken = True
                    break
        if broken:
            await host.resync()
        if host.seq >= self.noticed.get(host.name, 0):
            self._behind_since.pop(host.name, None)
        else:
            self._behind_since[host.name] = time.monotonic()  # newer notices came in meanwhile

    async def sync_models(self) -> None:
        """Bring the set of hosted models to the store's now (a replica that forwarded a model's
        creation or deletion answers once its own list shows it)."""
        await self.models.sync_models()

    async def catch_up_all(self) -> None:
        """Bring the set of models and each model up to the log's end."""
        await self.models.sync_models()
        for host in self.models.all():
            await self.catch_up(host)

    async def run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            if self.is_writer():  # the writer's models are the log's source
                self._dirty.clear()
                self._full = False
                continue
            full, dirty = self._full, self._dirty
            self._full, self._dirty = False, set()
            try:
                if full:
                    await self.catch_up_all()
                else:
                    for name in sorted(dirty):
                        host = self.models.get(name)
                        if host is None:  # created since the last full read
                            self._full = True
                            self._wake.set()
                        else:
                            await self.catch_up(host)
            except Exception:  # keep following: the next notice or re-read retries
                log.exception("following the log failed")
                self._full = True
                await asyncio.sleep(0.5)
                self._wake.set()
