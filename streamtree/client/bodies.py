"""The request bodies of a remote model and what is read from its answers, shared by the
blocking and the asyncio clients (which differ only in how they send)."""

from __future__ import annotations

import re
import uuid
from collections.abc import Hashable, Iterable, Mapping
from typing import Any, NamedTuple

from streamtree.client.encoding import (
    Labels,
    clean_features,
    clean_id,
    dumps,
    features_json,
    label_list,
    loads,
    pd,
    records,
    rows,
    same_length,
)
from streamtree.client.errors import ConnectionFailed

__all__ = [
    "BATCH",
    "UnsentBatch",
    "Paths",
    "argmax",
    "check_batch_size",
    "check_name",
    "chunks",
    "encoded_event",
    "encoded_events",
    "frame",
    "instances",
    "label_events",
    "merge_decisions",
    "new_key",
    "note_failure",
    "predictions",
    "single",
    "without_ids",
]

#: Events or instances per request of ``learn_many``, ``predict_proba_many`` and ``decide_many``.
BATCH = 1000

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


class UnsentBatch(NamedTuple):
    """Events of a learn request not acknowledged, with the ``Idempotency-Key`` to send them
    again under: ``model.learn_batch(batch.events, batch.key)`` learns them once, also when
    ``posted`` (the request went out and its answer was lost: the service may have learned it,
    and then answers from that record, learning nothing again)."""

    key: str
    events: list[dict[str, Any]]
    posted: bool


def new_key() -> str:
    """A new ``Idempotency-Key``."""
    return uuid.uuid4().hex


def unsent_batches(parts: list[list[bytes]], keys: list[str], posted: int) -> list[UnsentBatch]:
    """The encoded events of ``parts`` (with their ``keys``) as :class:`UnsentBatch` es, the
    first ``posted`` of them marked posted."""
    return [
        UnsentBatch(k, [loads(e) for e in p], i < posted) for i, (k, p) in enumerate(zip(keys, parts, strict=True)) if p
    ]


def note_failure(e: Any, first: int, size: int, what: str, learned: int | None = None, seq: int | None = None) -> None:
    """Tell ``e``, the error of the request of rows ``first`` to ``first + size - 1`` of ``X``,
    which rows it concerns: ``e.row`` (the row of ``X`` a refusal's ``loc`` points at), for a
    learn ``e.learned`` and ``e.seq`` of the requests before it, and a note in its message."""
    e.learned, e.seq = learned, seq
    loc: tuple[Any, ...] = getattr(e, "loc", None) or ()
    rows = f"rows {first} to {first + size - 1} of X"
    if isinstance(e, ConnectionFailed):
        note = f"{rows} may have been learned" if learned is not None else f"no answer for {rows}"
    elif len(loc) > 2 and loc[:2] == ("body", what) and isinstance(loc[2], int):
        e.row = first + loc[2]
        note = f"row {e.row} of X"
    else:
        note = rows
    if learned:
        note += f"; the {learned:,} events before its request are learned (seq {seq})"
    if learned is not None:
        note += "; e.unsent holds the rest" if first else "; its request is the first; e.unsent holds the rest"
    e.args = (f"{e.args[0] if e.args else e} ({note})", *e.args[1:])


def check_name(name: Any) -> str:
    """A model name as the service takes it (letters, digits, ``_.-``; at most 64)."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError(
            f"name: 1 to 64 letters, digits, '_', '.' or '-' (not starting with one of '_.-'), got {name!r}"
        )
    return name


def check_batch_size(batch_size: Any) -> int:
    """A batch size: an integer from 1."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size: an integer >= 1, got {batch_size!r}")
    return batch_size


class Paths:
    """The routes of model ``name``."""

    def __init__(self, name: str) -> None:
        self.model = f"/models/{name}"
        self.learn = f"{self.model}/learn"
        self.predict = f"{self.model}/predict_proba"
        self.decide = f"{self.model}/decide"
        self.explain = f"{self.model}/explain"
        self.metrics = f"{self.model}/metrics"
        self.events = f"{self.model}/events"


def encoded_event(x: Mapping[str, Any], y: Any, id: Any, labels: Labels) -> bytes:
    """One labelled event encoded as JSON (its label remembered in ``labels``)."""
    if id is None:
        return b'{"features":' + features_json(x) + labels.tail(y)
    return b'{"features":' + features_json(x) + b',"id":' + dumps(clean_id(id)) + labels.tail(y)


def encoded_events(X: Any, y: Any, columns: Iterable[str] | None, labels: Labels) -> list[bytes]:
    """The events of ``learn_many``, each encoded as JSON: rows of ``X`` with the labels of ``y``."""
    xs = records(X, columns)
    ys = label_list(y)
    same_length(len(xs), len(ys), "X", "y")
    return [
        b'{"features":' + features_json(x, f"X[{i}]") + labels.tail(v)
        for i, (x, v) in enumerate(zip(xs, ys, strict=True))
    ]


