"""RowPlan (the steady state's encoding) gives exactly what the general path of
``FeatureRegistry.encode_known`` gives whenever it answers, and declines everything else."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from streamtree.features import FeatureRegistry
from streamtree.values import MAX_INT


class _Declines:
    def encode(self, x: Any) -> None:
        return None


def registry() -> FeatureRegistry:
    reg = FeatureRegistry(nominal_features=["n_int"])
    reg.encode({"a": 1.0, "b": 2, "c": "u", "d": True, "n_int": 3}, learn=True)
    reg.encode({"c": "v", "d": False}, learn=True)
    return reg


def general(reg: FeatureRegistry, x: dict[str, Any]) -> Any:
    plan = reg.plan
    reg.plan = _Declines()  # type: ignore[assignment]
    try:
        return reg.encode_known(x)
    finally:
        reg.plan = plan


values = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(2**1030), max_value=2**1030),
    st.booleans(),
    st.none(),
    st.sampled_from(["u", "v", "w", ""]),
)
events = st.dictionaries(st.sampled_from(["a", "b", "c", "d", "n_int", "e"]), values, max_size=6)


@given(events)
def test_the_plan_agrees_with_the_general_path(x: dict[str, Any]) -> None:
    reg = registry()
    fast = reg.encode_known(x)  # the plan first, the general path when it declines
    slow = general(reg, x)
    assert (fast is None) == (slow is None)
    if fast is not None:
        assert np.array(fast[0]).tobytes() == np.array(slow[0]).tobytes() and fast[1] == slow[1]
    assert reg.plan is not None
    planned = reg.plan.encode(x)
    if planned is not None:
        assert np.array(planned[0]).tobytes() == np.array(slow[0]).tobytes() and planned[1] == slow[1]
    row = reg.encode_known_row(x)  # the kernels' row: the same bits, in (1, n) arrays
    assert (row is None) == (slow is None)
    if row is not None:
        assert row[0].shape == (1, reg.n_numeric) and row[1].shape == (1, reg.n_nominal)
        assert row[0].dtype == np.float64 and row[1].dtype == np.int64
        assert row[0].tobytes() == np.array(slow[0], dtype=np.float64).tobytes() and row[1][0].tolist() == slow[1]


def test_the_plan_answers_the_steady_state_and_declines_the_rest() -> None:
    reg = FeatureRegistry()
    reg.encode({"a": 1.0, "b": 2, "c": "u", "d": True}, learn=True)
    reg.encode({"c": "v", "d": False}, learn=True)
    reg.encode_known({})  # makes the plan
    plan = reg.plan
    assert plan is not None
    x = {"d": True, "a": 0.5, "c": "v", "b": 7}  # any key order
    assert plan.encode(x) == ([0.5, 7.0], [1, 0]) == general(reg, x)
    row = plan.encode_row(x)
    assert row is not None
    num, nom = row
    assert num.tolist() == [[0.5, 7.0]] and nom.tolist() == [[1, 0]]
    for bad in (
        {**x, "a": math.inf},
        {**x, "a": None},
        {**x, "b": True},  # a bool is not a number here
        {**x, "b": MAX_INT + 1},
        {**x, "b": -MAX_INT - 1},
        {**x, "a": -math.inf},  # beside an int: the check of mixed numbers
        {**x, "a": math.nan, "b": MAX_INT + 1},  # a NaN first does not hide the int after it
        {**x, "c": "unseen"},
        {**x, "d": 1},  # 1 == True, but not a nominal value
        {k: v for k, v in x.items() if k != "a"},
        {**x, "extra": 1.0},
    ):
        assert plan.encode(bad) is None and plan.encode_row(bad) is None
    for edge in ({**x, "b": -MAX_INT}, {**x, "b": math.nan}, {**x, "a": 1e308, "b": 2**80}):
        row = plan.encode_row(edge)
        assert row is not None and row[0].tobytes() == np.array(general(reg, edge)[0]).tobytes()  # type: ignore[index]
    reg.encode({"new": 1.0}, learn=True)
    assert reg.plan is None  # a new feature: a new plan
