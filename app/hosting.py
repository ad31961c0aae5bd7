"""A hosted model: the model in memory, its single writer, its durable event log.

Concurrency design
------------------
Everything that touches a model runs on the event loop thread, in synchronous stretches
without ``await``: predictions read the model directly, and one writer task per model applies
learn requests. So a prediction always sees the model between two whole requests. The
writer batches the requests waiting for it into one *group commit*: it applies them in order,
numbering their events, then writes the group to SQLite in one transaction on the database
thread and only then resolves the requests' futures, so a response is sent only once its
events are durable. While that commit runs the loop goes on serving predictions.

If a commit fails, or the library rejects an event in the middle of a batch (after earlier
events of the same request were applied), the model is rebuilt from the durable state
(newest snapshot plus the events after it) and the requests that were not durable get an
error; nothing acknowledged is lost and nothing unacknowledged stays in the model.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

import orjson
from fastapi.exceptions import RequestValidationError

from app.history import History
from app.pending import PendingIds
from app.prequential import Prequential
from app.schemas import Event
from app.settings import Settings
from app.storage import Snapshot, Store
from app.telemetry import Telemetry
from app.validation import Limits, Loc, event_loc, field_error
from streamtree.exceptions import InputError, StreamtreeError

__all__ = [
    "Database",
    "LearnFailure",
    "ModelHost",
    "NotAvailable",
    "Recovering",
    "StorageFailure",
    "label_key",
    "restore",
]

log = logging.getLogger("streamtree.app")
T = TypeVar("T")

LABEL_TYPES: dict[type, str] = {str: "string", int: "integer", bool: "boolean"}


def label_key(label: Any) -> str:
    """The JSON object key of a label: booleans as ``true``/``false``, integers in decimal."""
    if label is True:
        return "true"
    if label is False:
        return "false"
    return str(label)


def encode_event(features: dict[str, Any], label: Any, t: float | None = None) -> str:
    """The log's text for one event (exact: floats are written in shortest round-trip form).

    ``t`` is the arrival time (Unix seconds): the metrics history replays with it.
    """
    event: dict[str, Any] = {"x": features, "y": label}
    if t is not None:
        event["t"] = t
    return orjson.dumps(event).decode()


class NotAvailable(Exception):
    """The model was deleted or the service is shutting down."""


class StorageFailure(Exception):
    """The event log could not be written; the request's events were not learned."""


class Recovering(Exception):
    """The model is being rebuilt from its durable state after a failure."""


class LearnFailure(Exception):
    """The library failed unexpectedly on the request; none of its events was learned."""


class Database:
    """The :class:`~app.storage.Store`, used from one dedicated thread only."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="streamtree-db")

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(*args)`` on the database thread without blocking the event loop."""
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)

    def close(self) -> None:
        """Close the store on its thread, then stop the thread."""
        self._pool.submit(self.store.close).result()
        self._pool.shutdown()


@dataclass
class Restored:
    """A model's in-memory state rebuilt from the store."""

    model: Any
    prequential: Prequential
    seq: int
    snapshot_seq: int


def _learn_scored(model: Any, prequential: Prequential, x: dict[str, Any], y: Any, t: float | None = None) -> None:
    proba = model.predict_proba_one(x)
    model.learn_one(x, y)
    prequential.update(proba, y, t)


def restore(store: Store, name: str, config: dict[str, Any], model_cls: Any, settings: Settings) -> Restored:
    """Load the newest readable snapshot of a model and replay the events logged after it.

    Runs on the database thread. A snapshot the library cannot read (for example one written
    by an incompatible version) is skipped with a warning: the log alone rebuilds the model.

    Raises
    ------
    RuntimeError
        If the log has a gap or holds an event the library refuses: the service must not
        start with a model that differs from its log.
    """
    restored: Restored | None = None
    for snap in store.snapshots(name):
        try:
            model = model_cls.from_bytes(snap.model_bytes)
            state = orjson.loads(snap.state)
            preq = Prequential.from_state(state["prequential"])
        except (StreamtreeError, ValueError, KeyError, TypeError) as exc:
            log.warning("model %r: snapshot at seq %d unreadable (%s); trying an older one", name, snap.seq, exc)
            continue
        restored = Restored(model, preq, snap.seq, snap.seq)
        break
    if restored is None:
        history = History(settings.history_every, settings.history_seconds, settings.history_points)
        restored = Restored(model_cls(**config),
                            Prequential(settings.metrics_window, settings.metrics_bins, history), 0, 0)
    for seq, text in store.events_after(name, restored.seq):
        if seq != restored.seq + 1:
            raise RuntimeError(f"model {name!r}: event log jumps from seq {restored.seq} to {seq}")
        event = orjson.loads(text)
        try:
            _learn_scored(restored.model, restored.prequential, event["x"], event["y"], event.get("t"))
        except StreamtreeError as exc:
            raise RuntimeError(f"model {name!r}: logged event {seq} cannot be replayed: {exc}") from exc
        restored.prequential.history.merge_drifts(restored.model)  # metrics history hook
        restored.seq = seq
    return restored


