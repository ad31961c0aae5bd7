"""A writer's snapshots: when one is due, captured at the durable seq, encoded and saved in the background.

Every ``snapshot_every`` events the writer (:mod:`app.group_commit`) captures the model and
its metrics (memory copies only) at the durable seq; the capture is encoded in a thread and
saved on the store's thread by a background task while learning goes on. At most one save is
in flight (the next group starts one once it is done), and closing awaits it. Snapshots are
paced by their cost: one starts no sooner than ``snapshot_pace`` (a setting) times the last
one's duration after it ended (a task starts it then when no group comes), so however fast
events arrive snapshots (each a whole copy of the model) take at most
``1 / (1 + snapshot_pace)`` of the time (1/11 at the default pace, 10), and a restart replays
at most the events of that stretch.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import orjson

from streamtree.persistence import Capture

from .prequential import Prequential
from .settings import Settings
from .storage import LeaseLost, Snapshot, seal_state
from .storage.thread import StoreThread
from .telemetry import Telemetry

__all__ = ["Snapshots", "Snapshotted"]

log = logging.getLogger("streamtree.app")


#: The longest wait before a snapshot is tried again after failed ones (1, 2, 4... s up to it).
RETRY_WAIT_MAX = 60.0


class Snapshotted(Protocol):
    """What the snapshots read and set of their model (:class:`app.hosting.ModelHost`)."""

    name: str
    settings: Settings
    db: StoreThread
    telemetry: Telemetry
    model: Any
    prequential: Prequential
    seq: int  # durable whenever a capture is taken
    snapshot_seq: int
    snapshot_bytes: int
    recovering: bool
    apply_lock: asyncio.Lock


class Snapshots:
    """The snapshots of one writer's model.

    Parameters
    ----------
    host
        The model (its seq, durable when a capture is asked for, and its store).
    settled
        Waits until nothing learned is waiting for its commit (called under the apply lock
        before a paced capture: the writer learns a group while the one before commits).
    """

    def __init__(self, host: Snapshotted, settled: Callable[[], Awaitable[bool]]) -> None:
        self.host = host
        self.settled = settled
        self._saving: asyncio.Task[None] | None = None  # the snapshot being encoded and saved
        self._deferred: asyncio.Task[None] | None = None  # a due snapshot waiting for its pace
        self._saved_at = -math.inf  # when the last save ended (monotonic seconds)
        self._save_cost = 0.0  # how long it took, capture to stored
        self._failures = 0  # saves failed in a row
        self._retry_at = -math.inf  # after a failure: no new save before (monotonic seconds)
        self.closing = False

    def due(self) -> bool:
        """Whether ``snapshot_every`` events were learned since the last snapshot."""
        host = self.host
        return host.seq - host.snapshot_seq >= host.settings.snapshot_every

    def start(self) -> None:
        """Capture the current state, which must be durable, and save it in the background,
        unless a save is under way (the next group starts one then) or the pace (module
        docstring) asks to wait (a task starts it then, if it is still due)."""
        now = time.monotonic()
        wait = max(self._saved_at + self.host.settings.snapshot_pace * self._save_cost, self._retry_at) - now
        if wait > 0:
            if self._deferred is None or self._deferred.done():
                self._deferred = asyncio.get_running_loop().create_task(
                    self._start_later(wait), name=f"snapshot-pace:{self.host.name}"
                )
            return
        if self._saving is None or self._saving.done():
            captured = self._capture()
            if captured is not None:
                self._saving = asyncio.get_running_loop().create_task(
                    self._save(*captured), name=f"snapshot:{self.host.name}"
                )

    async def close(self, snapshot: bool) -> None:
        """Stop the paced start, await the save in flight, then snapshot once more if asked
        and anything was learned since (the writer has stopped: its state is durable)."""
        host = self.host
        self.closing = True
        if self._deferred is not None:
            self._deferred.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._deferred
        if self._saving is not None:
            await self._saving
        if snapshot and host.seq > host.snapshot_seq and not host.recovering:
            await self.now()

    async def now(self) -> None:
        """Capture the current state, which must be durable, and save it; a failure is only logged."""
        captured = self._capture()
        if captured is not None:
            await self._save(*captured)

    async def first(self) -> None:
        """Save the state of a model just created (seq 0): its metrics' settings (window, bins,
        history) are stored with it from the start, so a restart keeps those the model was
        created with. Neither paced nor counted; a failure is only logged (a restart before the
        next snapshot then takes the settings of that start)."""
        host = self.host
        try:
            snap = _encode_snapshot(0, host.model.capture(), {"prequential": host.prequential.state()})
            await host.db.run(host.db.store.save_snapshot, host.name, snap, host.settings.snapshots_kept)
        except Exception as exc:
            log.warning("model %r: no snapshot of it as created (%s: %s)", host.name, type(exc).__name__, exc)

    async def _start_later(self, delay: float) -> None:
        """After ``delay`` seconds, start the snapshot that was due, if it still is (under the
        apply lock: a capture is taken between groups, at the durable seq)."""
        await asyncio.sleep(delay)
        host = self.host
        async with host.apply_lock:
            await self.settled()  # the capture is of the durable state: nothing learned behind a commit
            if self.due() and not self.closing and not host.recovering:
                self.start()

    def _capture(self) -> tuple[int, Capture, dict[str, Any]] | None:
        """The state at the host's ``seq``, copied: only memory copies, so that the encoding
        can run in a thread while requests are answered (what that saves:
        ``docs/decisions/background-snapshots.md``)."""
        host = self.host
        try:
            return host.seq, host.model.capture(), {"prequential": host.prequential.state()}
        except Exception:
            log.exception("model %r: snapshot at seq %d failed (the log still has every event)", host.name, host.seq)
            return None

    async def _save(self, seq: int, captured: Capture, state: dict[str, Any]) -> None:
        """Encode a capture in a thread and save it on the store's; a failure is only logged."""
        host = self.host
        started = time.monotonic()
        try:
            snap = await asyncio.to_thread(_encode_snapshot, seq, captured, state)
            await host.db.run(host.db.store.save_snapshot, host.name, snap, host.settings.snapshots_kept)
            self._saved_at = time.monotonic()
            self._save_cost = self._saved_at - started
            self._failures, self._retry_at = 0, -math.inf
        except LeaseLost:  # not a failure: another instance is the writer now, and snapshots
            log.warning("model %r: no snapshot at seq %d: this instance lost the writer's lease", host.name, seq)
            return
        except Exception:
            log.exception("model %r: snapshot at seq %d failed (the log still has every event)", host.name, seq)
            # each retry encodes the whole model again: on a full disk they came every group
            self._failures += 1
            self._retry_at = time.monotonic() + min(RETRY_WAIT_MAX, 2.0 ** (self._failures - 1))
            return
        if snap.seq > host.snapshot_seq:  # a rebuild meanwhile may have restored a newer one
            host.snapshot_seq, host.snapshot_bytes = snap.seq, len(snap.model_bytes)
        host.telemetry.snapshots.labels(host.name).inc()


def _encode_snapshot(seq: int, captured: Capture, state: dict[str, Any]) -> Snapshot:
    return Snapshot(seq, captured.to_bytes(), seal_state(seq, orjson.dumps(state).decode()))
