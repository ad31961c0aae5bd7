"""Checks of the limits that are settings, each refusal naming its field.

Also the refusals of what the library would not learn: its
:class:`~streamtree.exceptions.InputError` as a 422 naming the field (:func:`input_error`), and
a prediction kept for a delayed label whose features could never be learned
(:func:`check_learnable`).

Every refusal is an :class:`~app.exceptions.InvalidInput` whose ``loc`` names the offending
field from the body down, exactly as pydantic's own errors do; the HTTP layer answers both
with the same 422 shape, so clients handle one error shape.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from streamtree.decision import MAX_COST, CostMatrix
from streamtree.exceptions import DecisionError, InputError
from streamtree.values import NUMERIC

from .exceptions import InvalidInput, Loc
from .schemas import INT_BOUND
from .settings import Settings

__all__ = [
    "MAX_DECISIONS",
    "Limits",
    "Loc",
    "check_costs",
    "check_event",
    "check_features",
    "check_id",
    "check_ids_once",
    "check_instances",
    "check_label",
    "check_learnable",
    "check_length",
    "check_names",
    "event_loc",
    "field_error",
    "input_error",
]


#: Most decisions in a cost matrix: a decision's expected cost is one pass over the labels,
#: for every instance of a batch.
MAX_DECISIONS = 100


@dataclass(frozen=True)
class Limits:
    """The request limits, taken from :class:`app.settings.Settings`."""

    max_batch: int
    max_features: int
    max_string_length: int
    max_labels: int
    max_answer_values: int = 2_000_000

    @classmethod
    def from_settings(cls, settings: Settings) -> Limits:
        """Pick the limits out of the settings."""
        return cls(
            settings.max_batch,
            settings.max_features,
            settings.max_string_length,
            settings.max_labels,
            settings.max_answer_values,
        )


def field_error(loc: Loc, msg: str, kind: str = "value_error") -> InvalidInput:
    """The refusal of the field at ``loc`` (a 422 over HTTP)."""
    return InvalidInput(loc, msg, kind)


def input_error(exc: InputError, features_loc: Loc, label_loc: Loc | None = None) -> InvalidInput:
    """The library's InputError as a refusal naming the field (a feature, or the label)."""
    name = getattr(exc, "field", None)
    if name == "label" and label_loc is not None:
        loc: Loc = label_loc
    elif isinstance(name, (str, int)):
        loc = (*features_loc, name)
    else:
        loc = features_loc
    return field_error(loc, str(exc), "invalid_input")


def check_learnable(model: Any, x: dict[str, Any], loc: Loc) -> None:
    """Refuse (422 at ``loc``) an instance kept for a delayed label whose features the model
    would refuse to learn: a value of the other kind than its feature's (a prediction reads
    it as missing, but the label would be refused, and the id could never be labelled)."""
    registry = getattr(model, "registry", None)
    if registry is None:
        return
    index, kinds = registry.index, registry.kinds
    for name, value in x.items():
        fid = index.get(name)
        if fid is None:
            continue  # a new feature: registered with the kind of its value when learned
        try:
            kind, _ = registry.classify(name, value)
        except InputError as exc:
            raise input_error(exc, loc) from None
        if kind is not None and kind != kinds[fid]:
            expected = "numeric" if kinds[fid] == NUMERIC else "nominal (str or bool)"
            raise field_error(
                (*loc, name),
                f"Feature {name!r} is {expected} in this model, so a prediction kept for a delayed "
                f"label cannot hold {value!r}",
                "invalid_input",
            )


def event_loc(batch: bool, key: str, i: int) -> Loc:
    """Location of item ``i`` of a request: ``("body", key, i)``, or ``("body",)`` if single."""
    return ("body", key, i) if batch else ("body",)


def check_length(items: Sequence[Any], loc: Loc, limits: Limits) -> None:
    """Refuse a batch with more than ``max_batch`` items."""
    if len(items) > limits.max_batch:
        raise field_error(loc, f"List should have at most {limits.max_batch} items, not {len(items)}", "too_long")


def check_answer_size(n: int, per_instance: int, what: str, loc: Loc, limits: Limits) -> None:
    """Refuse a batch of ``n`` instances whose answer holds ``per_instance`` values each
    (``what`` says which) when that is over ``max_answer_values`` in all: the answer is built
    whole, in memory, before its first byte is sent."""
    if n * per_instance > limits.max_answer_values:
        fit = limits.max_answer_values // per_instance
        raise field_error(
            loc,
            f"The answer would hold {n:,} instances x {per_instance:,} values ({what}) = "
            f"{n * per_instance:,} values, over {limits.max_answer_values:,} on this service "
            f"(setting max_answer_values): send at most {fit:,} instances a request",
            "too_long",
        )


