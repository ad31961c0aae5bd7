"""``learn_many(..., return_proba=True)``: the prequential predictions of a batch, each what
``predict_proba_one`` gave just before the row was learned."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pytest
from river import datasets

from streamtree import ProbabilityForest, ProbabilityTree


def test_each_row_is_the_prediction_made_just_before_it_was_learned() -> None:
    stream = list(datasets.Phishing())[:300]
    one = ProbabilityTree(grace_period=10)
    expected = []
    for x, y in stream:
        expected.append(one.predict_proba_one(x))
        one.learn_one(x, y)
    many = ProbabilityTree(grace_period=10)
    got = many.learn_many([x for x, _ in stream], [y for _, y in stream], return_proba=True)
    assert got is not None and got.shape == (300, len(many.classes_))
    for row, proba in zip(got, expected):
        assert row.tolist() == [proba.get(c, 0.0) for c in many.classes_]
    assert many.to_bytes() == one.to_bytes()


def test_a_class_new_in_the_batch_reads_zero_before_its_first_row() -> None:
    model = ProbabilityTree()
    got = model.learn_many(pd.DataFrame({"a": [1.0, 2.0, 3.0]}), np.array(["x", "y", "x"]), return_proba=True)
    assert model.classes_ == ["x", "y"]
    assert got is not None
    assert got[0].tolist() == [0.0, 0.0]  # nothing learned yet
    assert got[1, 1] == 0.0 and got[1, 0] > 0.0
    assert np.allclose(got[2].sum(), 1.0)


def _hostile(n: int, seed: int) -> list[tuple[dict[str, object], str]]:
    """New categories all along (and past ``max_categories``), features that come late or go
    missing, a class that comes late."""
    rng = np.random.default_rng(seed)
    out: list[tuple[dict[str, object], str]] = []
    for i in range(n):
        x: dict[str, object] = {"a": float(rng.normal()), "c": f"v{rng.integers(0, 5 + i // 20)}"}
        if i > 50:
            x["b"] = float(rng.normal())
        if i > 120:
            x["d"] = f"w{rng.integers(0, 50)}"
        if rng.random() < 0.1:
            del x["c"]
        y = "yes" if (float(x["a"]) > 0) ^ (x.get("c") in ("v1", "v3")) else "no"  # type: ignore[arg-type]
        out.append((x, y if i < 300 or rng.random() < 0.8 else "maybe"))
    return out


@pytest.mark.parametrize(
    "make",
    [
        lambda: ProbabilityTree(grace_period=20),
        lambda: ProbabilityTree(grace_period=20, max_categories=8, naive_bayes=True),
        lambda: ProbabilityForest(n_trees=3, seed=3, tree={"grace_period": 20, "max_categories": 6}),
    ],
    ids=["tree", "tree-bounded-nb", "forest"],
)
def test_a_value_new_at_a_row_is_predicted_as_predict_proba_one_saw_it(make: Callable[[], Any]) -> None:
    # the loop predicted each row with the batch's codes: a category new at that row was routed
    # past its split (0.997 where predict_proba_one gave 0.66), and the service's metrics
    # scored predictions no client got
    stream = _hostile(800, seed=2)
    one = make()
    expected = []
    for x, y in stream:
        expected.append(one.predict_proba_one(x))
        one.learn_one(x, y)
    for size in (1, 9, 800):
        many = make()
        rows = []
        for s in range(0, len(stream), size):
            part = stream[s : s + size]
            got = many.learn_many([x for x, _ in part], [y for _, y in part], return_proba=True)
            rows += [dict(zip(many.classes_, row)) for row in got.tolist()]
        for i, (row, proba) in enumerate(zip(rows, expected)):
            assert [row.get(c, 0.0) for c in many.classes_] == [proba.get(c, 0.0) for c in many.classes_], (size, i)
        assert many.to_bytes() == one.to_bytes()
