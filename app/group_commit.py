"""A model's single writer: learn requests queued, learned in groups, committed in one transaction, snapshotted.

One writer task per model takes every request waiting for it (up to ``group_max_events``
events) as one *group commit*: it learns them in order, several requests per
:func:`~app.learning.learn_scored` call, numbering their events, then writes the group to
the store in one transaction on the store's thread and only then resolves the requests'
futures, so a response is sent only once its events are durable. While that commit runs the
loop goes on serving predictions and queueing the next requests.

A request the library refuses (it checks a whole batch before learning any of it) is answered
422 and the others of its group are learned as if it had not been sent. If a commit fails, or
the library fails unexpectedly after learning part of a batch, the model is rebuilt from the
durable state (newest snapshot plus the events after it) and the requests that were not
durable get an error; nothing acknowledged is lost and nothing unacknowledged stays in the
model.

Every ``snapshot_every`` events the writer captures the model and its metrics (memory copies
only) at the durable seq, in the write loop; the capture is encoded in a thread and saved
on the store's thread by a background task while learning goes on. At most one save is in
flight (the next group starts one once it is done), and closing awaits it. Snapshots are
paced by their cost: one starts no sooner than ``snapshot_pace`` (a setting) times the last one's
duration after it ended (a task starts it then when no group comes), so however fast events
arrive snapshots (each a whole copy of the model) take at most ``1 / (1 + snapshot_pace)`` of
the time (1/11 at the default pace, 10), and a restart replays at most the events of that
stretch.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson

from streamtree.exceptions import InputError
from streamtree.persistence import Capture

from .admission import LearnRequest, admit, event_ids
from .exceptions import LearnFailure, Loc, NotAvailable, NotWriter, StorageFailure
from .learning import bad_row, encode_events
from .ordering import Ordering
from .pacing import learn_in_stretches, stretch_events
from .pending import PendingIds
from .prequential import Prequential
from .reads import input_error
from .settings import Settings
from .storage import EventStore, IdempotentAnswer, LeaseLost, Snapshot, StorageError
from .storage.thread import StoreThread
from .telemetry import Telemetry
from .validation import Limits, event_loc, field_error

__all__ = ["APPLY_EVENTS", "KEY_LOC", "GroupCommit", "Written"]

log = logging.getLogger("streamtree.app")

#: Requests are learned together, one library call for several, until they hold this many
#: events (a larger request is learned alone); predictions run between two such calls.
APPLY_EVENTS = 1_000

#: Where a refused ``Idempotency-Key`` is, in a 422's ``loc``.
KEY_LOC: Loc = ("header", "Idempotency-Key")


class Written(Protocol):
    """What the writer reads and changes of its model (:class:`app.hosting.ModelHost`)."""

    name: str
    settings: Settings
    db: StoreThread
    telemetry: Telemetry
    limits: Limits
    model: Any
    prequential: Prequential
    pending: PendingIds
    seq: int  # the last event learned (durable once the group is committed)
    snapshot_seq: int
    snapshot_bytes: int
    recovering: bool
    apply_lock: asyncio.Lock
    on_fenced: Callable[[], None]

    def not_ready(self) -> Exception:
        """What a request gets while the model is being rebuilt or is unavailable."""
        ...

    def advanced(self) -> None:
        """Wake the readers waiting for the seq the model has reached."""
        ...

    async def rebuild(self) -> None:
        """Replace the in-memory state with the durable one (snapshot + log)."""
        ...


@dataclass
class _Group:
    """The requests of one group commit learned so far, with their log texts."""

    texts: list[str] = field(default_factory=list)
    acks: list[tuple[LearnRequest, int, int]] = field(default_factory=list)  # (request, learned, last seq)


class GroupCommit:
    """The writer task of one model, and its queue.

    Parameters
    ----------
    host
        The model it learns and commits.
    writable
        Whether this instance is the writer now; while it is not, queued requests get
        :class:`~app.exceptions.NotWriter`.

    Attributes
    ----------
    queue
        The requests waiting for the writer, oldest first.
    closing
        True once :meth:`close` has started: no request is taken any more.
    """

    def __init__(self, host: Written, writable: Callable[[], bool]) -> None:
        self.host = host
        self.writable = writable
        self.queue: deque[LearnRequest] = deque()
        self.closing = False
        self._learned = host.telemetry.learned.labels(host.name)
        self.ordering = Ordering(self._requeue)
        self._wakeup = asyncio.Event()
        self._saving: asyncio.Task[None] | None = None  # the snapshot being encoded and saved
        self._deferred: asyncio.Task[None] | None = None  # a due snapshot waiting for its pace
        self._saved_at = -math.inf  # when the last save ended (monotonic seconds)
        self._save_cost = 0.0  # how long it took, capture to stored
        self._task = asyncio.get_running_loop().create_task(self._write_loop(), name=f"writer:{host.name}")

    def submit(self, request: LearnRequest) -> None:
        """Queue a request; its future is resolved once its events are durable (or refused)."""
        if request.key is not None:
            self.ordering.saw(request.key)
        self.queue.append(request)
        self._wakeup.set()

    def _requeue(self, requests: list[LearnRequest]) -> None:
        """Put requests back at the head of the queue, in order, and wake the writer (requests
        whose key an earlier one holds, and those :mod:`app.ordering` releases)."""
        self.queue.extendleft(reversed(requests))
        self._wakeup.set()

    async def close(self, snapshot: bool) -> None:
        """Stop taking requests, finish (and acknowledge) the queued ones, optionally snapshot."""
        host = self.host
        self.closing = True
        self._wakeup.set()
        await self._task
        self.ordering.close(NotAvailable())  # what they follow will not come: nothing is taken any more
        if self._deferred is not None:
            self._deferred.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._deferred
        if self._saving is not None:
            await self._saving
        if snapshot and host.seq > host.snapshot_seq and not host.recovering:
            await self._snapshot()

    async def _write_loop(self) -> None:
        host = self.host
        while True:
            if not self.queue:
                if self.closing:
                    return
                self._wakeup.clear()
                await self._wakeup.wait()
                continue
            group: list[LearnRequest] = []
            n = 0
            while self.queue and (not group or n + len(self.queue[0].events) <= host.settings.group_max_events):
                request = self.queue.popleft()
                group.append(request)
                n += len(request.events)
            try:
                async with host.apply_lock:
                    await self._process(group)
                    if self._snapshot_due():
                        self._start_snapshot()
            except Exception:  # the writer must survive anything: back to the durable state
                log.exception("model %r: writer failed", host.name)
                with contextlib.suppress(Exception):  # logged by rebuild; the model then stays unavailable
                    await host.rebuild()
                for request in group:
                    _fail(request, StorageFailure())
            self.ordering.release(group)  # the requests that follow one of this group's, placed again

    async def _process(self, group: list[LearnRequest]) -> None:
        """Learn a group of requests in chunks, then commit them in one transaction."""
        host = self.host
        if host.recovering:  # a rebuild failed: the model may differ from its log, learn nothing
            for request in group:
                _fail(request, host.not_ready())
            return
        if not self.writable():  # another instance is the writer now: learn nothing here
            for request in group:
                _fail(request, NotWriter())
            return
        group = await self._settle_keys(group)
        done = _Group()
        for i, chunk in enumerate(_chunks(group, stretch_events(host.model, APPLY_EVENTS))):
            if i:
                await asyncio.sleep(0)  # let predictions in between two chunks
            await self._learn_chunk(chunk, done)
        await self._commit(done)

    async def _settle_keys(self, group: list[LearnRequest]) -> list[LearnRequest]:
        """Answer the group's requests whose idempotency key is logged; return those to learn.

        A request whose key is logged gets the first answer (same body) or a 422 (another
        body) and is not learned. A request whose key an earlier request of the group holds
        goes back to the head of the queue: the next group finds the key logged if the
        earlier one was learned, and learns it otherwise. A request that follows another
        (``Idempotency-After``) is learned only if that one is logged (:mod:`app.ordering`).
        """
        host = self.host
        live = [r for r in group if r.key is not None and not r.future.done()]
        keys = list({r.key for r in live} | {r.after for r in live if r.after is not None})
        if not keys:
            return group
        try:
            found = await host.db.run(
                _find_keys, host.db.store, host.name, keys, host.settings.idempotency_window_seconds
            )
        except StorageError:
            log.exception("model %r: reading idempotency keys failed", host.name)
            for request in group:
                if request.key is not None:
                    _fail(request, StorageFailure())
            return [r for r in group if r.key is None]
        kept: list[LearnRequest] = []
        later: list[LearnRequest] = []
        held: set[str] = set()
        pending: set[str] = set()
        if any(r.after is not None for r in live):
            pending = {r.key for r in live if r.key is not None} | {r.key for r in self.queue if r.key is not None}
        for request in group:
            if request.key is None:
                kept.append(request)
            elif (answer := found.get(request.key)) is not None:
                if answer.body_hash != request.body_hash:
                    _fail(
                        request,
                        field_error(
                            KEY_LOC,
                            "This Idempotency-Key was used with another request body; use a new key for a new request",
                            "idempotency_key_reused",
                        ),
                    )
                elif not request.future.done():
                    request.future.set_result((answer.learned, answer.seq))
            elif request.key in held:
                later.append(request)
            elif request.after is not None and not self.ordering.place(
                request, request.after in found, request.after in pending
            ):
                continue  # held until what it follows is settled, or refused
            else:
                held.add(request.key)
                kept.append(request)
        self._requeue(later)
        return kept

    async def _learn_chunk(self, chunk: list[LearnRequest], done: _Group) -> None:
        """Learn a chunk of requests with one library call; add the learned ones to ``done``.

        A request refused by the checks that need the model's state (:func:`app.admission.admit`)
        is answered 422 and the others are learned as if it had not been sent. When the library
        refuses the batch, or fails unexpectedly, the chunk's requests are learned one at a
        time instead, so that only the request at fault is refused.
        """
        host = self.host
        chunk = [r for r in chunk if not r.future.done()]  # a client that went away learns nothing
        if not chunk:
            return
        admitted, refused = admit(chunk, host.model.classes_, host.pending, host.limits.max_labels)
        xs = [x for a in admitted for x in a.xs]
        ys = [y for a in admitted for y in a.ys]
        now = round(time.time(), 3)  # the arrival time, logged: the metrics history replays with it
        try:
            if xs:  # in stretches that leave the loop free in between (app.pacing)
                await learn_in_stretches(
                    host.model, host.prequential, xs, ys, now, stretch_events(host.model, APPLY_EVENTS)
                )
        except InputError as exc:  # nothing was learned
            if len(chunk) > 1:
                for request in chunk:
                    await self._learn_chunk([request], done)
                return
            request = chunk[0]
            row = bad_row(host.model, xs, exc)
            loc = (
                event_loc(request.batch, "events", row)
                if row is not None
                else (("body", "events") if request.batch else ("body",))
            )
            _fail(request, input_error(exc, (*loc, "features"), (*loc, "label")))
            return
        except Exception:
            # The model may hold part of the chunk: keep the requests learned before it (commit
            # them), go back to the durable state, then retry the chunk one request at a time.
            log.exception("model %r: unexpected error while learning", host.name)
            await self._commit(done)
            done.texts, done.acks = [], []
            await host.rebuild()
            if len(chunk) > 1:
                for request in chunk:
                    await self._learn_chunk([request], done)
            else:
                _fail(chunk[0], LearnFailure())
            return
        for request, error in refused:
            _fail(request, error)
        for a in admitted:
            for id in event_ids(a.request.events):
                host.pending.discard(id)
            host.seq += len(a.xs)
            done.texts.extend(encode_events(a.xs, a.ys, now))
            done.acks.append((a.request, len(a.xs), host.seq))
        host.advanced()

    async def _commit(self, done: _Group) -> None:
        """Log the group's events in one transaction, then answer its requests."""
        host = self.host
        texts = done.texts
        if not texts:
            return
        first = host.seq - len(texts) + 1
        loop = asyncio.get_running_loop()
        start = loop.time()
        try:
            keys = [IdempotentAnswer(r.key, r.body_hash, n, last) for r, n, last in done.acks if r.key is not None]
            await host.db.run(
                host.db.store.append, host.name, first, texts, keys, host.settings.idempotency_window_seconds
            )
        except Exception as exc:
            fenced = isinstance(exc, LeaseLost)
            if fenced:  # not an error of this instance: another one is the writer now
                log.warning(
                    "model %r: events %d..%d refused: this instance lost the writer's lease", host.name, first, host.seq
                )
                host.on_fenced()
            else:
                log.exception("model %r: commit of events %d..%d failed", host.name, first, host.seq)
            try:
                await host.rebuild()  # before answering, so the client's next request sees the durable state
            finally:
                for request, _, _ in done.acks:
                    _fail(request, NotWriter() if fenced else StorageFailure())
            return
        host.telemetry.commit_seconds.observe(loop.time() - start)
        host.telemetry.commit_events.observe(len(texts))
        self._learned.inc(len(texts))
        for request, n, last in done.acks:
            if not request.future.done():
                request.future.set_result((n, last))

    def _snapshot_due(self) -> bool:
        """Whether ``snapshot_every`` events were learned since the last snapshot."""
        host = self.host
        return host.seq - host.snapshot_seq >= host.settings.snapshot_every

    def _start_snapshot(self) -> None:
        """Capture the current (fully durable) state and save it in the background, unless a
        save is under way (the next group starts one then) or the pace (module docstring)
        asks to wait (a task starts it then, if it is still due)."""
        wait = self._saved_at + self.host.settings.snapshot_pace * self._save_cost - time.monotonic()
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

    async def _start_later(self, delay: float) -> None:
        """After ``delay`` seconds, start the snapshot that was due, if it still is (under the
        apply lock: a capture is taken between groups, at the durable seq)."""
        await asyncio.sleep(delay)
        host = self.host
        async with host.apply_lock:
            if self._snapshot_due() and not self.closing and not host.recovering:
                self._start_snapshot()

    async def _snapshot(self) -> None:
        """Write a snapshot of the current (fully durable) state; a failure is only logged."""
        captured = self._capture()
        if captured is not None:
            await self._save(*captured)

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
        except LeaseLost:  # not a failure: another instance is the writer now, and snapshots
            log.warning("model %r: no snapshot at seq %d: this instance lost the writer's lease", host.name, seq)
            return
        except Exception:
            log.exception("model %r: snapshot at seq %d failed (the log still has every event)", host.name, seq)
            return
        if snap.seq > host.snapshot_seq:  # a rebuild meanwhile may have restored a newer one
            host.snapshot_seq, host.snapshot_bytes = snap.seq, len(snap.model_bytes)
        host.telemetry.snapshots.labels(host.name).inc()


def _encode_snapshot(seq: int, captured: Capture, state: dict[str, Any]) -> Snapshot:
    return Snapshot(seq, captured.to_bytes(), orjson.dumps(state).decode())


def _chunks(group: list[LearnRequest], size: int) -> Iterator[list[LearnRequest]]:
    """Consecutive requests holding at most ``size`` events together (a larger one alone)."""
    chunk: list[LearnRequest] = []
    n = 0
    for request in group:
        if chunk and n + len(request.events) > size:
            yield chunk
            chunk, n = [], 0
        chunk.append(request)
        n += len(request.events)
    if chunk:
        yield chunk


def _find_keys(store: EventStore, name: str, keys: list[str], window_s: float) -> dict[str, IdempotentAnswer]:
    """The logged answers of the model's requests made with these keys (run on the store's thread)."""
    found = {key: store.find_idempotent(name, key, window_s) for key in keys}
    return {key: answer for key, answer in found.items() if answer is not None}


def _fail(request: LearnRequest, exc: BaseException) -> None:
    if not request.future.done():
        request.future.set_exception(exc)
