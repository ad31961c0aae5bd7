"""A hosted model: the model in memory, its single writer, its durable event log.

Concurrency design
------------------
Everything that touches a model runs on the event loop thread, in synchronous stretches
without ``await``: predictions read the model directly, and one writer task per model applies
learn requests. So a prediction sees the model between two library calls: between two whole
requests, or inside a request whose cost needed several calls (:mod:`app.pacing`). The
writer batches the requests waiting for it into one *group commit*: it learns them in order,
several requests per :func:`~app.learning.learn_scored` call, numbering their events, then
writes the group to the store in one transaction on the store's thread and only then resolves
the requests' futures, so a response is sent only once its events are durable. While that
commit runs the loop goes on serving predictions and queueing the next requests.

A request the library refuses (it checks a whole batch before learning any of it) is answered
422 and the others of its group are learned as if it had not been sent. If a commit fails, or
the library fails unexpectedly after learning part of a batch, the model is rebuilt from the
durable state (newest snapshot plus the events after it) and the requests that were not
durable get an error; nothing acknowledged is lost and nothing unacknowledged stays in the
model.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import orjson

from app.exceptions import (InvalidInput, LearnFailure, Loc, LogUnavailable, ModelUnavailable, NoLabels, NotAvailable,
                            NotWriter, Recovering, SeqNotReached, StorageFailure)
from app.learning import Restored, apply_logged, bad_row, encode_event, logged_events, restore
from app.pacing import learn_in_stretches, stretch_events
from app.pending import PendingIds
from app.recovery import reason_of
from app.schemas import label_key
from app.settings import Settings
from app.storage import EventStore, IdempotentAnswer, LeaseLost, Snapshot, StorageError
from app.storage.thread import StoreThread
from app.telemetry import Telemetry
from app.validation import Limits, event_loc, field_error
from streamtree.decision import CostMatrix, decide, decide_many
from streamtree.exceptions import DecisionError, InputError
from streamtree.inspection import limit_gauges
from streamtree.persistence import Capture
from streamtree.typing import ClassLabel

__all__ = ["APPLY_EVENTS", "KEY_LOC", "LearnEvent", "ModelHost", "label_key", "restore"]

log = logging.getLogger("streamtree.app")

LABEL_TYPES: dict[type, str] = {str: "string", int: "integer", bool: "boolean"}

#: Requests are learned together, one library call for several, until they hold this many
#: events (a larger request is learned alone); predictions run between two such calls.
APPLY_EVENTS = 1_000

#: Where a refused ``Idempotency-Key`` is, in a 422's ``loc``.
KEY_LOC: Loc = ("header", "Idempotency-Key")


class LearnEvent(NamedTuple):
    """One event of a learn request, as the HTTP layer checked it."""

    features: dict[str, Any] | None
    """The features, or None for a delayed label (then ``id`` names the prediction)."""
    label: ClassLabel
    """The label."""
    id: str | int | None
    """The id of an earlier prediction this event labels, if any."""


@dataclass
class _LearnRequest:
    events: Sequence[LearnEvent]
    batch: bool
    future: asyncio.Future[tuple[int, int]]
    key: str | None = None
    body_hash: str = ""


@dataclass
class _Admitted:
    """A request whose events passed the checks that need the model's state."""

    request: _LearnRequest
    xs: list[dict[str, Any]]
    ys: list[ClassLabel]


@dataclass
class _Labels:
    """What the requests learned so far in a chunk leave for the next one: labels, their type, used ids."""

    known: set[ClassLabel]
    kind: type | None
    used_ids: set[str | int] = field(default_factory=set)


@dataclass
class _Group:
    """The requests of one group commit learned so far, with their log texts."""

    texts: list[str] = field(default_factory=list)
    acks: list[tuple[_LearnRequest, int, int]] = field(default_factory=list)  # (request, learned, last seq)


