"""What the client sends and how it reads the answers: features, labels, ids and costs made
into the service's JSON, rows out of DataFrames and arrays, and labels back from JSON keys.

A missing value (None, NaN, pandas' ``NA`` and ``NaT``) is left out of the event: the service
and the library treat an absent feature as missing. numpy scalars become Python scalars.
Anything the service would refuse for its type (an infinity, a nested list, a float label)
is refused here with a ValueError or TypeError naming the argument, before any request.
"""

from __future__ import annotations

import math
import re
from collections.abc import Hashable, Iterable, Mapping
from typing import Any

import numpy as np
import orjson

try:  # DataFrames and Series are optional: the client works on dicts and arrays without pandas
    import pandas as pd
except ImportError:  # pragma: no cover - pandas is installed with streamtree
    pd = None  # type: ignore[assignment]

__all__ = [
    "INT_BOUND",
    "Labels",
    "clean_features",
    "clean_id",
    "clean_label",
    "costs_body",
    "dumps",
    "events_json",
    "features_json",
    "label_key",
    "label_list",
    "loads",
    "records",
    "rows",
    "same_length",
]

_OPTIONS = orjson.OPT_SERIALIZE_NUMPY
# The fast path's encoding: what it cannot take for sure raises and goes the careful way
# (numpy scalars too: the careful way's .item() is what both ways must send, and orjson would
# write a float32 in fewer digits)
_STRICT = orjson.OPT_PASSTHROUGH_SUBCLASS | orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS
#: pandas' missing markers, compared by identity (none without pandas).
_MISSING = (pd.NA, pd.NaT) if pd is not None else ()

loads = orjson.loads
#: 19 digits in a row: an integer that may be past 64 bits (the shortest float has at most 17).
_LONG_DIGITS = re.compile(rb"[0-9]{19}")


def dumps(obj: Any, where: str = "") -> bytes:
    """JSON bytes of ``obj`` (orjson: floats round-trip exactly, numpy arrays and scalars encoded).

    Raises
    ------
    ValueError
        ``obj`` holds a NaN or an infinity (orjson would write ``null``: a setting or a value
        silently made missing), named by its path from ``where``.
    """
    out = orjson.dumps(obj, option=_OPTIONS)
    if b"null" in out:  # None, or a non-finite float: told apart only by looking
        _refuse_non_finite(obj, where)
    return out


def _refuse_non_finite(obj: Any, where: str) -> None:
    """Raise a ValueError naming the first NaN or infinity in ``obj`` (dicts, lists, numpy)."""
    if isinstance(obj, Mapping):
        for k, v in obj.items():
            _refuse_non_finite(v, f"{where}[{k!r}]" if where else str(k))
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            _refuse_non_finite(v, f"{where}[{i}]")
    elif isinstance(obj, np.ndarray):
        if obj.dtype.kind in "fc" and not np.isfinite(obj).all():
            raise ValueError(f"{where}: numbers are finite (JSON has no NaN or infinity), got an array with {obj}")
    elif isinstance(obj, (float, np.floating)) and not math.isfinite(obj):
        raise ValueError(f"{where}: numbers are finite (JSON has no NaN or infinity), not {obj}")


def _value(v: Any, name: Any, where: str) -> tuple[bool, Any]:
    """``(keep, value)`` of a feature value that is not a plain Python scalar."""
    if v is None or any(v is m for m in _MISSING):
        return False, None
    if isinstance(v, np.generic) and not isinstance(v, (np.datetime64, np.timedelta64)):  # their .item() may be an int
        v = v.item()
        if type(v) is float:
            if math.isnan(v):
                return False, None
            if math.isinf(v):
                raise ValueError(f"{where}[{name!r}]: feature values must be finite numbers, not {v}")
        if type(v) is int:
            return True, _int(v, name, where)
        if isinstance(v, (bool, float, str)):
            return True, v
    elif isinstance(v, bool):  # subclasses of the plain types: an IntEnum, a str subclass
        return True, bool(v)
    elif isinstance(v, int):
        return True, _int(int(v), name, where)
    elif isinstance(v, str):
        return True, str(v)
    elif isinstance(v, float):
        return _value(np.float64(v), name, where)
    raise TypeError(
        f"{where}[{name!r}]: a feature value is a number, string, boolean or missing "
        f"(None, NaN, NA), not {type(v).__name__}"
    )


