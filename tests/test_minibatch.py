"""learn_many: atomic batches, mid-batch classes and features, any batch boundaries."""

from __future__ import annotations

import random

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamtree import InputError, ProbabilityForest, ProbabilityTree
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


@pytest.mark.parametrize("shape", ["dicts", "frame", "late_nan"])
def test_a_first_numeric_feature_after_a_batchs_first_row_gives_learn_ones_model(shape: str) -> None:
    # learn_one learns the rows before a model's first numeric feature without a numeric
    # column (so without the linear component); the batch must too, bit for bit
    rng = random.Random(4)
    data: list[tuple[dict, object]] = [({"c": "u"}, "p"), ({"c": "v"}, "q")]
    for i in range(800):
        v = rng.gauss(0.0, 1.0)
        data.append(({"c": "uv"[i % 2], "a": v}, "p" if v > 0 else "q"))
    if shape == "late_nan":  # the numeric column is there from the start, NaN (missing) at first
        data = [({"c": x["c"], "a": x.get("a", float("nan"))}, y) for x, y in data]
    one = ProbabilityTree()
    expected = []
    for x, y in data:
        p = one.predict_proba_one(x)
        expected.append([p.get(c, 0.0) for c in ("p", "q")])
        one.learn_one(x, y)
    xs = [x for x, _ in data]
    many = ProbabilityTree()
    proba = many.learn_many(pd.DataFrame(xs) if shape != "dicts" else xs, [y for _, y in data], return_proba=True)
    assert many.to_bytes() == one.to_bytes()
    assert proba.tolist() == expected
    quiet = ProbabilityTree()  # without the predictions: the same model
    quiet.learn_many(pd.DataFrame(xs) if shape != "dicts" else xs, [y for _, y in data])
    assert quiet.to_bytes() == one.to_bytes()


@pytest.mark.parametrize("y", [5, None, "pq", {"a": 1}])
def test_labels_that_are_not_a_sequence_are_refused_naming_y(y: object) -> None:
    model = ProbabilityTree()
    with pytest.raises(InputError, match="sequence of labels") as err:
        model.learn_many([{"a": 1.0}], y)
    assert err.value.field == "y" and model.n_examples == 0


def test_a_frame_with_a_column_twice_is_refused_naming_it() -> None:
    model = ProbabilityTree()
    frame = pd.DataFrame([[1.0, 2.0], [3.0, 4.0]], columns=["a", "a"])
    for X in (frame, frame.astype(object)):
        with pytest.raises(InputError, match="'a' more than once") as err:
            model.learn_many(X, ["p", "q"])
        assert err.value.field == "X" and model.n_examples == 0


def test_a_nominal_features_all_missing_column_in_a_frame_is_missing() -> None:
    # pandas reads a chunk's empty column as float NaN: it was taken for a numeric column and
    # written over the nominal one's index among the numeric columns (or past their end)
    one, many = ProbabilityTree(), ProbabilityTree()
    for m in (one, many):
        m.learn_one({"a": 1.0, "b": "x"}, "p")
    one.learn_one({"a": 5.0, "b": float("nan")}, "q")
    many.learn_many(pd.DataFrame({"a": [5.0], "b": [np.nan]}), ["q"])
    assert one.to_bytes() == many.to_bytes()
    one, many = ProbabilityTree(), ProbabilityTree()
    for m in (one, many):
        m.learn_one({"a": 1.0, "b": "x", "c": "u"}, "p")
    one.learn_one({"a": 2.0, "b": "x", "c": None}, "q")
    many.learn_many(pd.DataFrame({"a": [2.0], "b": ["x"], "c": [np.nan]}), ["q"])  # was an IndexError
    assert one.to_bytes() == many.to_bytes()


def _y_shapes() -> list[tuple[str, object]]:
    labels = [0, 1, 1, 0]
    frame = pd.DataFrame({"target": labels, "other": labels})
    return [
        ("2-D ints", np.array(labels).reshape(-1, 1)),
        ("2-D bools", np.array(labels, dtype=bool).reshape(-1, 1)),
        ("2-D strs", np.array(["p", "q", "q", "p"]).reshape(-1, 1)),
        ("1x4 ints", np.array(labels).reshape(1, -1)),
        ("0-D", np.array(1)),
        ("frame of one column", frame[["target"]]),
        ("frame of two columns", frame),
        ("set", {"p", "q", "r", "s"}),
        ("frozenset", frozenset({"p", "q", "r", "s"})),
        ("keys view", dict.fromkeys("pqrs").keys()),
    ]


@pytest.mark.parametrize("make", ["tree", "forest"])
@pytest.mark.parametrize(("what", "y"), _y_shapes(), ids=[w for w, _ in _y_shapes()])
def test_labels_not_one_per_row_in_order_are_refused_and_change_nothing(make: str, what: str, y: object) -> None:
    # a 2-D y once replaced the registry before failing in the loop, without the new numeric
    # columns' first values (their shift), so the model later learned the same data differently;
    # a DataFrame gave its column names as labels, a set an order that depends on the hash seed
    def new() -> ProbabilityTree | ProbabilityForest:
        return (
            ProbabilityTree(grace_period=10)
            if make == "tree"
            else ProbabilityForest(n_trees=2, tree={"grace_period": 10})
        )

    rng = random.Random(5)
    X = pd.DataFrame({"a": [1e6 + rng.gauss(0, 1) for _ in range(300)], "c": [rng.choice("xy") for _ in range(300)]})
    labels = [int((a > 1e6) != (c == "x")) for a, c in zip(X.a, X.c)]
    model, fresh = new(), new()
    before = model.to_bytes()
    with pytest.raises(InputError, match="^y must") as err:
        model.learn_many(X.iloc[:4], y)
    assert err.value.field == "y"
    assert model.to_bytes() == before and model.registry.names == []
    model.learn_many(X, labels)
    fresh.learn_many(X, labels)
    assert model.to_bytes() == fresh.to_bytes()


def test_a_series_and_a_1d_array_of_labels_are_learned_as_a_list() -> None:
    X = [{"a": float(i)} for i in range(6)]
    labels = [True, False, True, True, False, False]
    models = [ProbabilityTree() for _ in range(4)]
    for model, y in zip(models, [labels, np.array(labels), pd.Series(labels), (v for v in labels)]):
        model.learn_many(X, y)
    assert len({m.to_bytes() for m in models}) == 1 and models[0].classes_ == [True, False]
