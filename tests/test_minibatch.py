"""learn_many: atomic batches, mid-batch classes and features, any batch boundaries."""

from __future__ import annotations

import random

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamtree import InputError, ProbabilityTree
from tests.batches import learn_in_batches


def rows(n: int, seed: int = 0) -> list[tuple[dict, object]]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        x = {"a": rng.random(), "c": rng.choice("pqr")}
        if i > n // 2:
            x["late"] = rng.random()
        y = "hi" if x["a"] > 0.6 else ("mid" if i > n // 3 and x["c"] == "p" else "lo")
        if rng.random() < 0.05:  # missing values, as None
            x[rng.choice(sorted(x))] = None
        out.append((x, y))
    return out


@settings(max_examples=15, deadline=None)
@given(st.lists(st.integers(1, 300), min_size=1, max_size=12))  # batches of dicts are encoded by row and by column
def test_any_batch_boundaries_give_the_same_model(sizes: list[int]) -> None:
    data = rows(700, seed=1)
    one = ProbabilityTree(grace_period=15, refit_every=40)
    for x, y in data:
        one.learn_one(x, y)
    many = learn_in_batches(ProbabilityTree(grace_period=15, refit_every=40), data, sizes)
    assert many.n_examples == len(data)
    assert one.to_bytes() == many.to_bytes()


def test_a_bad_row_rejects_the_whole_batch_and_changes_nothing() -> None:
    model = ProbabilityTree(grace_period=15)
    data = rows(200)
    model.learn_many([x for x, _ in data], [y for _, y in data])
    before = model.to_bytes()
    batch = [{"a": 0.5, "c": "p"}, {"a": "oops", "c": "q"}]
    with pytest.raises(InputError) as err:
        model.learn_many(batch, ["lo", "hi"])
    assert err.value.field == "a"
    frame = pd.DataFrame({"a": [0.1, np.inf], "c": ["p", "q"]})
    with pytest.raises(InputError, match="finite"):
        model.learn_many(frame, ["lo", "hi"])
    with pytest.raises(InputError, match="label"):
        model.learn_many([{"a": 0.1}], [2.5])
    with pytest.raises(InputError, match="same length"):
        model.learn_many([{"a": 0.1}], ["lo", "hi"])
    assert model.to_bytes() == before


def test_dataframe_with_missing_values_and_mixed_columns_equals_rows() -> None:
    data = rows(300, seed=2)
    frame = pd.DataFrame([x for x, _ in data])  # 'late' is NaN in the first half
    labels = [y for _, y in data]
    by_frame = ProbabilityTree(grace_period=15)
    by_frame.learn_many(frame, labels)
    by_rows = ProbabilityTree(grace_period=15)
    for x, y in data:
        by_rows.learn_one(x, y)
    assert by_frame.to_bytes() == by_rows.to_bytes()
    assert by_frame.registry.names == ["a", "c", "late"]


def test_empty_batch_is_a_no_op() -> None:
    model = ProbabilityTree()
    model.learn_many([], [])
    assert model.n_examples == 0 and model.predict_proba_one({"a": 1}) == {}