def _int(v: int, name: Any, where: str) -> int:
    """``v``, an integer feature value, if the service can hold it (64 bits)."""
    if not -INT_BOUND <= v < INT_BOUND:
        raise ValueError(f"{where}[{name!r}]: integer feature values are within 64 bits, not {v}")
    return v


def clean_features(x: Mapping[Any, Any], where: str = "x") -> dict[str, Any]:
    """The event's features: missing values left out, numpy scalars made Python ones.

    Raises
    ------
    TypeError
        ``x`` is not a mapping, a feature name is not a string, or a value is not a number,
        string, boolean or missing.
    ValueError
        A value is infinite, or an integer beyond 64 bits.
    """
    if not isinstance(x, Mapping):
        raise TypeError(f"{where}: features are a dict of feature name to value, not {type(x).__name__}")
    out: dict[str, Any] = {}
    for k, v in x.items():
        t = type(v)
        if t is float:
            if v - v == 0.0:  # finite; NaN and infinities give NaN
                out[k] = v
            elif v != v:
                continue
            else:
                raise ValueError(f"{where}[{k!r}]: feature values must be finite numbers, not {v}")
        elif t is str or t is bool:
            out[k] = v
        elif t is int:
            out[k] = v if -INT_BOUND <= v < INT_BOUND else _int(v, k, where)
        else:
            keep, v = _value(v, k, where)
            if keep:
                out[k] = v
        if type(k) is not str:
            raise TypeError(f"{where}: feature names are strings, not {type(k).__name__} {k!r}")
    return out


def features_json(x: Any, where: str = "x") -> bytes:
    """The JSON of :func:`clean_features` of ``x``, encoded.

    Most events need no cleaning, and orjson tells which in one pass in C: a dict it encodes
    (string keys, plain Python values) without a ``null`` (None, NaN and infinities encode as
    null), a nested object or an array is sent as encoded; any other (or one with a string
    holding one of those marks) goes through :func:`clean_features`.
    """
    try:
        out = orjson.dumps(x, option=_STRICT)
    except TypeError:  # orjson.JSONEncodeError is a TypeError
        pass
    else:
        if (
            out.startswith(b"{")
            and out.find(b"{", 1) < 0
            and b"null" not in out
            and b"[" not in out
            and _LONG_DIGITS.search(out) is None  # maybe an integer of 2**63 or more (orjson writes to 2**64)
        ):
            return out
    return orjson.dumps(clean_features(x, where), option=_OPTIONS)


def events_json(events: list[bytes]) -> bytes:
    """A learn batch's body from its encoded events."""
    return b'{"events":[' + b",".join(events) + b"]}"


#: Integers the service takes (feature values, labels, ids) are in ``[-INT_BOUND, INT_BOUND)``:
#: 64 bits, as JSON parsers hold them. The one definition: the service and the bulk reader use it.
INT_BOUND = 2**63


def clean_label(y: Any, where: str = "y") -> str | int | bool:
    """A label as the service takes it: a string, an integer or a boolean."""
    t = type(y)
    if t is str or t is bool or (t is int and -INT_BOUND <= y < INT_BOUND):
        return y  # type: ignore[no-any-return]
    if isinstance(y, np.generic):
        y = y.item()
    if isinstance(y, bool):
        return bool(y)
    if isinstance(y, int):  # a numpy integer's value, an IntEnum
        if not -INT_BOUND <= y < INT_BOUND:
            raise ValueError(f"{where}: an integer label is within 64 bits, not {int(y)}")
        return int(y)
    if isinstance(y, str):
        return y
    raise TypeError(f"{where}: a label is a string, integer or boolean, not {type(y).__name__} {y!r}")


