"""The events of a learn request checked in one pass over each column, into the columns the writer learns.

A batch of ``POST /learn`` (``{"events": [...]}``) is checked against the schema's ``Event``
(an object with ``label``, optional ``features`` and ``id``, no other key) and the limits
(:mod:`app.validation`) by whole columns rather than event by event: the set of event types,
the union of their keys, the set of types of all feature values, of the labels and of the ids,
and per type one reduction (the longest string, the smallest and largest integer, the sum of
the floats, which is finite exactly when no float is NaN or infinite and their sum does not
overflow). Each of these is a loop in C over the batch (``map``, ``set``, ``sum``,
``itertools``), not a Python call per event.

That pass only answers whether every event is acceptable. When it is not sure (a refusal, or
floats whose sum overflows), the events are checked one by one as a single event is
(:func:`check_event`, :func:`check_one`), which raises the first refusal in event order with
the field it names (``body.events[i].features.x``): the answer to a bad batch is the same as
event by event, and a refused event still means none of the request's events is learned.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import chain, compress, repeat
from operator import contains, is_, itemgetter
from typing import Any

from .admission import EventBatch, LearnEvent
from .exceptions import Loc
from .schemas import INT_BOUND
from .validation import (
    Limits,
    check_event,
    check_features,
    check_id,
    check_ids_once,
    check_label,
    check_length,
    field_error,
)

__all__ = ["check_batch", "check_one"]

_NONE = type(None)
#: The types of a feature value, a label and an id (exactly: a bool is not an int here).
_VALUE_TYPES: frozenset[type] = frozenset({float, int, str, bool, _NONE})
_LABEL_TYPES = frozenset({str, int, bool})
_ID_TYPES: frozenset[type] = frozenset({str, int, _NONE})
_EVENT_KEYS = frozenset({"features", "label", "id"})
_LABEL = itemgetter("label")


def check_one(features: dict[str, Any] | None, label: Any, id: Any, loc: Loc, limits: Limits) -> LearnEvent:
    """One event (a single learn, or one of a batch at ``loc``), its values checked against the limits."""
    if features is not None:
        check_features(features, (*loc, "features"), limits)
    elif id is None:
        raise field_error(loc, "Value error, an event needs 'features', or an 'id' of an earlier prediction")
    check_label(label, (*loc, "label"), limits)
    if id is not None:
        check_id(id, (*loc, "id"), limits)
    return LearnEvent(features, label, id)


def check_batch(events: Sequence[Any], limits: Limits) -> EventBatch:
    """The events of a batch (``body.events``) checked, as columns.

    Raises
    ------
    app.exceptions.InvalidInput
        The first refused event's field (``("body", "events", i, ...)``), as
        :func:`check_one` names it; or a batch longer than ``max_batch``, or one naming an id
        twice (at the second).
    """
    check_length(events, ("body", "events"), limits)
    batch = _columns(events, limits)
    if batch is None:  # a refusal somewhere (or floats the fast pass cannot vouch for): the exact answer
        checked = [
            check_one(*check_event(e, ("body", "events", i)), ("body", "events", i), limits)
            for i, e in enumerate(events)
        ]
        ids = [e.id for e in checked]
        batch = EventBatch(
            [e.features for e in checked],
            [e.label for e in checked],
            ids if any(i is not None for i in ids) else None,
        )
    if batch.ids is not None:
        check_ids_once(enumerate(batch.ids), ("body", "events"))
    return batch


def _columns(events: Sequence[Any], limits: Limits) -> EventBatch | None:
    """The batch as columns if every event is acceptable, else None (the module docstring)."""
    if set(map(type, events)) != {dict}:
        return None
    keys = set().union(*events)
    if not _EVENT_KEYS.issuperset(keys) or not all(map(contains, events, repeat("label"))):
        return None
    ys = list(map(_LABEL, events))
    xs: list[Any] = list(map(dict.get, events, repeat("features"))) if "features" in keys else [None] * len(events)
    ids: list[Any] | None = list(map(dict.get, events, repeat("id"))) if "id" in keys else None
    if ids is not None and set(map(type, ids)) == {_NONE}:
        ids = None
    kinds = set(map(type, xs))
    if not kinds <= {dict, _NONE}:
        return None
    features = xs
    if _NONE in kinds:  # delayed labels: each needs an id
        if ids is None or any(x is None and i is None for x, i in zip(xs, ids, strict=True)):
            return None
        features = [x for x in xs if x is not None]
    if not (_features_ok(features, limits) and _labels_ok(ys, limits.max_string_length)):
        return None
    if ids is not None and not _ids_ok(ids, limits.max_string_length):
        return None
    return EventBatch(xs, ys, ids)


def _features_ok(features: list[dict[str, Any]], limits: Limits) -> bool:
    """Whether every features object passes :func:`app.validation.check_features`."""
    if not features:
        return True
    m = limits.max_string_length
    if max(map(len, features)) > limits.max_features:
        return False
    names = set().union(*features)
    if names and max(map(len, names)) > m:
        return False
    if min(map(len, features)) == max(map(len, features)):
        # Columns by position (a feature's column when every event sends its keys in one order):
        # each then holds one type, checked by one reduction.
        return all(_values_ok(col, set(map(type, col)), m, _VALUE_TYPES) for col in zip(*map(dict.values, features)))
    values = list(chain.from_iterable(map(dict.values, features)))
    return _values_ok(values, set(map(type, values)), m, _VALUE_TYPES)


def _labels_ok(ys: list[Any], m: int) -> bool:
    """Whether every label passes :func:`app.validation.check_label`."""
    return _values_ok(ys, set(map(type, ys)), m, _LABEL_TYPES)


def _ids_ok(ids: list[Any], m: int) -> bool:
    """Whether every id passes :func:`app.validation.check_id` (or is null: no id)."""
    return _values_ok(ids, set(map(type, ids)), m, _ID_TYPES)


def _values_ok(values: Sequence[Any], types: set[type], m: int, allowed: frozenset[type]) -> bool:
    """Whether ``values`` (of ``types``) are all of an allowed type, their floats finite,
    their integers within 64 bits and their strings at most ``m`` characters."""
    if not allowed.issuperset(types):
        return False
    if float in types:
        floats = values if len(types) == 1 else compress(values, map(is_, map(type, values), repeat(float)))
        total = sum(floats, 0.0)
        if total - total != 0.0:  # a NaN or an infinity among them (or a sum that overflows: checked one by one)
            return False
    if str in types:
        strings = values if len(types) == 1 else compress(values, map(is_, map(type, values), repeat(str)))
        if max(map(len, strings)) > m:
            return False
    if int in types:
        ints = values if len(types) == 1 else list(compress(values, map(is_, map(type, values), repeat(int))))
        if min(ints) < -INT_BOUND or max(ints) >= INT_BOUND:
            return False
    return True
