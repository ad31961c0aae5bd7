"""A hosted model: the model in memory, its single writer, its durable event log.

Concurrency design
------------------
Everything that touches a model runs on the event loop thread, in synchronous stretches
without ``await``: predictions read the model directly (:mod:`app.reads`), and one writer
task per model learns the requests in *group commits* (:mod:`app.group_commit`), each
request checked against the model's state first (:mod:`app.admission`). So a prediction sees
the model between two library calls: between two whole requests, or inside a request whose
cost needed several calls (:mod:`app.pacing`). A replica learns the writer's log through
:meth:`ModelHost.apply_logged` instead, under the same lock.

When a commit fails, or the library fails unexpectedly, the model is rebuilt from the durable
state (:meth:`ModelHost.rebuild`: newest snapshot plus the events after it); if even that
fails, the model is *unavailable* (503 saying why) until a rebuild succeeds (:mod:`app.recovery`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from streamtree.decision import CostMatrix, decide
from streamtree.inspection import limit_gauges
from streamtree.typing import FloatArray

from .admission import LearnEvent, LearnRequest
from .exceptions import LogUnavailable, ModelUnavailable, NotAvailable, Recovering, SeqNotReached
from .group_commit import GroupCommit
from .learning import Restored, apply_logged, logged_events, restore
from .pacing import stretch_events
from .pending import IdTaken, NoRoom, PendingIds
from .reads import (
    check_answer_fits,
    decisions,
    explanation,
    labels_for,
    paced_proba_matrix,
    proba_matrix,
    proba_one,
    proba_rows,
    rows_by_label,
    tree_data,
)
from .recovery import reason_of
from .schemas import label_key
from .settings import Settings
from .storage import StorageError
from .storage.thread import StoreThread
from .telemetry import Telemetry
from .validation import Limits, check_learnable

__all__ = ["ModelHost"]

T = TypeVar("T")

log = logging.getLogger("streamtree.app")


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
    writer
        The model's single writer (:class:`~app.group_commit.GroupCommit`): its queue, its
        group commits, its snapshots.
    """

    def __init__(
        self,
        name: str,
        config: dict[str, Any],
        restored: Restored,
        model_cls: Any,
        settings: Settings,
        db: StoreThread,
        telemetry: Telemetry,
        writable: Callable[[], bool] | None = None,
    ) -> None:
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
        self.pending = PendingIds(settings.pending_max, settings.pending_max_bytes, settings.pending_ttl_seconds)
        self.recovering = False
        #: Why the model could not be rebuilt from the store, if so (then ``recovering`` stays
        #: True and every route answers 503 with it, until a rebuild succeeds: :mod:`app.recovery`).
        self.unavailable: str | None = None
        self.on_unavailable: Callable[[], None] = lambda: None  # called when ``unavailable`` changes
        self.apply_lock = asyncio.Lock()
        self.on_fenced: Callable[[], None] = lambda: None
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []
        self.writer = GroupCommit(self, writable if writable is not None else (lambda: True))

    # ------------------------------------------------------------------ reading
    def _check_readable(self) -> None:
        if self.writer.closing:
            raise NotAvailable()
        if self.recovering:
            raise self.not_ready()

    def not_ready(self) -> Recovering:
        """What a request gets while the model is rebuilt: 503, saying why if it is unavailable."""
        return Recovering() if self.unavailable is None else ModelUnavailable(self.name, self.unavailable)

    def predict_one(self, x: dict[str, Any], key: str | int | None = None, trusted: bool = True) -> dict[str, float]:
        """Class probabilities for one instance; with ``key``, remember ``x`` for a delayed label.

        Raises
        ------
        IdTaken, NoRoom
            ``key`` is pending already, or there is no room for it (:class:`~app.pending.PendingIds`;
            ``trusted``: the caller showed an API key); nothing changed.
        """
        self._check_readable()
        if key is not None:
            check_learnable(self.model, x, ("body", "features"))
        proba = proba_one(self.model, x)
        if key is not None:
            self.pending.put(key, x, trusted)
        self._predicted.inc()
        return proba

    def predict_many(
        self, xs: list[dict[str, Any]], keys: Sequence[tuple[int, str | int]] = (), trusted: bool = True
    ) -> list[dict[str, float]]:
        """Class probabilities for each instance (``{}`` for each before any label), in one
        call of the model; with ``keys`` (``(i, id)``: instance ``i`` sent with ``id``), each
        such instance is remembered for a delayed label, all or none (:meth:`remember`).

        Raises
        ------
        IdTaken, NoRoom
            As :meth:`remember`; nothing changed.
        """
        self._check_readable()
        out = proba_rows(self.model, xs)
        if keys:
            self.remember(xs, keys, trusted)
        self._predicted.inc(len(xs))
        return out

    async def predict_many_paced(
        self, xs: list[dict[str, Any]], keys: Sequence[tuple[int, str | int]] = (), trusted: bool = True
    ) -> tuple[list[dict[str, float]], int]:
        """:meth:`predict_many`, and the seq it answered at, paced (:meth:`_paced`)."""
        return await self._paced(
            xs, keys, trusted, lambda: self.predict_many(xs, keys, trusted), lambda p: rows_by_label(self.model, p), 0
        )

    async def decide_many_paced(
        self,
        xs: list[dict[str, Any]],
        costs: CostMatrix,
        keys: Sequence[tuple[int, str | int]] = (),
        trusted: bool = True,
    ) -> dict[str, Any]:
        """:meth:`decide_many` with its ``seq``, paced (:meth:`_paced`)."""
        result, seq = await self._paced(
            xs,
            keys,
            trusted,
            lambda: self.decide_many(xs, costs, keys, trusted),
            lambda p: decisions(p, costs, labels_for(self.model, costs)),
            len(costs.decisions),
        )
        return result | {"seq": seq}

    async def _paced(
        self,
        xs: list[dict[str, Any]],
        keys: Sequence[tuple[int, str | int]],
        trusted: bool,
        whole: Callable[[], T],
        answer: Callable[[FloatArray], T],
        decisions: int,
    ) -> tuple[T, int]:
        """``whole()`` for a batch that costs at most one of the writer's stretches
        (:func:`app.pacing.stretch_events`); a larger one is predicted in such stretches, the
        event loop free between two, under :attr:`apply_lock`, so that no learn changes the
        model in between, and ``answer`` is made of its probabilities: one model, at one seq,
        answers every row. With the seq it answered at.

        Raises
        ------
        InvalidInput
            At ``("body", "instances")``: the answer, a value per label (and per one of the
            ``decisions``) for each instance, would be over ``max_answer_values``
            (:func:`~app.reads.check_answer_fits`).
        """
        size = stretch_events(self.model, len(xs))
        if len(xs) <= size:
            check_answer_fits(self.model, len(xs), decisions, self.limits)
            return whole(), self.seq
        async with self.apply_lock:
            self._check_readable()  # the model may have gone while this waited
            check_answer_fits(self.model, len(xs), decisions, self.limits)
            out = answer(await paced_proba_matrix(self.model, xs, size))
            if keys:
                self.remember(xs, keys, trusted)
            self._predicted.inc(len(xs))
            return out, self.seq

    def remember(self, xs: list[dict[str, Any]], keys: Sequence[tuple[int, str | int]], trusted: bool) -> None:
        """Keep ``xs[i]`` under ``id`` for each ``(i, id)`` of ``keys``, all or none, in one
        :meth:`~app.pending.PendingIds.put_many`.

        Raises
        ------
        InvalidInput
            An instance kept has a value the model would refuse to learn
            (:func:`~app.validation.check_learnable`); nothing changed.
        IdTaken, NoRoom
            Their ``index`` is the batch's instance ``i`` of the first id refused; nothing changed.
        """
        for i, _ in keys:
            check_learnable(self.model, xs[i], ("body", "instances", i, "features"))
        try:
            self.pending.put_many([(key, xs[i]) for i, key in keys], trusted)
        except IdTaken as exc:
            raise IdTaken(keys[exc.index][0]) from None
        except NoRoom as exc:
            raise NoRoom(keys[exc.index][0]) from None

    def decide_one(
        self, x: dict[str, Any], costs: CostMatrix, key: str | int | None = None, trusted: bool = True
    ) -> dict[str, Any]:
        """The decision of least expected cost for one instance (with ``key``, remembered for a
        delayed label as by :meth:`predict_one`): ``{"decision", "expected_costs", "probabilities"}``.

        Raises
        ------
        NoLabels, InvalidInput
            As :func:`app.reads.labels_for`; checked before the instance is predicted (no id is kept).
        """
        self._check_readable()
        labels_for(self.model, costs)
        proba = self.predict_one(x, key, trusted)
        d = decide(proba, costs)
        return {"decision": d.decision, "expected_costs": d.expected_costs, "probabilities": proba}

    def decide_many(
        self,
        xs: list[dict[str, Any]],
        costs: CostMatrix,
        keys: Sequence[tuple[int, str | int]] = (),
        trusted: bool = True,
    ) -> dict[str, Any]:
        """The decisions for a batch, in one vectorised pass:
        ``{"decisions", "expected_costs", "probabilities"}``, a list each; ``keys`` as for
        :meth:`predict_many`, remembered once the batch is predicted.

        Raises
        ------
        NoLabels, InvalidInput
            As :func:`app.reads.labels_for`; no id is kept.
        IdTaken, NoRoom
            As :meth:`remember`; nothing changed.
        """
        self._check_readable()
        labels = labels_for(self.model, costs)
        result = decisions(proba_matrix(self.model, xs), costs, labels)
        if keys:
            self.remember(xs, keys, trusted)
        self._predicted.inc(len(xs))
        return result

    def explain(self, x: dict[str, Any]) -> dict[str, Any]:
        """The library's explanation of the prediction for ``x``."""
        self._check_readable()
        return explanation(self.model, x)

    def tree(self, member: int | None = None) -> dict[str, Any]:
        """The tree (or a forest's ``member``) as plain data, within ``max_answer_values``
        (:func:`~app.reads.tree_data`)."""
        self._check_readable()
        return tree_data(self.model, member, self.limits)

    def summary(self) -> dict[str, Any]:
        """The library's summary of the model."""
        self._check_readable()
        summary: dict[str, Any] = self.model.summary()
        return summary

    def labels(self) -> list[str]:
        """The model's labels as JSON keys (:func:`app.schemas.label_key`)."""
        self._check_readable()
        return [label_key(c) for c in self.model.classes_]

    def metrics(self) -> dict[str, Any]:
        """Prequential metrics over all events and the recent window."""
        self._check_readable()
        return {"seq": self.seq} | self.prequential.report()

    def history(self, after: int = 0) -> bytes:
        """The metrics history as JSON: points and drift events with ``seq > after``."""
        self._check_readable()
        return self.prequential.history.encoded_report(after)

    async def events(self, after: int, limit: int, max_bytes: int | None = None) -> list[dict[str, Any]]:
        """Up to ``limit`` logged (durable) events with ``seq > after``: ``{"seq", "features", "label"}``
        (with ``max_bytes``, those of the records that start within it: fewer, not the log's end).

        Raises
        ------
        NotAvailable
            The model is being deleted or the service is stopping.
        LogUnavailable
            The store could not be read.
        """
        if self.writer.closing:
            raise NotAvailable()
        try:
            return await self.db.run(logged_events, self.db.store, self.name, after, limit, max_bytes)
        except StorageError:
            log.exception("model %r: reading the event log after seq %d failed", self.name, after)
            raise LogUnavailable() from None

    async def wait_applied(self, seq: int, timeout: float) -> None:
        """Return once this instance's model holds event ``seq`` (read-your-writes), waiting at most ``timeout`` s.

        Raises
        ------
        SeqNotReached
            Not within ``timeout`` seconds.
        NotAvailable
            The model is deleted (or the service stops) meanwhile.
        """
        if self.seq >= seq:
            return
        if self.writer.closing:
            raise NotAvailable()
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

    def advanced(self) -> None:
        """Wake the :meth:`wait_applied` callers whose seq the model has reached (called
        whenever :attr:`seq` grows)."""
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
        self.advanced()

    async def resync(self) -> None:
        """Rebuild the model from the store (snapshot and log), as after a failure."""
        async with self.apply_lock:
            await self.rebuild()

    def gauges(self) -> dict[str, float]:
        """Size figures for the Prometheus collector (empty while recovering)."""
        if self.recovering:
            return {}
        s = self.model.summary()
        drift = s["drift"]
        return {
            "nodes": s.get("n_nodes", 0),
            "leaves": s.get("n_leaves", 0),
            "depth": s.get("depth", 0),
            "examples": s.get("n_examples", 0),
            "classes": len(s.get("classes", ())),
            "seq": self.seq,
            "pending_ids": len(self.pending),
            "snapshot_bytes": self.snapshot_bytes,
            "drift_detections": drift["n_detections"],
            "drift_swaps": drift["n_swaps"],
            "drift_background": float(drift["background"] is not None),
        } | limit_gauges(s)

    # ------------------------------------------------------------------ writing
    async def learn(
        self,
        events: Sequence[LearnEvent],
        batch: bool,
        key: str | None = None,
        body_hash: str = "",
        after: str | None = None,
    ) -> tuple[int, int]:
        """Queue a request's events for the writer; return ``(learned, seq)`` once durable.

        With an idempotency ``key``, a request the model logged with that key (within the
        ``idempotency_window_seconds`` setting) is not learned again: it gets the first answer
        if its ``body_hash`` is the first request's, else a 422. The writer checks and records
        keys in order, so two requests with one key are never both learned. With ``after``
        (the key of another request), it is learned only once that request is
        (:mod:`app.ordering`).

        Raises
        ------
        InvalidInput
            An event is refused (unknown id, label type or limit, or the library's InputError),
            or ``key`` was used with another body; none of the request's events was learned.
        StorageFailure, NotAvailable, Recovering, LearnFailure
            The events were not learned.
        """
        if self.writer.closing:
            raise NotAvailable()
        if self.recovering:
            raise self.not_ready()
        future: asyncio.Future[tuple[int, int]] = asyncio.get_running_loop().create_future()
        self.writer.submit(LearnRequest(events, batch, future, key, body_hash, after))
        return await future

    def refused(self, key: str) -> None:
        """A learn request with this idempotency key was refused before reaching the writer
        (:meth:`app.ordering.Ordering.refused`)."""
        self.writer.ordering.refused(key)

    async def close(self, snapshot: bool) -> None:
        """Stop taking requests, finish (and acknowledge) the queued ones, optionally snapshot
        (:meth:`app.group_commit.GroupCommit.close`); a read still waiting for a seq
        (:meth:`wait_applied`) then gets :class:`NotAvailable`: no event will come any more."""
        await self.writer.close(snapshot)
        for _, future in self._waiters:
            if not future.done():
                future.set_exception(NotAvailable())
        self._waiters = []

    async def rebuild(self) -> None:
        """Replace the in-memory state with the durable one (snapshot + log): after a failure
        of the writer (:mod:`app.group_commit`) or a replica's (:meth:`resync`)."""
        self.recovering = True
        try:
            restored = await self.db.run(restore, self.db.store, self.name, self.config, self.model_cls, self.settings)
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
        self.advanced()
        log.warning("model %r: rebuilt from the store at seq %d", self.name, self.seq)
