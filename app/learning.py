"""The one predict-then-learn step, and the replay of a logged model through it.

The live writer (:class:`app.hosting.ModelHost`) and the replay at start or after a failure
(:func:`restore`) both learn events through :func:`learn_scored`, so a model replayed from its
log equals the model that served the live requests by construction: the library learns a
batch exactly as it learns its rows one by one, and the prequential scores do not depend on
batch boundaries either.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson

from streamtree.exceptions import InputError, StreamtreeError
from streamtree.typing import ClassLabel

from .exceptions import DamagedRecord
from .history import History
from .prequential import Prequential
from .settings import Settings
from .storage import EventStore, StorageError, open_state

__all__ = [
    "FORK_FIELD",
    "REPLAY_PAGE",
    "SERVICE_FIELDS",
    "Restored",
    "apply_logged",
    "bad_row",
    "encode_event",
    "encode_events",
    "learn_scored",
    "logged_events",
    "restore",
    "split_config",
]

log = logging.getLogger("streamtree.app")

#: Logged events read and learned at a time while replaying.
REPLAY_PAGE = 2_000

#: The field of a fork's config naming the model whose logged events it learns (:mod:`app.forks`).
FORK_FIELD = "from"

#: The fields of a model's config that are the service's, not parameters of the model class:
#: ``costs``, the cost matrix its prequential metrics score decisions with (optional), and a
#: fork's :data:`FORK_FIELD`.
SERVICE_FIELDS = ("costs", FORK_FIELD)


def split_config(config: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(model parameters, service fields)`` of a model's config (:data:`SERVICE_FIELDS`)."""
    params = {k: v for k, v in config.items() if k not in SERVICE_FIELDS}
    return params, {k: config[k] for k in SERVICE_FIELDS if k in config}


def encode_event(features: dict[str, Any], label: ClassLabel, t: float | None = None) -> str:
    """The log's text for one event (exact: floats are written in shortest round-trip form).

    ``t`` is the arrival time (Unix seconds): the metrics history replays with it.
    """
    event: dict[str, Any] = {"x": features, "y": label}
    if t is not None:
        event["t"] = t
    return orjson.dumps(event).decode()


def encode_events(xs: Sequence[dict[str, Any]], ys: Sequence[ClassLabel], t: float | None) -> list[str]:
    """The log's texts of a batch of events arrived at ``t``: each as :func:`encode_event` writes it."""
    dumps = orjson.dumps
    if t is None:
        return [dumps({"x": x, "y": y}).decode() for x, y in zip(xs, ys, strict=True)]
    return [dumps({"x": x, "y": y, "t": t}).decode() for x, y in zip(xs, ys, strict=True)]


def decode_logged(name: str, seq: int, text: str) -> tuple[dict[str, Any], ClassLabel, float | None]:
    """The features, label and arrival time (or None) of logged event ``seq`` (:func:`encode_event`'s text).

    Raises
    ------
    DamagedRecord
        The text is not such an event (a record damaged on disk or edited by hand).
    """
    try:
        event = orjson.loads(text)
        x, y, t = event["x"], event["y"], event.get("t")
    except (ValueError, KeyError, TypeError, AttributeError) as exc:  # not what the service logs
        raise DamagedRecord(name, seq, repr(exc)) from None
    if not isinstance(x, dict) or isinstance(y, (dict, list)) or y is None:
        raise DamagedRecord(name, seq, "no features object and label")
    return x, y, t


def logged_events(
    store: EventStore, name: str, after: int, limit: int, max_bytes: int | None = None
) -> list[dict[str, Any]]:
    """Up to ``limit`` of a model's logged events after seq ``after`` as ``{"seq", "features", "label"}``
    (those of the log's records that start within ``max_bytes``: :meth:`EventStore.read_events`),
    ending before a damaged record (fewer, not the log's end).

    Runs on the store's thread; the features are those learned (a delayed label's are the
    features of its prediction).

    Raises
    ------
    DamagedRecord
        The first record after ``after`` is damaged.
    """
    out: list[dict[str, Any]] = []
    for seq, text in store.read_events(name, after, limit, max_bytes):
        try:
            x, y, _ = decode_logged(name, seq, text)
        except DamagedRecord:
            if out:
                break  # the readable events before it; the next page names it
            raise
        out.append({"seq": seq, "features": x, "label": y})
    return out


def learn_scored(
    model: Any,
    prequential: Prequential,
    xs: Sequence[dict[str, Any]],
    ys: Sequence[ClassLabel],
    times: float | Sequence[float | None] | None = None,
) -> None:
    """Learn a batch of events, scoring each with the prediction made just before it was learned.

    Parameters
    ----------
    model
        The model; ``learn_many(xs, ys, return_proba=True)`` learns the rows in order and
        returns each row's prediction before its update (columns in ``classes_`` order, new
        classes appended in order of first appearance).
    prequential
        The running metrics the predictions are scored into.
    xs, ys
        The events' features and labels.
    times
        The events' arrival times (one for all, or one each; ``None``: unknown), the metrics
        history's clock. The model's drift events are merged into the history afterwards.

    Raises
    ------
    streamtree.exceptions.InputError
        An event is refused; the library checks the whole batch first, so neither the model
        nor the metrics changed.
    """
    n_before = len(model.classes_)
    proba = model.learn_many(xs, ys, return_proba=True)
    column = {c: k for k, c in enumerate(model.classes_)}
    label = np.fromiter(map(column.__getitem__, ys), dtype=np.int64, count=len(ys))
    # The classes a row was predicted over: those seen before the batch, plus those first seen
    # at an earlier row of the batch (a class's column is its order of first appearance).
    first = np.maximum.accumulate(np.concatenate(([n_before - 1], label)))[:-1]
    each = [times] * len(ys) if times is None or isinstance(times, (int, float)) else times
    prequential.update_many(proba, first + 1, label, each, classes=model.classes_)
    prequential.history.merge_drifts(model)