def clean_id(i: Any, where: str = "id") -> str | int:
    """An event id as the service takes it: a string or an integer."""
    t = type(i)
    if t is str or (t is int and -INT_BOUND <= i < INT_BOUND):
        return i  # type: ignore[no-any-return]
    if isinstance(i, np.integer):
        i = int(i)
    if type(i) is int:
        if -INT_BOUND <= i < INT_BOUND:
            return i
        raise ValueError(f"{where}: an integer id is within 64 bits, not {i}")
    raise TypeError(f"{where}: an id is a string or integer, not {type(i).__name__} {i!r}")


def label_key(y: Any) -> str:
    """The JSON key of a label in the service's answers: booleans ``true``/``false``, integers in decimal."""
    if y is True:
        return "true"
    if y is False:
        return "false"
    return str(y)


def records(X: Any, columns: Iterable[str] | None = None, where: str = "X") -> list[Any]:
    """The rows of ``X`` as feature dicts, not yet cleaned: ``X`` is a DataFrame, a list of
    dicts, or a 2-D numpy array whose column names are ``columns``."""
    if pd is not None and isinstance(X, pd.DataFrame):
        if columns is not None:
            raise ValueError(f"columns: a DataFrame names its own columns; got columns= for a DataFrame {where}")
        names = [str(c) if not isinstance(c, str) else c for c in X.columns]
        if len(set(names)) != len(names):
            raise ValueError(f"{where}: column names must be distinct (as strings), got {list(X.columns)}")
        return X.to_dict("records") if names == list(X.columns) else X.set_axis(names, axis=1).to_dict("records")
    if isinstance(X, np.ndarray):
        if X.ndim != 2:
            raise ValueError(f"{where}: a numpy array of features is 2-D (rows, columns), got {X.ndim}-D")
        if columns is None:
            raise ValueError(f"columns: a numpy array {where} needs columns= (its {X.shape[1]} feature names)")
        names = list(columns)
        if len(names) != X.shape[1]:
            raise ValueError(f"columns: {len(names)} names for the {X.shape[1]} columns of {where}")
        return [dict(zip(names, r, strict=True)) for r in X.tolist()]
    if columns is not None:
        raise ValueError(f"columns: only a numpy array {where} takes columns=, not a {type(X).__name__}")
    if isinstance(X, Mapping) or isinstance(X, (str, bytes)) or not isinstance(X, Iterable):
        raise TypeError(f"{where}: a DataFrame, a list of feature dicts or a 2-D numpy array, not {type(X).__name__}")
    return list(X)


def rows(X: Any, columns: Iterable[str] | None = None, where: str = "X") -> list[dict[str, Any]]:
    """The feature dicts of ``X`` (as :func:`records` takes it), missing values left out of each."""
    return [clean_features(r, f"{where}[{i}]") for i, r in enumerate(records(X, columns, where))]


def label_list(y: Any, where: str = "y") -> list[Any]:
    """The labels of ``y`` (a Series, a list or a 1-D array) as the service takes them."""
    if pd is not None and isinstance(y, (pd.Series, pd.Index)):
        values = y.tolist()
    elif isinstance(y, np.ndarray):
        if y.ndim != 1:
            raise ValueError(f"{where}: labels are 1-D, got a {y.ndim}-D array")
        values = y.tolist()
    elif isinstance(y, (str, bytes, Mapping)) or not isinstance(y, Iterable):
        raise TypeError(f"{where}: labels are a list, a Series or a 1-D array, not {type(y).__name__}")
    else:
        values = list(y)
    return [clean_label(v, f"{where}[{i}]") for i, v in enumerate(values)]