def _check_int(v: int, loc: Loc) -> None:
    if not -INT_BOUND <= v < INT_BOUND:
        raise field_error(loc, "Integers must fit in 64 bits", "int_out_of_range")


_EVENT_KEYS = frozenset({"features", "label", "id"})


def check_event(event: Any, loc: Loc) -> tuple[Any, Any, Any]:
    """The ``(features, label, id)`` of one event of a batch, its structure checked as the
    schema's ``Event`` says (pydantic skips the events of a batch: one pass here is cheaper):
    an object with ``label`` and optional ``features`` (an object or null) and ``id``, no
    other key. Values are checked with the limits afterwards."""
    if type(event) is not dict:
        raise field_error(loc, "Input should be a valid dictionary", "dict_type")
    if not _EVENT_KEYS.issuperset(event):
        extra = next(k for k in event if k not in _EVENT_KEYS)
        raise field_error((*loc, extra), "Extra inputs are not permitted", "extra_forbidden")
    if "label" not in event:
        raise field_error((*loc, "label"), "Field required", "missing")
    features = event.get("features")
    if features is not None and type(features) is not dict:
        raise field_error((*loc, "features"), "Input should be a valid dictionary", "dict_type")
    return features, event["label"], event.get("id")


#: The keys of an instance of a batch that carries an id: ``{"features": {...}, "id": ...}``.
_WRAPPED_KEYS = frozenset({"features", "id"})
_WRAPPED = 'an instance with an id is {"features": {...}, "id": ...}'


def check_instances(
    items: Sequence[Any], loc: Loc, limits: Limits
) -> tuple[list[dict[str, Any]], list[tuple[int, str | int]]]:
    """The features of each instance of a batch, and ``(i, id)`` for each instance ``i`` sent with an id.

    An instance is a features object, or ``{"features": {...}, "id": ID}``: read as the latter
    when its ``features`` is an object (a feature value never is) or its keys are exactly
    ``features`` and ``id``. Such an instance has no other key, its ``features`` is an object
    and its ``id`` an id (:func:`check_id`) or null (no id); a batch names each id at most once.
    Each refusal names the field (``("body", "instances", 3, "id")``). A batch without ids
    costs one key test per instance more than its features' checks, and is returned as is.
    """
    check_length(items, loc, limits)
    xs: list[dict[str, Any]] = items if isinstance(items, list) else list(items)
    ids: list[tuple[int, str | int]] = []
    for i, x in enumerate(items):
        if type(x) is not dict:
            raise field_error((*loc, i), "An instance is an object of features, or " + _WRAPPED, "dict_type")
        if "features" in x and (type(x["features"]) is dict or x.keys() == _WRAPPED_KEYS):
            if xs is items:
                xs = list(items)  # the features of each instance, in a copy (the body is left as sent)
            features, key = _unwrapped(x, (*loc, i), limits)
            xs[i] = features
            if key is not None:
                ids.append((i, key))
        else:
            check_features(x, (*loc, i), limits)
    if len(ids) > 1:
        check_ids_once(ids, loc)
    return xs, ids


def _unwrapped(x: dict[str, Any], loc: Loc, limits: Limits) -> tuple[dict[str, Any], Any]:
    """The features and id of an instance sent as ``{"features": {...}, "id": ...}``, checked."""
    if not _WRAPPED_KEYS.issuperset(x):
        extra = next(k for k in x if k not in _WRAPPED_KEYS)
        raise field_error((*loc, extra[:32]), "Extra inputs are not permitted: " + _WRAPPED, "extra_forbidden")
    if "id" not in x:
        raise field_error(
            (*loc, "id"), "Field required: " + _WRAPPED + " (without an id, send the features object itself)", "missing"
        )
    features = x["features"]
    if type(features) is not dict:
        raise field_error(
            (*loc, "features"), "The features of " + _WRAPPED + " are an object of feature name to value", "dict_type"
        )
    check_features(features, (*loc, "features"), limits)
    key = x["id"]
    if key is not None:
        check_id(key, (*loc, "id"), limits)
    return features, key


def check_ids_once(ids: Iterable[tuple[int, str | int | None]], loc: Loc) -> None:
    """Refuse a batch that names one id twice, at the second (``(*loc, i, "id")``): an id is
    one prediction's, labelled once. ``ids`` is ``(i, id)`` for items of the list at ``loc``
    (``("body", "instances")``, ``("body", "events")``); a None id is no id."""
    first: dict[str | int, int] = {}
    for i, key in ids:
        if key is None:
            continue
        if key in first:
            raise field_error(
                (*loc, i, "id"),
                f"This id is also at {loc[-1]}[{first[key]}]; a batch names each id at most once",
                "duplicate_id",
            )
        first[key] = i


