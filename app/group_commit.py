"""A model's single writer: learn requests queued, learned in groups, committed in one transaction, snapshotted.

One writer task per model takes every request waiting for it (up to ``group_max_events``
events) as one *group commit*: it learns them in order, several requests per
:func:`~app.learning.learn_scored` call, numbering their events, then writes the group to
the store in one transaction on the store's thread and only then resolves the requests'
futures, so a response is sent only once its events are durable. While that commit runs the
loop learns the next group (whose commit starts once this one is done: the log stays in
order) and goes on serving predictions and queueing requests. A group holding a request with
an ``Idempotency-Key`` waits for the commit in flight before it is looked at (a retry must
find its key logged), and so does one that a due snapshot precedes (a capture is of the
durable state: :mod:`app.snapshotting`).

A request the library refuses (it checks a whole batch before learning any of it) is answered
422 and the others of its group are learned as if it had not been sent. If a commit fails, or
the library fails unexpectedly after learning part of a batch, the model is rebuilt from the
durable state (newest snapshot plus the events after it), which also undoes a group learned
behind a failed commit, and the requests that were not durable get an error; nothing
acknowledged is lost and nothing unacknowledged stays in the model.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any, Protocol

from streamtree.exceptions import InputError

from .admission import LearnRequest, admit, admitted_ids
from .exceptions import LearnFailure, Loc, NotAvailable, NotWriter, StorageFailure
from .learned_group import LearnedGroup
from .learning import bad_row, encode_events
from .ordering import Ordering
from .pacing import learn_in_stretches, stretch_events
from .pending import PendingIds
from .prequential import Prequential
from .settings import Settings
from .snapshotting import Snapshots
from .storage import EventStore, IdempotentAnswer, LeaseLost, StorageError
from .storage.thread import StoreThread
from .telemetry import Telemetry
from .validation import Limits, event_loc, field_error, input_error

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
        # the last group's commit while the next group is learned: (task, group, its texts, first seq)
        self._in_flight: tuple[asyncio.Task[BaseException | None], list[LearnRequest], LearnedGroup, int] | None = None
        self.snapshots = Snapshots(host, self._settled)
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
        self.closing = self.snapshots.closing = True
        self._wakeup.set()
        await self._task
        self.ordering.close(NotAvailable())  # what they follow will not come: nothing is taken any more
        await self.snapshots.close(snapshot)

    async def _write_loop(self) -> None:
        host = self.host
        while True:
            group: list[LearnRequest] = []
            try:
                if not self.queue:
                    # in here too: settling a commit that failed while idle rebuilds the model,
                    # and a rebuild that fails as well (the store still down) must not end the loop
                    await self._idle()
                    if self.closing and not self.queue and self._in_flight is None:
                        return
                    continue
                async with host.apply_lock:  # the group is taken under the lock: what waits for it joins it
                    group = self._take()
                    if not all(map(self._joins, group)):  # then not learned behind a commit
                        await self._durable()
                    await self._process(group)
            except Exception:  # the writer must survive anything: back to the durable state
                log.exception("model %r: writer failed", host.name)
                async with host.apply_lock:
                    with contextlib.suppress(Exception):  # the commit in flight is answered either way
                        await self._settled()
                    with contextlib.suppress(Exception):  # logged by rebuild; the model then stays unavailable
                        await host.rebuild()
                for request in group:
                    request.fail(StorageFailure())
                self.ordering.release(group)

    async def _idle(self) -> None:
        """With nothing queued: wait for a request, or for the commit in flight (then settle it,
        and snapshot if one is due), whichever comes first."""
        host = self.host
        in_flight = self._in_flight
        if in_flight is not None and not in_flight[0].done():
            await self._until_request_or(in_flight[0])  # one that comes is learned behind the commit
            return
        if in_flight is not None or self.snapshots.due():
            async with host.apply_lock:
                await self._durable()  # a snapshot may start later, at its pace: wait for requests meanwhile
        if not self.closing and not self.queue:
            self._wakeup.clear()
            await self._wakeup.wait()

    async def _durable(self) -> None:
        """Settle the commit in flight, then start the snapshot if one is due: the model is at
        its durable seq (called under the apply lock, so no group is learned meanwhile)."""
        await self._settled()
        if self.snapshots.due() and not self.host.recovering:
            self.snapshots.start()

    def _take(self, room: int | None = None) -> list[LearnRequest]:
        """The requests waiting, oldest first, up to ``room`` events (default
        ``group_max_events``); at least one."""
        group: list[LearnRequest] = []
        n = 0
        limit = self.host.settings.group_max_events if room is None else room
        while self.queue and (not group or n + len(self.queue[0].events) <= limit):
            request = self.queue.popleft()
            group.append(request)
            n += len(request.events)
        return group

    async def _process(self, group: list[LearnRequest]) -> None:
        """Learn a group of requests in chunks, then start its commit once the one before is done."""
        host = self.host
        if host.recovering:  # a rebuild failed: the model may differ from its log, learn nothing
            for request in group:
                request.fail(host.not_ready())
            self.ordering.release(group)
            return
        if not self.writable():  # another instance is the writer now: learn nothing here
            for request in group:
                request.fail(NotWriter())
            self.ordering.release(group)
            return
        done = LearnedGroup(host.pending)
        try:
            await self._process_into(group, done)
        except BaseException:  # the writer loop answers the group: what done took goes back
            done.fail(StorageFailure())
            raise

    async def _process_into(self, group: list[LearnRequest], done: LearnedGroup) -> None:
        """:meth:`_process` once the model may learn: learn ``group`` (and what joins it) into
        ``done``, then start its commit."""
        host = self.host
        await self._learn_group(group, done)
        # While the commit before is in flight, what comes meanwhile joins this group: one
        # commit (one fsync) for all of it, as if it had waited in the queue.
        while (in_flight := self._in_flight) is not None and not in_flight[0].done():
            if not self.queue:
                await self._until_request_or(in_flight[0])
                continue
            head = self.queue[0]
            if len(done.texts) + len(head.events) > host.settings.group_max_events or not self._joins(head):
                break
            more = self._take(host.settings.group_max_events - len(done.texts))
            group.extend(more)  # the caller's list: answered and released with the group
            await self._learn_group(more, done)
        if not await self._settled():  # the rebuild after the failed commit undid this group too
            done.fail(StorageFailure())
            self.ordering.release(group)
            return
        if not done.texts:
            self.ordering.release(group)
            return
        first = host.seq - len(done.texts) + 1
        task = asyncio.get_running_loop().create_task(self._append(first, done), name=f"commit:{host.name}")
        self._in_flight = (task, group, done, first)

    async def _learn_group(self, group: list[LearnRequest], done: LearnedGroup) -> None:
        """Learn the group's requests (those :meth:`_settle_keys` keeps) in chunks, into ``done``."""
        learned = await self._settle_keys(group)
        for i, chunk in enumerate(_chunks(learned, stretch_events(self.host.model, APPLY_EVENTS))):
            if i:
                await asyncio.sleep(0)  # let predictions in between two chunks
            await self._learn_chunk(chunk, done)

    def _joins(self, request: LearnRequest) -> bool:
        """Whether ``request`` may be learned behind the commit in flight: not when it has an
        ``Idempotency-Key`` (a retry must find its key logged), nor when a snapshot is due (a
        capture is of the durable state)."""
        return request.key is None and not self.snapshots.due()

    async def _until_request_or(self, task: asyncio.Task[Any]) -> None:
        """Wait until a request is queued or ``task`` is done, whichever comes first."""
        self._wakeup.clear()
        waiter = asyncio.ensure_future(self._wakeup.wait())
        try:
            await asyncio.wait((task, waiter), return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiter.cancel()

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
                    request.fail(StorageFailure())
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
                    request.fail(
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

    async def _learn_chunk(self, chunk: list[LearnRequest], done: LearnedGroup) -> None:
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
                    host.model, host.prequential, xs, ys, now, stretch_events(host.model, APPLY_EVENTS, ys)
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
            event = request.events[row] if row is not None else None
            if event is not None and event.features is None and event.id is not None and exc.field != "label":
                # a delayed label whose prediction's features the model refuses (a kind it has
                # learned since, say): they never will be learned, so the id is let go
                host.pending.take(event.id)
                message = f"The features predicted under this id cannot be learned, and the id is forgotten: {exc}"
                request.fail(field_error((*loc, "id"), message, "invalid_input"))
                return
            request.fail(input_error(exc, (*loc, "features"), (*loc, "label")))
            return
        except Exception:
            # The model may hold part of the chunk: keep the requests learned before it (commit
            # them), go back to the durable state, then retry the chunk one request at a time.
            log.exception("model %r: unexpected error while learning", host.name)
            await self._commit(done)
            done.clear()
            await host.rebuild()
            if len(chunk) > 1:
                for request in chunk:
                    await self._learn_chunk([request], done)
            else:
                chunk[0].fail(LearnFailure())
            return
        for request, error in refused:
            request.fail(error)
        for a in admitted:
            # the prediction each label was admitted with: one made under its id since stays
            for id, admitted_with in admitted_ids(a):
                if (taken := host.pending.take(id, admitted_with)) is not None:
                    done.taken.append(taken)
            host.seq += len(a.xs)
            done.texts.extend(encode_events(a.xs, a.ys, now))
            done.acks.append((a.request, len(a.xs), host.seq))
        host.advanced()

    async def _commit(self, done: LearnedGroup) -> None:
        """Log what ``done`` holds at once, after the commit in flight (the path of a failure
        while learning: what was learned before it is kept)."""
        if not await self._settled():  # the rebuild undid what done holds too
            done.fail(StorageFailure())
        elif done.texts:
            first = self.host.seq - len(done.texts) + 1
            error = await self._append(first, done)
            if error is not None:
                await self._failed(error, first, done)

    async def _append(self, first: int, done: LearnedGroup) -> BaseException | None:
        """Log the group's events (numbered from ``first``) in one transaction, then answer its
        requests; on failure return the error, its requests unanswered (:meth:`_settled`)."""
        host = self.host
        texts = done.texts
        loop = asyncio.get_running_loop()
        start = loop.time()
        try:
            keys = [IdempotentAnswer(r.key, r.body_hash, n, last) for r, n, last in done.acks if r.key is not None]
            await host.db.run(
                host.db.store.append, host.name, first, texts, keys, host.settings.idempotency_window_seconds
            )
        except Exception as exc:
            return exc
        host.telemetry.commit_seconds.observe(loop.time() - start)
        host.telemetry.commit_events.observe(len(texts))
        self._learned.inc(len(texts))
        for request, n, last in done.acks:
            if not request.future.done():
                request.future.set_result((n, last))
        return None

    async def _settled(self) -> bool:
        """Wait for the commit in flight (if any) and release what follows its requests.

        Returns False if it failed: the model was then rebuilt from the durable state, which
        also undid every group learned after it, and its requests were answered with the
        error."""
        if self._in_flight is None:
            return True
        task, group, done, first = self._in_flight
        self._in_flight = None
        try:
            error = await task
            if error is not None:
                await self._failed(error, first, done)
        finally:
            self.ordering.release(group)  # the requests that follow one of this group's, placed again
        return error is None

    async def _failed(self, error: BaseException, first: int, done: LearnedGroup) -> None:
        """A commit failed: back to the durable state, then answer its requests with the error."""
        host = self.host
        fenced = isinstance(error, LeaseLost)
        last = first + len(done.texts) - 1
        if fenced:  # not an error of this instance: another one is the writer now
            log.warning(
                "model %r: events %d..%d refused: this instance lost the writer's lease", host.name, first, last
            )
            host.on_fenced()
        else:
            log.error("model %r: commit of events %d..%d failed", host.name, first, last, exc_info=error)
        try:
            await host.rebuild()  # before answering, so the client's next request sees the durable state
        finally:
            done.fail(NotWriter() if fenced else StorageFailure())


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