def bad_row(model: Any, xs: Sequence[dict[str, Any]], exc: InputError) -> int | None:
    """Which row of a batch the library refused with ``exc`` (None if that cannot be told).

    The library checks a batch of mappings row by row against its feature registry before
    learning any; running the same check on a copy of the registry finds the first row it
    refuses. Costs one registry copy and one pass, on the refusal path only.
    """
    row = getattr(exc, "row", None)
    if isinstance(row, int):
        return row
    registry = getattr(model, "registry", None)
    if registry is None or not hasattr(registry, "encode"):
        return None
    registry = copy.deepcopy(registry)
    for i, x in enumerate(xs):
        try:
            registry.encode(x, learn=True)
        except InputError:
            return i
    return None


@dataclass
class Restored:
    """A model's in-memory state rebuilt from the store."""

    model: Any
    prequential: Prequential
    seq: int
    snapshot_seq: int


def restore(store: EventStore, name: str, config: dict[str, Any], model_cls: Any, settings: Settings) -> Restored:
    """Load the newest readable snapshot of a model and replay the events logged after it.

    Runs on the store's thread. Snapshots are read one at a time, newest first: one that
    cannot be read (the store fails on it, a piece is corrupt, or the library refuses its
    bytes, e.g. written by an incompatible version) is skipped with a warning, and without
    any readable one the log alone rebuilds the model from seq 0. A model rebuilt either way
    equals the one that served, bit for bit (the library learns a replay exactly as live).

    Raises
    ------
    RuntimeError
        If the log has a gap or holds an event the library refuses: the service must not
        serve a model that differs from its log.
    StorageError
        If the log cannot be read.
    """
    restored: Restored | None = None
    try:
        seqs = store.snapshot_seqs(name)
    except StorageError as exc:
        log.warning("model %r: its snapshots cannot be listed (%s); rebuilding it from its log", name, exc)
        seqs = []
    for seq in seqs:
        try:
            snap = store.read_snapshot(name, seq)
            model = model_cls.from_bytes(snap.model_bytes)
            preq = Prequential.from_state(orjson.loads(open_state(name, seq, snap.state))["prequential"])
            del snap  # its bytes go before the replay
        except Exception as exc:  # whatever fails (the store, the bytes, the library): an older one, or the log
            log.warning(
                "model %r: snapshot at seq %d unreadable (%s: %s); trying an older one",
                name,
                seq,
                type(exc).__name__,
                exc,
            )
            continue
        restored = Restored(model, preq, seq, seq)
        break
    if restored is None:
        params, service = split_config(config)
        history = History(settings.history_every, settings.history_seconds, settings.history_points)
        prequential = Prequential(settings.metrics_window, settings.metrics_bins, history, costs=service.get("costs"))
        restored = Restored(model_cls(**params), prequential, 0, 0)
    # the log is what was accepted: its events are learned again, also those a version before
    # the memory budget's refusal accepted (a model that could not be replayed would be unavailable)
    restored.model.refuse_past_budget = False
    try:
        while page := store.read_events(name, restored.seq, REPLAY_PAGE):
            restored.seq = apply_logged(restored.model, restored.prequential, restored.seq, name, page)
    finally:
        del restored.model.refuse_past_budget  # refusing again, as the class says
    return restored


def apply_logged(model: Any, prequential: Prequential, seq: int, name: str, page: Sequence[tuple[int, str]]) -> int:
    """Learn a page of logged events that follows event ``seq``; return the last one's seq.

    The one way a logged event is learned: by the replay at start or after a failure
    (:func:`restore`) and by a replica following the writer's log
    (:meth:`app.hosting.ModelHost.apply_logged`), so every instance at the same seq holds
    the same model, bit for bit.

    Raises
    ------
    RuntimeError
        The page does not follow ``seq`` without a gap, or holds an event the library
        refuses (then nothing was learned: the library checks a batch before learning it).
    """
    first, last = page[0][0], page[-1][0]
    if first != seq + 1 or last != first + len(page) - 1:
        i, found = next((i, s) for i, (s, _) in enumerate(page) if s != seq + 1 + i)
        raise RuntimeError(f"model {name!r}: event log jumps from seq {seq + i} to {found}")
    # the replay's and a replica's every event: decoded in bulk, each record checked one by
    # one (decode_logged) only to name the one at fault
    try:
        events = [orjson.loads(text) for _, text in page]
        xs, ys, ts = [e["x"] for e in events], [e["y"] for e in events], [e.get("t") for e in events]
    except (ValueError, KeyError, TypeError, AttributeError) as exc:  # not what the service logs
        damaged = first_damaged(name, page)
        raise RuntimeError(
            damaged.reason if damaged else f"model {name!r}: logged events are not events ({exc!r})"
        ) from None
    try:
        learn_scored(model, prequential, xs, ys, ts)
    except StreamtreeError as exc:
        damaged = first_damaged(name, page)  # a record of another shape (features not an object)
        why = damaged.reason if damaged else f"model {name!r}: logged events {first}..{last} cannot be replayed: {exc}"
        raise RuntimeError(why) from exc
    return last


def first_damaged(name: str, page: Sequence[tuple[int, str]]) -> DamagedRecord | None:
    """The first record of ``page`` that is not an event the service logged
    (:func:`decode_logged`), or None."""
    for seq, text in page:
        try:
            decode_logged(name, seq, text)
        except DamagedRecord as exc:
            return exc
    return None