def events_body(events: Any) -> bytes:
    """The body of ``learn_batch``: ``{"events": ...}`` of prepared event dicts, or of their
    JSON bytes (sent as they are)."""
    if isinstance(events, bytes):
        return b'{"events":' + events + b"}"
    if isinstance(events, list):
        return dumps({"events": events})  # a NaN or infinity refused, named events[i]...
    raise TypeError(f"events: a list of event dicts or their JSON bytes, not {type(events).__name__}")


def single(x: Mapping[str, Any], id: Any) -> dict[str, Any]:
    """The body of one prediction or decision: ``{"features"}`` and the ``id`` if given."""
    if id is None:
        return {"features": clean_features(x)}
    return {"features": clean_features(x), "id": clean_id(id)}


def label_events(ids: Any, ys: Any, labels: Labels) -> list[dict[str, Any]]:
    """Delayed labels: events ``{"id", "label"}`` without features."""
    if isinstance(ids, (str, bytes)) or not isinstance(ids, Iterable):
        raise TypeError(f"ids: a list of ids, not {type(ids).__name__}")
    id_list = [clean_id(i, f"ids[{n}]") for n, i in enumerate(ids)]
    y_list = label_list(ys, "ys")
    same_length(len(id_list), len(y_list), "ids", "ys")
    labels.add_many(y_list)
    return [{"id": i, "label": v} for i, v in zip(id_list, y_list, strict=True)]


def instances(X: Any, ids: Any, columns: Iterable[str] | None) -> list[Any]:
    """The ``instances`` of a batch prediction: feature dicts, or ``{"features", "id"}``
    objects when ``ids`` are given (one per row)."""
    xs = rows(X, columns)
    if ids is None:
        return xs
    if isinstance(ids, (str, bytes)) or not isinstance(ids, Iterable):
        raise TypeError(f"ids: a list of ids (one per row of X), not {type(ids).__name__}")
    id_list = [clean_id(i, f"ids[{n}]") for n, i in enumerate(ids)]
    same_length(len(xs), len(id_list), "X", "ids")
    return [{"features": f, "id": i} for f, i in zip(xs, id_list, strict=True)]


def without_ids(body: dict[str, Any]) -> dict[str, Any]:
    """A prediction's or decision's body with its ids taken out: no ``id``, and its
    ``instances`` (``{"features", "id"}`` objects, as :func:`instances` makes them) unwrapped."""
    out = {k: v for k, v in body.items() if k != "id"}
    if "instances" in out:
        out["instances"] = [i["features"] for i in out["instances"]]
    return out


def chunks(items: list[Any], size: int) -> list[list[Any]]:
    """``items`` cut into requests of at most ``size`` (at least one, maybe empty)."""
    return [items[i : i + size] for i in range(0, len(items), size)] or [[]]


def argmax(probabilities: Mapping[Hashable, float]) -> Hashable | None:
    """The most probable label (the first of tied ones), None before any label is known."""
    return max(probabilities, key=probabilities.__getitem__) if probabilities else None


def index_of(X: Any) -> Any:
    """The index of a DataFrame ``X`` (its answers keep it), else None."""
    return X.index if pd is not None and isinstance(X, pd.DataFrame) else None


def frame(decoded: list[dict[Hashable, float]], X: Any) -> Any:
    """A DataFrame of probabilities, one column per label in the order first seen."""
    if pd is None:  # pragma: no cover - pandas is installed with streamtree
        raise ImportError("predict_proba_many returns a pandas DataFrame: install pandas")
    order: dict[Hashable, None] = {}
    for row in decoded:
        order.update(dict.fromkeys(row))
    return pd.DataFrame(decoded, columns=list(order), index=index_of(X), dtype=float)


def predictions(decoded: list[dict[Hashable, float]], X: Any) -> Any:
    """A Series of the most probable label of each row."""
    if pd is None:  # pragma: no cover
        raise ImportError("predict_many returns a pandas Series: install pandas")
    return pd.Series([argmax(p) for p in decoded], index=index_of(X), dtype=object)


def merge_decisions(answers: list[dict[str, Any]]) -> dict[str, Any]:
    """One answer of ``decide_many`` from the answers of its requests."""
    out: dict[str, Any] = {"decisions": [], "expected_costs": [], "probabilities": [], "seq": 0}
    for a in answers:
        out["decisions"] += a["decisions"]
        out["expected_costs"] += a["expected_costs"]
        out["probabilities"] += a["probabilities"]
        out["seq"] = a["seq"]
    return out
