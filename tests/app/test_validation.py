"""Limit and value checks, each error naming its field."""

from __future__ import annotations

import math

import pytest

from app.exceptions import InvalidInput
from app.validation import (
    MAX_DECISIONS,
    Limits,
    check_costs,
    check_event,
    check_features,
    check_id,
    check_instances,
    check_label,
    check_length,
)

LIMITS = Limits(max_batch=3, max_features=4, max_string_length=5, max_labels=2)


def error(fn, *args):  # type: ignore[no-untyped-def]
    with pytest.raises(InvalidInput) as info:
        fn(*args)
    (e,) = info.value.errors()
    return e["loc"], e["type"]


@pytest.mark.parametrize("x", [{}, {"a": 1, "b": -2.5, "c": "abcde", "d": None}, {"t": True}, {"i": 2**63 - 1}])
def test_valid_features_pass(x) -> None:  # type: ignore[no-untyped-def]
    check_features(x, ("f",), LIMITS)


@pytest.mark.parametrize(
    "x, loc, kind",
    [
        ({"a": math.nan}, ("f", "a"), "finite_number"),
        ({"a": -math.inf}, ("f", "a"), "finite_number"),
        ({"a": {"b": 1}}, ("f", "a"), "feature_type"),
        ({"a": [1]}, ("f", "a"), "feature_type"),
        ({"a": "abcdef"}, ("f", "a"), "string_too_long"),
        ({"abcdef": 1}, ("f", "abcdef"), "string_too_long"),
        ({"a": 2**63}, ("f", "a"), "int_out_of_range"),
        ({k: 1 for k in "abcde"}, ("f",), "too_many_features"),
    ],
)
def test_invalid_features_name_the_field(x, loc, kind) -> None:  # type: ignore[no-untyped-def]
    assert error(check_features, x, ("f",), LIMITS) == (loc, kind)


def test_labels_ids_and_batch_length() -> None:
    for ok in ("abc", 3, True):
        check_label(ok, ("l",), LIMITS)
    assert error(check_label, 1.5, ("l",), LIMITS) == (("l",), "label_type")
    assert error(check_label, None, ("l",), LIMITS) == (("l",), "label_type")
    assert error(check_label, "abcdef", ("l",), LIMITS) == (("l",), "string_too_long")
    check_id("abc", ("i",), LIMITS)
    check_id(-4, ("i",), LIMITS)
    assert error(check_id, False, ("i",), LIMITS) == (("i",), "id_type")
    check_length([1, 2, 3], ("b",), LIMITS)
    assert error(check_length, [1, 2, 3, 4], ("b",), LIMITS) == (("b",), "too_long")


@pytest.mark.parametrize(
    "costs, loc, kind",
    [
        ({}, ("c",), "costs"),
        ([], ("c",), "costs"),
        ({"a": {}}, ("c", "a"), "costs"),
        ({"a": 1}, ("c", "a"), "costs"),
        ({"a": {"x": math.inf}}, ("c", "a", "x"), "costs"),
        ({"a": {"x": 1}, "b": {"x": False}}, ("c", "b", "x"), "costs"),
        ({"a": {"x": 1, "y": 1, "z": 1}}, ("c", "a"), "too_many_labels"),
        ({"abcdef": {"x": 1}}, ("c", "abcdef"), "string_too_long"),
        ({"a": {"xxxxxx": 1}}, ("c", "a", "xxxxxx"), "string_too_long"),
        ({f"d{i}": {"x": 1} for i in range(MAX_DECISIONS + 1)}, ("c",), "too_many_decisions"),
    ],
)
def test_bad_costs_are_named_down_to_the_decision_and_label(costs, loc, kind) -> None:  # type: ignore[no-untyped-def]
    assert error(check_costs, costs, ("c",), LIMITS) == (loc, kind)


def test_valid_costs_give_the_librarys_cost_matrix() -> None:
    matrix = check_costs({"a": {"x": 1, "y": -2.5}, "b": {"x": 0}}, ("c",), LIMITS)
    assert matrix.decisions == ("a", "b") and matrix.labels == ("x", "y")
    assert matrix.to_dict() == {"a": {"x": 1.0, "y": -2.5}, "b": {"x": 0.0}}


@pytest.mark.parametrize(
    "event, loc, kind",
    [
        ([1], ("e",), "dict_type"),
        ({"features": {}, "label": "y", "other": 1}, ("e", "other"), "extra_forbidden"),
        ({"features": {}}, ("e", "label"), "missing"),
        ({"features": [1], "label": "y"}, ("e", "features"), "dict_type"),
    ],
)
def test_check_event_names_the_field(event, loc, kind) -> None:  # type: ignore[no-untyped-def]
    assert error(check_event, event, ("e",)) == (loc, kind)


WIDE = Limits(max_batch=4, max_features=4, max_string_length=8, max_labels=2)


def test_check_instances_unwraps_ids_and_leaves_a_batch_without_ids_as_sent() -> None:
    plain = [{"a": 1}, {"features": 2.0, "b": None}, {"id": "x"}]  # no features object: plain features
    xs, ids = check_instances(plain, ("body", "instances"), WIDE)
    assert xs is plain and ids == []
    mixed = [{"a": 1}, {"features": {"b": 2}, "id": "x"}, {"features": {}, "id": None}, {"features": {"c": 3}, "id": 4}]
    xs, ids = check_instances(mixed, ("body", "instances"), WIDE)
    assert xs == [{"a": 1}, {"b": 2}, {}, {"c": 3}] and ids == [(1, "x"), (3, 4)]
    assert mixed[1] == {"features": {"b": 2}, "id": "x"}  # the body is left as sent


@pytest.mark.parametrize(
    "instance, loc, kind",
    [
        ({"features": {"a": 1}, "id": "x", "y": 1}, ["y"], "extra_forbidden"),
        ({"features": {"a": 1}}, ["id"], "missing"),
        ({"features": 1, "id": "x"}, ["features"], "dict_type"),
        ({"features": {"a": [1]}, "id": "x"}, ["features", "a"], "feature_type"),
        ({"features": {"a": 1}, "id": 1.0}, ["id"], "id_type"),
        ({"features": {"a": 1}, "id": "x" * 9}, ["id"], "string_too_long"),
        ({"features": {"a": 1}, "id": "a"}, ["id"], "duplicate_id"),
        (None, [], "dict_type"),
    ],
)
def test_check_instances_names_the_field(instance, loc, kind) -> None:  # type: ignore[no-untyped-def]
    items = [{"features": {}, "id": "a"}, instance]
    assert error(check_instances, items, ("body", "instances"), WIDE) == (("body", "instances", 1, *loc), kind)