@dataclass
class _LearnRequest:
    events: list[Event]
    batch: bool
    future: asyncio.Future[tuple[int, int]]


class _PartiallyApplied(Exception):
    """The library refused event ``index`` > 0 of a request after earlier ones were learned."""

    def __init__(self, error: RequestValidationError) -> None:
        self.error = error


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
        The model class (``streamtree.ProbabilityTree``).
    settings, db, telemetry
        Service settings, the database thread and the Prometheus metrics.
    """

    def __init__(self, name: str, config: dict[str, Any], restored: Restored, model_cls: Any,
                 settings: Settings, db: Database, telemetry: Telemetry) -> None:
        self.name = name
        self.config = config
        self.model_cls = model_cls
        self.model = restored.model
        self.prequential = restored.prequential
        self.seq = restored.seq
        self.snapshot_seq = restored.snapshot_seq
        self.settings = settings
        self.limits = Limits.from_settings(settings)
        self.db = db
        self.telemetry = telemetry
        self._predicted = telemetry.predicted.labels(name)
        self.pending = PendingIds(settings.pending_max, settings.pending_ttl_seconds)
        self.recovering = False
        self._queue: deque[_LearnRequest] = deque()
        self._wakeup = asyncio.Event()
        self._closing = False
        self._writer = asyncio.get_running_loop().create_task(self._write_loop(), name=f"writer:{name}")

    # ------------------------------------------------------------------ reading
    def _check_readable(self) -> None:
        if self._closing:
            raise NotAvailable()
        if self.recovering:
            raise Recovering()

    def predict_one(self, x: dict[str, Any], key: str | int | None = None) -> dict[str, float]:
        """Class probabilities for one instance; with ``key``, remember ``x`` for a delayed label."""
        self._check_readable()
        try:
            proba = self.model.predict_proba_one(x)
        except InputError as exc:
            raise _input_error(exc, ("body", "features")) from None
        if key is not None:
            self.pending.put(key, x)
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

    def history(self, after: int = 0) -> dict[str, Any]:
        """The metrics history: points and drift events with ``seq > after``."""
        self._check_readable()
        return self.prequential.history.report(after)

    def gauges(self) -> dict[str, float]:
        """Size figures for the Prometheus collector (empty while recovering)."""
        if self.recovering:
            return {}
        s = self.model.summary()
        drift = s["drift"]
        return {"nodes": s.get("n_nodes", 0), "leaves": s.get("n_leaves", 0), "depth": s.get("depth", 0),
                "examples": s.get("n_examples", 0), "classes": len(s.get("classes", ())),
                "seq": self.seq, "pending_ids": len(self.pending),
                "drift_detections": drift["n_detections"], "drift_swaps": drift["n_swaps"],
                "drift_background": float(drift["background"] is not None)}

    # ------------------------------------------------------------------ writing
    async def learn(self, events: list[Event], batch: bool) -> tuple[int, int]:
        """Queue a request's events for the writer; return ``(learned, seq)`` once durable.

        Raises
        ------
        RequestValidationError
            An event is refused (unknown id, label type or limit, or the library's InputError);
            none of the request's events was learned.
        StorageFailure, NotAvailable, Recovering
            The events were not learned.
        """
        if self._closing:
            raise NotAvailable()
        if self.recovering:
            raise Recovering()
        future: asyncio.Future[tuple[int, int]] = asyncio.get_running_loop().create_future()
        self._queue.append(_LearnRequest(events, batch, future))
        self._wakeup.set()
        return await future

    async def close(self, snapshot: bool) -> None:
        """Stop taking requests, finish (and acknowledge) the queued ones, optionally snapshot."""
        self._closing = True
        self._wakeup.set()
        await self._writer
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
                await self._process(group)
                if self.seq - self.snapshot_seq >= self.settings.snapshot_every:
                    await self._snapshot()
            except Exception:  # the writer must survive anything: back to the durable state
                log.exception("model %r: writer failed", self.name)
                with contextlib.suppress(Exception):  # logged in _rebuild; the model then stays unavailable
                    await self._rebuild()
                for request in group:
                    _fail(request, StorageFailure())

    async def _process(self, group: list[_LearnRequest]) -> None:
        if self.recovering:  # a rebuild failed: the model may differ from its log, learn nothing
            for request in group:
                _fail(request, Recovering())
            return
        texts: list[str] = []
        applied: list[tuple[_LearnRequest, int, int]] = []
        for request in group:
            if request.future.done():  # the client went away before its turn: learn nothing
                continue
            try:
                request_texts = self._apply(request)
            except RequestValidationError as exc:
                _fail(request, exc)
                continue
            except (_PartiallyApplied, Exception) as exc:
                # The model may hold part of this request: keep the requests before it (commit
                # them), then go back to the durable state before answering this one.
                if not isinstance(exc, _PartiallyApplied):
                    log.exception("model %r: unexpected error while learning", self.name)
                await self._commit(texts, applied)
                texts, applied = [], []
                await self._rebuild()
                _fail(request, exc.error if isinstance(exc, _PartiallyApplied) else LearnFailure())
                continue
            self.seq += len(request_texts)
            texts.extend(request_texts)
            applied.append((request, len(request_texts), self.seq))
            await asyncio.sleep(0)  # let predictions in between two requests
        await self._commit(texts, applied)

    def _apply(self, request: _LearnRequest) -> list[str]:
        """Apply one request's events to the model (synchronously), or none of them.

        Returns the log texts of its events. The checks that need the model's state (delayed
        label ids, label type, label count) run before anything is learned.
        """
        model = self.model
        resolved: list[tuple[dict[str, Any], Any, Loc]] = []
        for i, event in enumerate(request.events):
            loc = event_loc(request.batch, "events", i)
            x = event.features
            if x is None:
                x = self.pending.get(event.id)  # type: ignore[arg-type]
                if x is None:
                    raise field_error((*loc, "id"), "No pending prediction has this id (unknown or expired)",
                                      "unknown_id")
            resolved.append((x, event.label, loc))

        classes = list(model.classes_)
        known = set(classes)
        label_type = type(classes[0]) if classes else None
        for _, y, loc in resolved:
            if label_type is None:
                label_type = type(y)
            elif type(y) is not label_type:
                raise field_error((*loc, "label"),
                                  f"Labels of this model are of type {LABEL_TYPES[label_type]}, "
                                  f"not {LABEL_TYPES[type(y)]}", "label_type")
            if y not in known:
                if len(known) >= self.limits.max_labels:
                    raise field_error((*loc, "label"),
                                      f"The model already has the maximum of {self.limits.max_labels} labels",
                                      "too_many_labels")
                known.add(y)

        probas = []
        for i, (x, y, loc) in enumerate(resolved):
            try:
                probas.append(model.predict_proba_one(x))
                model.learn_one(x, y)
            except InputError as exc:
                error = _input_error(exc, (*loc, "features"), (*loc, "label"))
                if i == 0:
                    raise error from None
                raise _PartiallyApplied(error) from None
        now = round(time.time(), 3)  # the arrival time, logged for the metrics history
        for proba, (_, y, _) in zip(probas, resolved, strict=True):
            self.prequential.update(proba, y, now)
        self.prequential.history.merge_drifts(model)  # metrics history hook
        for event in request.events:
            if event.id is not None:
                self.pending.discard(event.id)
        return [encode_event(x, y, now) for x, y, _ in resolved]

    async def _commit(self, texts: list[str], applied: list[tuple[_LearnRequest, int, int]]) -> None:
        if not texts:
            return
        first = self.seq - len(texts) + 1
        loop = asyncio.get_running_loop()
        start = loop.time()
        try:
            await self.db.run(self.db.store.append, self.name, first, texts)
        except Exception:
            log.exception("model %r: commit of events %d..%d failed", self.name, first, self.seq)
            try:
                await self._rebuild()  # before answering, so the client's next request sees the durable state
            finally:
                for request, _, _ in applied:
                    _fail(request, StorageFailure())
            return
        self.telemetry.commit_seconds.observe(loop.time() - start)
        self.telemetry.commit_events.observe(len(texts))
        self.telemetry.learned.labels(self.name).inc(len(texts))
        for request, n, last in applied:
            if not request.future.done():
                request.future.set_result((n, last))

    async def _rebuild(self) -> None:
        """Replace the in-memory state with the durable one (snapshot + log)."""
        self.recovering = True
        try:
            restored = await self.db.run(restore, self.db.store, self.name, self.config, self.model_cls,
                                         self.settings)
        except Exception:
            # The in-memory model may differ from the log: keep refusing (503) until a restart.
            log.exception("model %r: rebuild failed; the model stays unavailable until restart", self.name)
            raise
        self.model, self.prequential = restored.model, restored.prequential
        self.seq, self.snapshot_seq = restored.seq, restored.snapshot_seq
        self.recovering = False
        log.warning("model %r: rebuilt from the store at seq %d", self.name, self.seq)

    async def _snapshot(self) -> None:
        """Write a snapshot of the current (fully durable) state; a failure is only logged."""
        snap = Snapshot(self.seq, self.model.to_bytes(),
                        orjson.dumps({"prequential": self.prequential.state()}).decode())
        try:
            await self.db.run(self.db.store.save_snapshot, self.name, snap, self.settings.snapshots_kept)
        except Exception:
            log.exception("model %r: snapshot at seq %d failed (the log still has every event)",
                          self.name, snap.seq)
            return
        self.snapshot_seq = snap.seq
        self.telemetry.snapshots.labels(self.name).inc()


def _fail(request: _LearnRequest, exc: BaseException) -> None:
    if not request.future.done():
        request.future.set_exception(exc)


def _input_error(exc: InputError, features_loc: Loc, label_loc: Loc | None = None) -> RequestValidationError:
    """The library's InputError as a 422 naming the field (a feature, or the label)."""
    field = getattr(exc, "field", None)
    if field == "label" and label_loc is not None:
        loc: Loc = label_loc
    elif isinstance(field, (str, int)):
        loc = (*features_loc, field)
    else:
        loc = features_loc
    return field_error(loc, str(exc), "invalid_input")