class ModelHost:
    """One model held in memory, served and learned by its single writer.

    Parameters
    ----------
    name
        The model's name.
    config
        Its complete config (``model.get_config()``).
    restored
        The state to start from (see :func:`restore`).
    model_cls
        Builds models from configs (the registry's ``model_cls``).
    settings, db, telemetry
        Service settings, the store's thread and the Prometheus metrics.
    writable
        Whether this instance is the writer now (always, by default: a store of its own);
        while it is not, queued learn requests get :class:`~app.exceptions.NotWriter`.

    Attributes
    ----------
    apply_lock
        Held while the model's state changes over an ``await``: by the writer's group
        commit and by a replica's catching up with the log, which never overlap.
    on_fenced
        Called when the store refused a commit because another instance took the writer's lease.
    """

    def __init__(self, name: str, config: dict[str, Any], restored: Restored, model_cls: Any,
                 settings: Settings, db: StoreThread, telemetry: Telemetry,
                 writable: Callable[[], bool] | None = None) -> None:
        self.name = name
        self.config = config
        self.model_cls = model_cls
        self.model = restored.model
        self.prequential = restored.prequential
        self.seq = restored.seq
        self.snapshot_seq = restored.snapshot_seq
        self.snapshot_bytes = 0  # of the newest snapshot this instance wrote (a gauge)
        self.settings = settings
        self.limits = Limits.from_settings(settings)
        self.db = db
        self.telemetry = telemetry
        self._predicted = telemetry.predicted.labels(name)
        self._learned = telemetry.learned.labels(name)
        self.pending = PendingIds(settings.pending_max, settings.pending_max_bytes, settings.pending_ttl_seconds)
        self.recovering = False
        #: Why the model could not be rebuilt from the store, if so (then ``recovering`` stays
        #: True and every route answers 503 with it, until a rebuild succeeds: :mod:`app.recovery`).
        self.unavailable: str | None = None
        self.on_unavailable: Callable[[], None] = lambda: None  # called when ``unavailable`` changes
        self.apply_lock = asyncio.Lock()
        self.on_fenced: Callable[[], None] = lambda: None
        self._writable = writable if writable is not None else (lambda: True)
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []
        self._queue: deque[_LearnRequest] = deque()
        self._wakeup = asyncio.Event()
        self._closing = False
        self._saving: asyncio.Task[None] | None = None  # the snapshot being encoded and saved
        self._writer = asyncio.get_running_loop().create_task(self._write_loop(), name=f"writer:{name}")

    # ------------------------------------------------------------------ reading
    def _check_readable(self) -> None:
        if self._closing:
            raise NotAvailable()
        if self.recovering:
            raise self._not_ready()

    def _not_ready(self) -> Recovering:
        return Recovering() if self.unavailable is None else ModelUnavailable(self.name, self.unavailable)

    def predict_one(self, x: dict[str, Any], key: str | int | None = None, trusted: bool = True) -> dict[str, float]:
        """Class probabilities for one instance; with ``key``, remember ``x`` for a delayed label.

        Raises
        ------
        PendingIdTaken, PendingFull
            ``key`` is pending already, or there is no room for it (:class:`~app.pending.PendingIds`;
            ``trusted``: the caller showed an API key); nothing changed.
        """
        self._check_readable()
        try:
            proba = self.model.predict_proba_one(x)
        except InputError as exc:
            raise _input_error(exc, ("body", "features")) from None
        if key is not None:
            self.pending.put(key, x, trusted)
        self._predicted.inc()
        return {label_key(c): p for c, p in proba.items()}

    def predict_many(self, xs: list[dict[str, Any]]) -> list[dict[str, float]]:
        """Class probabilities for each instance (``{}`` for each before any label)."""
        self._check_readable()
        classes = list(self.model.classes_)
        if not classes or not xs:
            out: list[dict[str, float]] = [{} for _ in xs]
        else:
            try:
                rows = self.model.predict_proba(xs).tolist()
            except InputError as exc:
                raise _input_error(exc, ("body", "instances")) from None
            keys = [label_key(c) for c in classes]
            out = [dict(zip(keys, row, strict=True)) for row in rows]
        self._predicted.inc(len(xs))
        return out

    def _labels_for(self, costs: CostMatrix) -> list[str]:
        """The model's labels (as JSON keys), once ``costs`` is known to cover each of them.

        Raises
        ------
        NoLabels
            The model has learned no label yet.
        InvalidInput
            At ``("body", "costs", decision)``: a decision has no cost for one of the labels.
        """
        keys = [label_key(c) for c in self.model.classes_]
        if not keys:
            raise NoLabels()
        try:
            costs.select(keys)
        except DecisionError as exc:
            raise field_error(("body", "costs", str(exc.decision)), f"This decision has no cost for the model's "
                              f"label {label_key(exc.label)!r}: give every decision a cost for every label",
                              "costs_missing_label") from None
        return keys

    def decide_one(self, x: dict[str, Any], costs: CostMatrix, key: str | int | None = None,
                   trusted: bool = True) -> dict[str, Any]:
        """The decision of least expected cost for one instance (with ``key``, remembered for a
        delayed label as by :meth:`predict_one`): ``{"decision", "expected_costs", "probabilities"}``.

        Raises
        ------
        NoLabels, InvalidInput
            As :meth:`_labels_for`; checked before the instance is predicted (no id is kept).
        """
        self._check_readable()
        self._labels_for(costs)
        proba = self.predict_one(x, key, trusted)
        d = decide(proba, costs)
        return {"decision": d.decision, "expected_costs": d.expected_costs, "probabilities": proba}

    def decide_many(self, xs: list[dict[str, Any]], costs: CostMatrix) -> dict[str, Any]:
        """The decisions for a batch, in one vectorised pass:
        ``{"decisions", "expected_costs", "probabilities"}``, a list each."""
        self._check_readable()
        keys = self._labels_for(costs)
        try:
            proba = self.model.predict_proba(xs)
        except InputError as exc:
            raise _input_error(exc, ("body", "instances")) from None
        self._predicted.inc(len(xs))
        result = decide_many(proba, costs, classes=keys, check_input=False)
        options = result.options
        return {"decisions": result.decisions,
                "expected_costs": [dict(zip(options, row, strict=True)) for row in result.expected_costs.tolist()],
                "probabilities": [dict(zip(keys, row, strict=True)) for row in proba.tolist()]}

    def explain(self, x: dict[str, Any]) -> dict[str, Any]:
        """The library's explanation of the prediction for ``x``."""
        self._check_readable()
        try:
            result: dict[str, Any] = self.model.explain_one(x)
        except InputError as exc:
            raise _input_error(exc, ("body", "features")) from None
        return result

    def tree(self) -> dict[str, Any]:
        """The tree as plain data."""
        self._check_readable()
        tree: dict[str, Any] = self.model.tree_
        return tree

    def summary(self) -> dict[str, Any]:
        """The library's summary of the model."""
        self._check_readable()
        summary: dict[str, Any] = self.model.summary()
        return summary

    def metrics(self) -> dict[str, Any]:
        """Prequential metrics over all events and the recent window."""
        self._check_readable()
        return {"seq": self.seq} | self.prequential.report()

    def history(self, after: int = 0) -> bytes:
        """The metrics history as JSON: points and drift events with ``seq > after``."""
        self._check_readable()
        return self.prequential.history.encoded_report(after)

    async def events(self, after: int, limit: int) -> list[dict[str, Any]]:
        """Up to ``limit`` logged (durable) events with ``seq > after``: ``{"seq", "features", "label"}``.

        Raises
        ------
        NotAvailable
            The model is being deleted or the service is stopping.
        LogUnavailable
            The store could not be read.
        """
        if self._closing:
            raise NotAvailable()
        try:
            return await self.db.run(logged_events, self.db.store, self.name, after, limit)
        except StorageError:
            log.exception("model %r: reading the event log after seq %d failed", self.name, after)
            raise LogUnavailable() from None

    async def wait_applied(self, seq: int, timeout: float) -> None:
        """Return once this instance's model holds event ``seq`` (read-your-writes), waiting at most ``timeout`` s.

        Raises
        ------
        SeqNotReached
            Not within ``timeout`` seconds.
        """
        if self.seq >= seq:
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        waiter = (seq, future)
        self._waiters.append(waiter)
        try:
            await asyncio.wait_for(future, timeout)
        except TimeoutError:
            raise SeqNotReached(self.name, self.seq, seq, timeout) from None
        finally:
            if waiter in self._waiters:
                self._waiters.remove(waiter)

    def _advanced(self) -> None:
        """Wake the :meth:`wait_applied` callers whose seq the model has reached."""
        if not self._waiters:
            return
        for seq, future in self._waiters:
            if seq <= self.seq and not future.done():
                future.set_result(None)
        self._waiters = [(s, f) for s, f in self._waiters if not f.done()]

    def apply_logged(self, page: Sequence[tuple[int, str]]) -> None:
        """Learn a page of the log that follows :attr:`seq`, as the replay does (a replica
        following the writer; the caller holds :attr:`apply_lock`).

        Raises
        ------
        RuntimeError
            The page does not follow :attr:`seq`, or the library refuses an event (see
            :func:`app.learning.apply_logged`).
        """
        self.seq = apply_logged(self.model, self.prequential, self.seq, self.name, page)
        self._advanced()

    async def resync(self) -> None:
        """Rebuild the model from the store (snapshot and log), as after a failure."""
        async with self.apply_lock:
            await self._rebuild()

    def gauges(self) -> dict[str, float]:
        """Size figures for the Prometheus collector (empty while recovering)."""
        if self.recovering:
            return {}
        s = self.model.summary()
        drift = s["drift"]
        return {"nodes": s.get("n_nodes", 0), "leaves": s.get("n_leaves", 0), "depth": s.get("depth", 0),
                "examples": s.get("n_examples", 0), "classes": len(s.get("classes", ())),
                "seq": self.seq, "pending_ids": len(self.pending), "snapshot_bytes": self.snapshot_bytes,
                "drift_detections": drift["n_detections"], "drift_swaps": drift["n_swaps"],
                "drift_background": float(drift["background"] is not None)} | limit_gauges(s)

    # ------------------------------------------------------------------ writing
    async def learn(self, events: Sequence[LearnEvent], batch: bool,
                    key: str | None = None, body_hash: str = "") -> tuple[int, int]:
        """Queue a request's events for the writer; return ``(learned, seq)`` once durable.

        With an idempotency ``key``, a request the model logged with that key (within the
        ``idempotency_window_seconds`` setting) is not learned again: it gets the first answer
        if its ``body_hash`` is the first request's, else a 422. The writer checks and records
        keys in order, so two requests with one key are never both learned.

        Raises
        ------
        InvalidInput
            An event is refused (unknown id, label type or limit, or the library's InputError),
            or ``key`` was used with another body; none of the request's events was learned.
        StorageFailure, NotAvailable, Recovering, LearnFailure
            The events were not learned.
        """
        if self._closing:
            raise NotAvailable()
        if self.recovering:
            raise self._not_ready()
        future: asyncio.Future[tuple[int, int]] = asyncio.get_running_loop().create_future()
        self._queue.append(_LearnRequest(events, batch, future, key, body_hash))
        self._wakeup.set()
        return await future

    async def close(self, snapshot: bool) -> None:
        """Stop taking requests, finish (and acknowledge) the queued ones, optionally snapshot."""
        self._closing = True
        self._wakeup.set()
        await self._writer
        if self._saving is not None:
            await self._saving
        if snapshot and self.seq > self.snapshot_seq and not self.recovering:
            await self._snapshot()

    async def _write_loop(self) -> None:
        while True:
            if not self._queue:
                if self._closing:
                    return
                self._wakeup.clear()
                await self._wakeup.wait()
                continue
            group: list[_LearnRequest] = []
            n = 0
            while self._queue and (not group or n + len(self._queue[0].events) <= self.settings.group_max_events):
                request = self._queue.popleft()
                group.append(request)
                n += len(request.events)
            try:
                async with self.apply_lock:
                    await self._process(group)
                    if self.seq - self.snapshot_seq >= self.settings.snapshot_every:
                        self._start_snapshot()
            except Exception:  # the writer must survive anything: back to the durable state
                log.exception("model %r: writer failed", self.name)
                with contextlib.suppress(Exception):  # logged in _rebuild; the model then stays unavailable
                    await self._rebuild()
                for request in group:
                    _fail(request, StorageFailure())

    async def _process(self, group: list[_LearnRequest]) -> None:
        """Learn a group of requests in chunks, then commit them in one transaction."""
        if self.recovering:  # a rebuild failed: the model may differ from its log, learn nothing
            for request in group:
                _fail(request, self._not_ready())
            return
        if not self._writable():  # another instance is the writer now: learn nothing here
            for request in group:
                _fail(request, NotWriter())
            return
        group = await self._settle_keys(group)
        done = _Group()
        for i, chunk in enumerate(_chunks(group, stretch_events(self.model, APPLY_EVENTS))):
            if i:
                await asyncio.sleep(0)  # let predictions in between two chunks
            await self._learn_chunk(chunk, done)
        await self._commit(done)

    async def _settle_keys(self, group: list[_LearnRequest]) -> list[_LearnRequest]:
        """Answer the group's requests whose idempotency key is logged; return those to learn.

        A request whose key is logged gets the first answer (same body) or a 422 (another
        body) and is not learned. A request whose key an earlier request of the group holds
        goes back to the head of the queue: the next group finds the key logged if the
        earlier one was learned, and learns it otherwise.
        """
        keys = list({r.key for r in group if r.key is not None and not r.future.done()})
        if not keys:
            return group
        try:
            found = await self.db.run(_find_keys, self.db.store, self.name, keys,
                                      self.settings.idempotency_window_seconds)
        except StorageError:
            log.exception("model %r: reading idempotency keys failed", self.name)
            for request in group:
                if request.key is not None:
                    _fail(request, StorageFailure())
            return [r for r in group if r.key is None]
        kept: list[_LearnRequest] = []
        later: list[_LearnRequest] = []
        held: set[str] = set()
        for request in group:
            if request.key is None:
                kept.append(request)
            elif (answer := found.get(request.key)) is not None:
                if answer.body_hash != request.body_hash:
                    _fail(request, field_error(KEY_LOC, "This Idempotency-Key was used with another request "
                                               "body; use a new key for a new request", "idempotency_key_reused"))
                elif not request.future.done():
                    request.future.set_result((answer.learned, answer.seq))
            elif request.key in held:
                later.append(request)
            else:
                held.add(request.key)
                kept.append(request)
        self._queue.extendleft(reversed(later))
        return kept

    async def _learn_chunk(self, chunk: list[_LearnRequest], done: _Group) -> None:
        """Learn a chunk of requests with one library call; add the learned ones to ``done``.

        A request refused by the checks that need the model's state is answered 422 and the
        others are learned as if it had not been sent. When the library refuses the batch, or
        fails unexpectedly, the chunk's requests are learned one at a time instead, so that
        only the request at fault is refused.
        """
        chunk = [r for r in chunk if not r.future.done()]  # a client that went away learns nothing
        if not chunk:
            return
        admitted, refused = self._admit(chunk)
        xs = [x for a in admitted for x in a.xs]
        ys = [y for a in admitted for y in a.ys]
        now = round(time.time(), 3)  # the arrival time, logged: the metrics history replays with it
        try:
            if xs:  # in stretches that leave the loop free in between (app.pacing)
                await learn_in_stretches(self.model, self.prequential, xs, ys, now,
                                         stretch_events(self.model, APPLY_EVENTS))
        except InputError as exc:  # nothing was learned
            if len(chunk) > 1:
                for request in chunk:
                    await self._learn_chunk([request], done)
                return
            request = chunk[0]
            row = bad_row(self.model, xs, exc)
            loc = event_loc(request.batch, "events", row) if row is not None else (
                ("body", "events") if request.batch else ("body",))
            _fail(request, _input_error(exc, (*loc, "features"), (*loc, "label")))
            return
        except Exception:
            # The model may hold part of the chunk: keep the requests learned before it (commit
            # them), go back to the durable state, then retry the chunk one request at a time.
            log.exception("model %r: unexpected error while learning", self.name)
            await self._commit(done)
            done.texts, done.acks = [], []
            await self._rebuild()
            if len(chunk) > 1:
                for request in chunk:
                    await self._learn_chunk([request], done)
            else:
                _fail(chunk[0], LearnFailure())
            return
        for request, error in refused:
            _fail(request, error)
        for a in admitted:
            for event in a.request.events:
                if event.id is not None:
                    self.pending.discard(event.id)
            self.seq += len(a.xs)
            done.texts.extend(encode_event(x, y, now) for x, y in zip(a.xs, a.ys, strict=True))
            done.acks.append((a.request, len(a.xs), self.seq))
        self._advanced()

    def _admit(self, chunk: list[_LearnRequest]) -> tuple[list[_Admitted], list[tuple[_LearnRequest, InvalidInput]]]:
        """Run the checks that need the model's state on each request, in order, as if each
        earlier admitted request had been learned: delayed-label ids, label type, label count."""
        classes = self.model.classes_
        labels = _Labels(set(classes), type(classes[0]) if classes else None)
        admitted: list[_Admitted] = []
        refused: list[tuple[_LearnRequest, InvalidInput]] = []
        for request in chunk:
            try:
                admitted.append(self._resolve(request, labels))
            except InvalidInput as exc:
                refused.append((request, exc))
        return admitted, refused

    def _resolve(self, request: _LearnRequest, labels: _Labels) -> _Admitted:
        """The request's features and labels, checked; ``labels`` is updated only if it passes."""
        xs: list[dict[str, Any]] = []
        locs: list[Loc] = []
        for i, event in enumerate(request.events):
            loc = event_loc(request.batch, "events", i)
            x = event.features
            if x is None:
                assert event.id is not None
                x = None if event.id in labels.used_ids else self.pending.get(event.id)
                if x is None:
                    raise field_error((*loc, "id"), "No pending prediction has this id (unknown or expired)",
                                      "unknown_id")
            xs.append(x)
            locs.append(loc)
        ys = [event.label for event in request.events]
        kind, new = labels.kind, set[ClassLabel]()
        for y, loc in zip(ys, locs, strict=True):
            if kind is None:
                kind = type(y)
            elif type(y) is not kind:
                raise field_error((*loc, "label"), f"Labels of this model are of type {LABEL_TYPES[kind]}, "
                                  f"not {LABEL_TYPES[type(y)]}", "label_type")
            if y not in labels.known and y not in new:
                if len(labels.known) + len(new) >= self.limits.max_labels:
                    raise field_error((*loc, "label"),
                                      f"The model already has the maximum of {self.limits.max_labels} labels",
                                      "too_many_labels")
                new.add(y)
        labels.known |= new
        labels.kind = kind
        labels.used_ids.update(e.id for e in request.events if e.id is not None)
        return _Admitted(request, xs, ys)

    async def _commit(self, done: _Group) -> None:
        """Log the group's events in one transaction, then answer its requests."""
        texts = done.texts
        if not texts:
            return
        first = self.seq - len(texts) + 1
        loop = asyncio.get_running_loop()
        start = loop.time()
        try:
            keys = [IdempotentAnswer(r.key, r.body_hash, n, last) for r, n, last in done.acks if r.key is not None]
            await self.db.run(self.db.store.append, self.name, first, texts, keys,
                              self.settings.idempotency_window_seconds)
        except Exception as exc:
            fenced = isinstance(exc, LeaseLost)
            if fenced:  # not an error of this instance: another one is the writer now
                log.warning("model %r: events %d..%d refused: this instance lost the writer's lease",
                            self.name, first, self.seq)
                self.on_fenced()
            else:
                log.exception("model %r: commit of events %d..%d failed", self.name, first, self.seq)
            try:
                await self._rebuild()  # before answering, so the client's next request sees the durable state
            finally:
                for request, _, _ in done.acks:
                    _fail(request, NotWriter() if fenced else StorageFailure())
            return
        self.telemetry.commit_seconds.observe(loop.time() - start)
        self.telemetry.commit_events.observe(len(texts))
        self._learned.inc(len(texts))
        for request, n, last in done.acks:
            if not request.future.done():
                request.future.set_result((n, last))

    async def _rebuild(self) -> None:
        """Replace the in-memory state with the durable one (snapshot + log)."""
        self.recovering = True
        try:
            restored = await self.db.run(restore, self.db.store, self.name, self.config, self.model_cls,
                                         self.settings)
        except Exception as exc:
            # The in-memory model may differ from the log: refuse (503, saying why) until a rebuild succeeds.
            log.exception("model %r: rebuild failed; the model stays unavailable until one succeeds", self.name)
            self.unavailable = reason_of(exc)
            self.on_unavailable()
            raise
        self.model, self.prequential = restored.model, restored.prequential
        self.seq, self.snapshot_seq = restored.seq, restored.snapshot_seq
        self.recovering = False
        if self.unavailable is not None:
            self.unavailable = None
            self.on_unavailable()
        self._advanced()
        log.warning("model %r: rebuilt from the store at seq %d", self.name, self.seq)

    def _start_snapshot(self) -> None:
        """Capture the current (fully durable) state and save it in the background, unless a
        save is under way (the next group starts one then)."""
        if self._saving is None or self._saving.done():
            captured = self._capture()
            if captured is not None:
                self._saving = asyncio.get_running_loop().create_task(self._save(*captured),
                                                                      name=f"snapshot:{self.name}")

    async def _snapshot(self) -> None:
        """Write a snapshot of the current (fully durable) state; a failure is only logged."""
        captured = self._capture()
        if captured is not None:
            await self._save(*captured)

    def _capture(self) -> tuple[int, Capture, dict[str, Any]] | None:
        """The state at ``self.seq``, copied: only memory copies (a few ms for a large model),
        so that the encoding (tens of ms) can run in a thread while requests are answered."""
        try:
            return self.seq, self.model.capture(), {"prequential": self.prequential.state()}
        except Exception:
            log.exception("model %r: snapshot at seq %d failed (the log still has every event)", self.name, self.seq)
            return None

    async def _save(self, seq: int, captured: Capture, state: dict[str, Any]) -> None:
        """Encode a capture in a thread and save it on the store's; a failure is only logged."""
        try:
            snap = await asyncio.to_thread(_encode_snapshot, seq, captured, state)
            await self.db.run(self.db.store.save_snapshot, self.name, snap, self.settings.snapshots_kept)
        except LeaseLost:  # not a failure: another instance is the writer now, and snapshots
            log.warning("model %r: no snapshot at seq %d: this instance lost the writer's lease", self.name, seq)
            return
        except Exception:
            log.exception("model %r: snapshot at seq %d failed (the log still has every event)", self.name, seq)
            return
        if snap.seq > self.snapshot_seq:  # a rebuild meanwhile may have restored a newer one
            self.snapshot_seq, self.snapshot_bytes = snap.seq, len(snap.model_bytes)
        self.telemetry.snapshots.labels(self.name).inc()


def _encode_snapshot(seq: int, captured: Capture, state: dict[str, Any]) -> Snapshot:
    return Snapshot(seq, captured.to_bytes(), orjson.dumps(state).decode())


def _chunks(group: list[_LearnRequest], size: int) -> Iterator[list[_LearnRequest]]:
    """Consecutive requests holding at most ``size`` events together (a larger one alone)."""
    chunk: list[_LearnRequest] = []
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


def _fail(request: _LearnRequest, exc: BaseException) -> None:
    if not request.future.done():
        request.future.set_exception(exc)


def _input_error(exc: InputError, features_loc: Loc, label_loc: Loc | None = None) -> InvalidInput:
    """The library's InputError as a refusal naming the field (a feature, or the label)."""
    name = getattr(exc, "field", None)
    if name == "label" and label_loc is not None:
        loc: Loc = label_loc
    elif isinstance(name, (str, int)):
        loc = (*features_loc, name)
    else:
        loc = features_loc
    return field_error(loc, str(exc), "invalid_input")