def same_length(n: int, m: int, first: str, second: str) -> None:
    """Refuse two arguments that should pair up row for row but do not."""
    if n != m:
        raise ValueError(f"{first} and {second} have different lengths: {n} and {m}")


def costs_body(costs: Mapping[str, Mapping[Any, float]]) -> dict[str, dict[str, float]]:
    """A cost matrix (decision to {label: cost}) with its labels as the service's keys."""
    if not isinstance(costs, Mapping) or not costs:
        raise TypeError(f"costs: a dict of decision to {{label: cost}}, not {type(costs).__name__} {costs!r}")
    out = {}
    for decision, row in costs.items():
        if not isinstance(row, Mapping):
            raise TypeError(f"costs[{decision!r}]: a dict of label to cost, not {type(row).__name__}")
        out[str(decision)] = {
            label_key(clean_label(k, f"costs[{decision!r}]")): _cost(v, f"costs[{decision!r}][{k!r}]")
            for k, v in row.items()
        }
    return out


def _cost(v: Any, where: str) -> float:
    """A cost as the service takes it (a number); ``TypeError`` naming ``where`` otherwise."""
    if isinstance(v, (str, bytes)) or not isinstance(v, (int, float, np.number)):
        raise TypeError(f"{where}: a cost is a number, not {type(v).__name__} {v!r}")
    return float(v)


class Labels:
    """The labels a model's answers name, by their JSON key: ``"true"`` back to ``True``.

    The service keys probabilities by strings; a river classifier keys them by the labels
    themselves, so they are mapped back. The map learns every label the client sends, and
    the model's ``classes`` when an answer names a key it has not seen, or one two labels sent
    share (the service refused one of them).
    """

    def __init__(self) -> None:
        self.by_key: dict[str, Hashable] = {}
        self.tails: dict[str, bytes] = {}  # a string label's encoded end of an event
        # keys two labels sent share ("1" and 1): the service may have refused either, so
        # only the model's classes tell which one a key stands for
        self.ambiguous: set[str] = set()

    def clear(self) -> None:
        """Forget every label (the model was deleted)."""
        self.by_key.clear()
        self.tails.clear()
        self.ambiguous.clear()

    def set_classes(self, classes: Iterable[Hashable]) -> None:
        """The model's classes, as its summary lists them: what their keys stand for."""
        for y in classes:
            key = label_key(y)
            self.by_key[key] = y
            self.ambiguous.discard(key)

    def tail(self, y: Any) -> bytes:
        """``,"label":<y>}``, the end of an encoded event (the label checked and remembered)."""
        if type(y) is str:
            known = self.tails.get(y)
            if known is not None:
                return known
        y = clean_label(y)
        self.add(y)
        out = b',"label":' + orjson.dumps(y) + b"}"
        if type(y) is str:  # only strings: True == 1 as dict keys, and they encode apart
            self.tails[y] = out
        return out

    def add(self, y: Hashable) -> None:
        """Remember a label sent."""
        key = label_key(y)
        known = self.by_key.setdefault(key, y)
        if type(known) is not type(y) or known != y:
            self.ambiguous.add(key)

    def add_many(self, ys: Iterable[Hashable]) -> None:
        """Remember labels sent."""
        for y in set(ys):
            self.add(y)

    def decode(self, probabilities: dict[str, float]) -> dict[Hashable, float] | None:
        """The probabilities keyed by labels, or None when a key is not known (or ambiguous)."""
        by_key = self.by_key
        if self.ambiguous and not self.ambiguous.isdisjoint(probabilities):
            return None
        try:
            return {by_key[k]: p for k, p in probabilities.items()}
        except KeyError:
            return None

    def decode_known(self, probabilities: dict[str, float]) -> dict[Hashable, float]:
        """The probabilities keyed by labels, a key not known kept as the string it is."""
        by_key = self.by_key
        return {by_key.get(k, k): p for k, p in probabilities.items()}
