"""A chunk of a file's rows made into the service's events and instances, and each learn
chunk's idempotency key.

A row's features are its columns but the label's and the id's. A missing cell (an empty CSV
cell, NaN, None or JSON ``null``, pandas' ``NA``) is left out of the row's features: the
service and the library treat an absent feature as missing. Values become Python scalars
(numbers, strings, booleans); anything else (a datetime column, a nested JSON value, an
infinity) is refused naming the row and the column. Every row of a learn file has a label (a
string, an integer or a boolean).

DataFrames are taken column by column (``Series.tolist`` makes Python scalars in C), the rows
zipped from the columns, and only the missing cells found by ``isna`` removed one by one:
no per-cell Python test for the common case of a clean numeric column.

The key of a learn chunk is a digest of the model's name, the file's first chunk (its
events as JSON bytes) and the chunk's index: the place of the chunk in a file that begins so,
not its rows. A re-run over the same file with the same batch size sends each chunk under the
key it had, which the service answers from its record without learning it again; a chunk
whose rows changed since (an edited, removed or appended row) comes under its old key with
another body, which the service refuses (``idempotency_key_reused``) rather than learn its
rows a second time. Rows appended after the last full chunk come in new chunks, under new keys.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from functools import partial
from typing import Any

import numpy as np
import orjson
import pandas as pd

from streamtree.bulk.problems import BulkError
from streamtree.bulk.sources import Chunk
from streamtree.client.encoding import INT_BOUND

__all__ = ["check_columns", "chunk_key", "encode_learn", "encode_predict"]

_FEATURE_TYPES = frozenset({str, int, float, bool})
_LABEL_TYPES = frozenset({str, int, bool})
_MISSING_TYPES = frozenset({type(None), type(pd.NA), type(pd.NaT)})
#: dtype kinds whose values are features: booleans, integers, floats, objects (strings, mixed).
_KINDS = frozenset("biufO")


def check_columns(columns: Sequence[str] | None, source: str, label: str | None, id_column: str | None) -> None:
    """Refuse a label or id column the file's header (or schema) does not have, naming the ones it has."""
    if columns is None:  # JSON lines: each row names its own
        return
    for option, name in (("--label", label), ("--id-column", id_column)):
        if name is not None and name not in columns:
            shown = ", ".join(map(repr, columns[:40])) + (f", ... ({len(columns)} in all)" if len(columns) > 40 else "")
            raise BulkError(f"{option}: no column {name!r} in {source}; its columns are: {shown or '(none)'}")


def chunk_key(model: str, first: bytes, index: int) -> str:
    """The ``Idempotency-Key`` of learn chunk ``index`` into ``model`` of a file whose first
    chunk's events are ``first``."""
    digest = hashlib.blake2b(digest_size=20)
    digest.update(model.encode())
    digest.update(b"\0%d\0" % index)
    digest.update(first)
    return f"streamtree-learn-{digest.hexdigest()}"


def _bad_value(chunk: Chunk, i: int, column: str, v: Any) -> BulkError:
    if isinstance(v, float):
        return BulkError(f"row {chunk.row(i):,}, column {column!r}: feature values are finite numbers, not {v}")
    return BulkError(
        f"row {chunk.row(i):,}, column {column!r}: a feature value is a number, string, boolean or missing, "
        f"not {type(v).__name__} {_short(v)}"
    )