def check_features(x: Mapping[str, Any], loc: Loc, limits: Limits) -> None:
    """Check one event's features: count, name length, and each value's type and range.

    A value is a finite number, a string (at most ``max_string_length``), a boolean or null;
    nested objects and arrays, NaN and infinities are refused.
    """
    if len(x) > limits.max_features:
        raise field_error(loc, f"At most {limits.max_features} features per event, not {len(x)}", "too_many_features")
    m = limits.max_string_length
    for k, v in x.items():  # the hot loop of a batch: inline tests, no calls on the way through
        if len(k) > m:
            raise field_error((*loc, k[:32]), f"Feature names have at most {m} characters", "string_too_long")
        t = type(v)
        if t is float:
            if v - v != 0.0:  # NaN or an infinity (v - v is NaN), without a call to math.isfinite
                raise field_error(
                    (*loc, k), "Feature values must be finite numbers (no NaN or infinity)", "finite_number"
                )
        elif t is str:
            if len(v) > m:
                _check_length(v, (*loc, k), m)
        elif t is int:
            if not -INT_BOUND <= v < INT_BOUND:
                _check_int(v, (*loc, k))
        elif t is not bool and v is not None:
            raise field_error(
                (*loc, k),
                "Feature values must be a number, string, boolean or null (no nested objects or arrays)",
                "feature_type",
            )


def _check_length(value: str, loc: Loc, most: int) -> None:
    if len(value) > most:
        raise field_error(loc, f"String should have at most {most} characters", "string_too_long")


def check_names(names: Sequence[Any], loc: Loc, limits: Limits) -> None:
    """Feature names in a config: strings of at most ``max_string_length`` characters, or
    integers that fit in 64 bits, as in an event (the library checks the list's type and length)."""
    for i, name in enumerate(names):
        t = type(name)
        if t is str:
            _check_length(name, (*loc, i), limits.max_string_length)
        elif t is int:
            _check_int(name, (*loc, i))


def check_label(y: Any, loc: Loc, limits: Limits) -> None:
    """A label is a string (at most ``max_string_length``), an integer or a boolean."""
    t = type(y)
    if t is str:
        _check_length(y, loc, limits.max_string_length)
    elif t is int:
        _check_int(y, loc)
    elif t is not bool:
        raise field_error(loc, "A label must be a string, an integer or a boolean", "label_type")


def check_id(i: Any, loc: Loc, limits: Limits) -> None:
    """An id is a string (at most ``max_string_length``) or an integer."""
    t = type(i)
    if t is str:
        _check_length(i, loc, limits.max_string_length)
    elif t is int:
        _check_int(i, loc)
    else:
        raise field_error(loc, "An id must be a string or an integer", "id_type")


def check_costs(costs: Any, loc: Loc, limits: Limits) -> CostMatrix:
    """A cost matrix (decision to ``{label: cost}``) checked with the library's rules
    (:meth:`streamtree.decision.CostMatrix.of`) and the limits: at most :data:`MAX_DECISIONS`
    decisions, ``max_labels`` labels per decision, names of ``max_string_length`` characters.
    A refusal's ``loc`` goes down to the decision and label at fault."""
    if not isinstance(costs, Mapping) or not costs:
        raise field_error(loc, "Costs must be a non-empty object of decision to {label: cost}", "costs")
    if len(costs) > MAX_DECISIONS:
        raise field_error(loc, f"At most {MAX_DECISIONS} decisions, not {len(costs)}", "too_many_decisions")
    m = limits.max_string_length
    for decision, row in costs.items():
        _check_length(decision, (*loc, decision[:32]), m)
        if isinstance(row, Mapping):
            if len(row) > limits.max_labels:
                raise field_error(
                    (*loc, decision),
                    f"At most {limits.max_labels} labels per decision, not {len(row)}",
                    "too_many_labels",
                )
            for label in row:
                _check_length(label, (*loc, decision, label[:32]), m)
    try:
        return CostMatrix.of(costs)
    except DecisionError as exc:
        where = tuple(v for v in (exc.decision, exc.label) if isinstance(v, str))
        msg = (
            f"Costs must be finite numbers of magnitude at most {MAX_COST:g}"
            if exc.label is not None
            else "Each decision's costs must be a non-empty object of label to cost"
        )
        raise field_error((*loc, *where), msg, "costs") from None
