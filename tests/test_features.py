"""The feature registry: kinds, order of first appearance, codes, validation."""

from __future__ import annotations

import numpy as np
import pytest

from streamtree.exceptions import InputError
from streamtree.features import NOMINAL, NUMERIC, FeatureRegistry


def test_kinds_follow_the_first_value_and_declarations() -> None:
    reg = FeatureRegistry(nominal_features=["zip"])
    reg.encode({"age": 3, "city": "Oslo", "ok": True, "zip": 7, "w": np.float32(1.5), "n": np.int64(2)}, learn=True)
    kinds = dict(zip(reg.names, reg.kinds))
    assert kinds == {"age": NUMERIC, "city": NOMINAL, "ok": NOMINAL, "zip": NOMINAL, "w": NUMERIC, "n": NUMERIC}


def test_missing_values_register_nothing() -> None:
    reg = FeatureRegistry()
    row = reg.encode({"a": None, "b": float("nan")}, learn=True)
    assert reg.names == [] and row.num_cols == [] and row.nom_cols == []


def test_codes_in_order_of_first_appearance_and_unseen_is_minus_one() -> None:
    reg = FeatureRegistry()
    for city in ["b", "a", "b", "c"]:
        reg.encode({"city": city}, learn=True)
    assert reg.values[0] == ["b", "a", "c"]
    assert reg.encode({"city": "zzz"}, learn=False).nom_codes == [-1]
    assert reg.encode({"unknown": 1.0}, learn=False).num_cols == []


@pytest.mark.parametrize(
    ("x", "field"),
    [({"a": float("inf")}, "a"), ({"a": [1]}, "a"), ({"a": {"b": 1}}, "a"), ({"num": "text"}, "num"), ({"nom": 3.5}, "nom")],
)
def test_unusable_values_raise_before_registering_anything(x: dict, field: str) -> None:
    reg = FeatureRegistry()
    reg.encode({"num": 1.0, "nom": "x"}, learn=True)
    before = reg.to_state()
    with pytest.raises(InputError) as err:
        reg.encode({"new_feature": 1.0, **x}, learn=True)
    assert err.value.field == field
    assert reg.to_state() == before


def test_prediction_treats_unusable_values_as_missing() -> None:
    reg = FeatureRegistry()
    reg.encode({"num": 1.0, "nom": "x"}, learn=True)
    row = reg.encode({"num": "text", "nom": 3.5}, learn=False)
    assert row.num_cols == [] and row.nom_cols == []
    assert reg.value_of(NUMERIC, 0, "text") is None and reg.value_of(NOMINAL, 0, 3.5) is None
    assert reg.value_of(NUMERIC, 0, 2) == 2 and reg.value_of(NOMINAL, 0, "x") == 0


def test_state_round_trip() -> None:
    reg = FeatureRegistry(nominal_features=["k"])
    reg.encode({"a": 1.0, "k": 3, "c": "u"}, learn=True)
    reg.encode({"c": "v"}, learn=True)
    again = FeatureRegistry.from_state(reg.to_state())
    assert again.to_state() == reg.to_state()
    assert again.encode({"c": "v", "k": 3}, learn=False).nom_codes == [1, 0]


def test_max_features_refuses_an_example_that_would_pass_it_and_registers_nothing() -> None:
    reg = FeatureRegistry(max_features=3)
    reg.encode({"a": 1.0, "b": "x"}, learn=True)
    with pytest.raises(InputError, match="max_features=3") as err:
        reg.encode({"a": 2.0, "c": 1.0, "d": "y"}, learn=True)
    assert err.value.field is None
    assert reg.names == ["a", "b"] and reg.values == [["x"]]
    reg.encode({"c": 1.0, "a": 3.0}, learn=True)  # exactly at the limit
    assert reg.names == ["a", "b", "c"]
    assert reg.encode({"e": 1.0}, learn=False).num_cols == []  # predicting ignores unknown features
    with pytest.raises(InputError, match="max_features=3"):
        FeatureRegistry.from_state(reg.to_state(), 3).encode({"e": 1.0}, learn=True)