def _short(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 60 else text[:57] + "..."


def _check_object_values(chunk: Chunk, column: str, values: list[Any]) -> bool:
    """Refuse a value of an object column that is not a feature value (or an infinite float);
    whether numpy scalars are among the values (to be made Python ones)."""
    types = set(map(type, values))
    numpy = False
    if types - _FEATURE_TYPES - _MISSING_TYPES:
        for i, v in enumerate(values):
            t = type(v)
            if t not in _FEATURE_TYPES and t not in _MISSING_TYPES:
                if not (isinstance(v, np.generic) and type(v.item()) in _FEATURE_TYPES):
                    raise _bad_value(chunk, i, column, v)
                numpy = True
    if float in types and (math.inf in values or -math.inf in values):  # containment runs in C
        i = next(i for i, v in enumerate(values) if type(v) is float and math.isinf(v))
        raise _bad_value(chunk, i, column, values[i])
    if int in types:
        big = _beyond_64_bits(values)
        if big is not None:
            raise BulkError(
                f"row {chunk.row(big):,}, column {column!r}: integers are within 64 bits, not {_short(values[big])}"
            )
    return numpy


def _beyond_64_bits(values: list[Any]) -> int | None:
    """The position of the first int of ``values`` beyond 64 bits (a CSV cell of many digits), or None."""
    ints = [v for v in values if type(v) is int]
    if not ints or (min(ints) >= -INT_BOUND and max(ints) < INT_BOUND):
        return None
    return next(i for i, v in enumerate(values) if type(v) is int and not -INT_BOUND <= v < INT_BOUND)


def _frame_features(
    frame: pd.DataFrame, chunk: Chunk, skip: set[str], labels: list[Any] | None = None
) -> list[dict[str, Any]]:
    """The feature dicts of a DataFrame's rows (all columns but ``skip``), missing cells left
    out; with ``labels``, the events ``{"features", "label"}`` instead."""
    names: list[str] = []
    columns: list[list[Any]] = []
    positions: list[int] = []
    for position, name in enumerate(frame.columns):
        key = str(name)
        if key in skip:
            continue
        series = frame.iloc[:, position]
        kind = series.dtype.kind
        if kind not in _KINDS:
            raise BulkError(
                f"column {key!r} holds {series.dtype} values: features are numbers, strings or booleans "
                f"(rows from {chunk.first_row:,})"
            )
        if kind == "f":
            bad = np.isinf(series.to_numpy(dtype=float, na_value=np.nan))
            if bad.any():
                i = int(np.argmax(bad))
                raise _bad_value(chunk, i, key, float(series.iloc[i]))
        values = series.tolist()
        if kind == "O" and _check_object_values(chunk, key, values):
            values = [v.item() if isinstance(v, np.generic) else v for v in values]
        names.append(key)
        columns.append(values)
        positions.append(position)
    rows = zip(*columns) if columns else (() for _ in range(len(frame)))
    # zip without strict=: the columns are of one frame, so of one length, and strict= checks every row
    records = list(map(dict, map(partial(zip, names), rows)))
    if labels is not None:
        records = [{"features": f, "label": y} for f, y in zip(records, labels)]  # noqa: B905
    missing = frame.iloc[:, positions].isna().to_numpy() if columns else None
    if missing is not None and missing.any():
        for r, c in zip(*np.nonzero(missing), strict=True):
            record = records[int(r)]
            del (record if labels is None else record["features"])[names[int(c)]]
    return records


def _frame_labels(frame: pd.DataFrame, chunk: Chunk, label: str) -> list[Any]:
    """The labels of a DataFrame's rows: every row has one, a string, integer or boolean."""
    series = frame[label]
    missing = series.isna().to_numpy()
    if missing.any():
        raise _no_label(chunk, int(np.argmax(missing)), label)
    values = series.tolist()
    if series.dtype.kind in "biu":
        return values
    if set(map(type, values)) <= _LABEL_TYPES:
        i = _beyond_64_bits(values)
        if i is not None:
            raise _bad_label(chunk, i, label, values[i])
        return values
    if series.dtype.kind == "f":
        # a column of integers with one fraction among them is read as floats: blame the
        # fraction, not the first row (whose 1 was read as 1.0)
        i = next((i for i, v in enumerate(values) if not float(v).is_integer()), 0)
        raise _bad_label(chunk, i, label, values[i])
    for i, v in enumerate(values):
        if type(v) not in _LABEL_TYPES:
            if isinstance(v, np.generic) and type(v.item()) in _LABEL_TYPES:
                values[i] = v.item()
                continue
            raise _bad_label(chunk, i, label, v)
    return values


def _no_label(chunk: Chunk, i: int, label: str) -> BulkError:
    return BulkError(f"row {chunk.row(i):,}: no label in column {label!r} (every row of a learn file needs one)")


def _bad_label(chunk: Chunk, i: int, label: str, v: Any) -> BulkError:
    if type(v) is int:  # an integer beyond 64 bits
        return BulkError(f"row {chunk.row(i):,}, column {label!r}: integers are within 64 bits, not {_short(v)}")
    return BulkError(
        f"row {chunk.row(i):,}, column {label!r}: a label is a string, integer or boolean, "
        f"not {type(v).__name__} {_short(v)}"
    )


def _record_features(
    records: list[dict[str, Any]], chunk: Chunk, label: str | None, id_column: str | None
) -> tuple[list[dict[str, Any]], list[Any], list[Any]]:
    """Features, labels (if ``label``) and ids (if ``id_column``) of JSON-lines rows."""
    features: list[dict[str, Any]] = []
    labels: list[Any] = []
    ids: list[Any] = []
    for i, obj in enumerate(records):
        if label is not None:
            y = obj.pop(label, None)
            if y is None:
                raise _no_label(chunk, i, label)
            if type(y) not in _LABEL_TYPES or (type(y) is int and not -INT_BOUND <= y < INT_BOUND):
                raise _bad_label(chunk, i, label, y)
            labels.append(y)
        if id_column is not None:
            ids.append(obj.pop(id_column, None))
        out = {}
        for k, v in obj.items():
            t = type(v)
            if t is str or t is bool:
                out[k] = v
            elif t is int:
                if not -INT_BOUND <= v < INT_BOUND:
                    raise BulkError(f"row {chunk.row(i):,}, column {k!r}: integers are within 64 bits, not {_short(v)}")
                out[k] = v
            elif t is float:
                if v - v == 0.0:  # finite; NaN and infinities give NaN
                    out[k] = v
                elif v == v:
                    raise _bad_value(chunk, i, k, v)
            elif v is not None:
                raise _bad_value(chunk, i, k, v)
        features.append(out)
    return features, labels, ids


def encode_learn(chunk: Chunk, label: str, id_column: str | None) -> tuple[list[dict[str, Any]], bytes]:
    """The chunk's events ``{"features", "label"}`` and their JSON bytes (the key's input)."""
    if chunk.frame is not None:
        frame = chunk.frame
        if label not in frame.columns:
            raise BulkError(f"--label: no column {label!r} (rows from {chunk.first_row:,})")
        labels = _frame_labels(frame, chunk, label)
        events = _frame_features(frame, chunk, {label} | ({id_column} if id_column else set()), labels)
    else:
        features, labels, _ = _record_features(chunk.records or [], chunk, label, id_column)
        events = [{"features": f, "label": y} for f, y in zip(features, labels, strict=True)]
    return events, orjson.dumps(events)


def encode_predict(
    chunk: Chunk, label: str | None, id_column: str | None
) -> tuple[list[dict[str, Any]], list[Any] | None]:
    """The chunk's instances (feature dicts; ``label`` dropped) and its ids (if ``id_column``)."""
    if chunk.frame is not None:
        frame = chunk.frame
        skip = {c for c in (label, id_column) if c is not None}
        ids = frame[id_column].tolist() if id_column is not None else None
        return _frame_features(frame, chunk, skip), ids
    features, _, ids = _record_features(chunk.records or [], chunk, None, id_column)
    if label is not None:
        for f in features:
            f.pop(label, None)
    return features, ids if id_column is not None else None
