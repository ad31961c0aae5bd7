"""``learn_many(..., return_proba=True)``: the prequential predictions of a batch."""

from __future__ import annotations

import numpy as np
import pandas as pd
from river import datasets

from streamtree import ProbabilityTree


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
