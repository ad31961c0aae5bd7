"""Cost-sensitive decisions (streamtree.decision): hand-computed cases, ties, validation, batch == rows."""

from __future__ import annotations

import dataclasses
import math
import random
from typing import Any

import numpy as np
import pytest

from streamtree import CostMatrix, Decision, DecisionError, ProbabilityTree, StreamtreeError, decide, decide_many

FRAUD = {"approve": {"fraud": 1000, "ok": 0}, "challenge": {"fraud": 90, "ok": 90}}


def test_the_fraud_example_by_hand() -> None:
    # E(approve) = 1000 p, E(challenge) = 90: challenge from p = 0.09 up (Fan et al., Section 3)
    d = decide({"fraud": 0.2, "ok": 0.8}, FRAUD)
    assert d == Decision("challenge", {"approve": 200.0, "challenge": 90.0})
    d = decide({"fraud": 0.05, "ok": 0.95}, FRAUD)
    assert d.decision == "approve" and d.expected_costs == pytest.approx({"approve": 50.0, "challenge": 90.0})
    assert list(d.expected_costs) == ["approve", "challenge"]  # the costs' order
    assert decide({"ok": 0.95, "fraud": 0.05}, FRAUD) == d  # the probabilities' order does not matter
    for p, expected in [(0.089, "approve"), (0.091, "challenge"), (0.0, "approve"), (1.0, "challenge")]:
        assert decide({"fraud": p, "ok": 1 - p}, FRAUD).decision == expected


def test_three_decisions_three_labels_by_hand() -> None:
    costs = {"a": {"x": 0, "y": 4, "z": 10}, "b": {"x": 3, "y": 0, "z": 3}, "c": {"x": 6, "y": 6, "z": -2}}
    d = decide({"x": 0.5, "y": 0.2, "z": 0.3}, costs)
    # a: 0 + 0.8 + 3 = 3.8; b: 1.5 + 0 + 0.9 = 2.4; c: 3 + 1.2 - 0.6 = 3.6 (a negative cost is a gain)
    assert d.decision == "b"
    assert d.expected_costs == pytest.approx({"a": 3.8, "b": 2.4, "c": 3.6})


def test_ties_go_to_the_first_tied_decision_in_the_costs_order() -> None:
    same = {"x": 1.0, "y": 2.0}
    assert decide({"x": 0.5, "y": 0.5}, {"first": same, "second": same}).decision == "first"
    assert decide({"x": 0.5, "y": 0.5}, {"second": same, "first": same}).decision == "second"
    # a tie of two decisions below a worse first one
    costs = {"worse": {"x": 5, "y": 5}, "p": {"x": 0, "y": 2}, "q": {"x": 2, "y": 0}}
    assert decide({"x": 0.5, "y": 0.5}, costs).decision == "p"
    batch = decide_many(np.array([[0.5, 0.5], [0.5, 0.5]]), costs, classes=["x", "y"])
    assert batch.decisions == ["p", "p"] and batch.index.tolist() == [1, 1]


def test_a_label_the_costs_do_not_cover_is_a_value_error_naming_it() -> None:
    costs = {"approve": {"fraud": 1000, "ok": 0}, "challenge": {"fraud": 90}}
    with pytest.raises(ValueError, match="'ok'") as info:
        decide({"fraud": 0.2, "ok": 0.8}, costs)
    e = info.value
    assert isinstance(e, DecisionError) and isinstance(e, StreamtreeError)
    assert (e.param, e.decision, e.label) == ("costs", "challenge", "ok")
    assert "'challenge'" in str(e)
    with pytest.raises(DecisionError, match="'maybe'"):  # in no decision's costs at all
        decide({"fraud": 0.2, "ok": 0.7, "maybe": 0.1}, FRAUD)
    with pytest.raises(DecisionError, match="'ok'"):
        decide_many(np.array([[0.2, 0.8]]), costs, classes=["fraud", "ok"])


def test_a_cost_for_a_label_without_probability_is_fine() -> None:
    costs = {"approve": {"fraud": 1000, "ok": 0, "unseen": 7}, "challenge": {"fraud": 90, "ok": 90}}
    assert decide({"fraud": 0.2, "ok": 0.8}, costs).decision == "challenge"
    assert decide({"fraud": 1.0}, {"approve": {"fraud": 1000, "ok": 0}, "challenge": {"fraud": 90}}).decision == (
        "challenge"
    )


@pytest.mark.parametrize(
    "costs, where",
    [
        ({}, None),
        ([("a", {"x": 1})], None),
        ("approve", None),
        ({"a": {}}, ("a", None)),
        ({"a": [1, 2]}, ("a", None)),
        ({"a": 3.0}, ("a", None)),
        ({"a": {"x": math.nan}}, ("a", "x")),
        ({"a": {"x": 1}, "b": {"x": -math.inf}}, ("b", "x")),
        ({"a": {"x": 10**400}}, ("a", "x")),
        ({"a": {"x": 1e301}}, ("a", "x")),
        ({"a": {"x": True}}, ("a", "x")),
        ({"a": {"x": "1"}}, ("a", "x")),
        ({"a": {"x": None}}, ("a", "x")),
    ],
)
def test_bad_costs_name_the_parameter_decision_and_label(costs: Any, where: Any) -> None:
    with pytest.raises(DecisionError, match="'costs' parameter of decide") as info:
        decide({"x": 1.0}, costs)
    assert info.value.param == "costs"
    if where is not None:
        assert (info.value.decision, info.value.label) == where
        assert repr(where[0]) in str(info.value)


def test_costs_at_the_bounds_are_accepted() -> None:
    big = {"a": {"x": 1e300, "y": -1e300}, "b": {"x": -1e300, "y": 1e300}}
    d = decide({"x": 0.5, "y": 0.5}, big)
    assert d.decision == "a" and all(math.isfinite(v) for v in d.expected_costs.values())
    assert decide({"x": 1.0}, {"a": {"x": np.float32(2.5)}, "b": {"x": np.int64(2)}}).decision == "b"


@pytest.mark.parametrize(
    "proba, match",
    [
        ({}, "no label"),
        ({"fraud": -0.1, "ok": 1.1}, ">= 0"),
        ({"fraud": math.nan, "ok": 1.0}, "finite"),
        ({"fraud": 0.2, "ok": 0.7}, "sum to 1"),
        ({"fraud": "0.2", "ok": 0.8}, "must be a number"),
        ([("fraud", 1.0)], "mapping"),
        ({"fraud": 10**400, "ok": 0.5}, "finite"),  # a raw OverflowError
    ],
)
def test_bad_probabilities_name_the_parameter(proba: Any, match: str) -> None:
    with pytest.raises(DecisionError, match=match) as info:
        decide(proba, FRAUD)
    assert info.value.param == "proba"


def test_batch_input_checks() -> None:
    with pytest.raises(DecisionError, match="one column per class"):
        decide_many(np.array([[0.2, 0.8]]), FRAUD, classes=["fraud"])
    with pytest.raises(DecisionError, match="repeat"):
        decide_many(np.array([[0.2, 0.8]]), FRAUD, classes=["ok", "ok"])
    with pytest.raises(DecisionError, match=r"\(row 1\)"):
        decide_many(np.array([[0.2, 0.8], [0.2, 0.2]]), FRAUD, classes=["fraud", "ok"])
    with pytest.raises(DecisionError, match="sequence of mappings"):
        decide_many({"fraud": 1.0}, FRAUD)
    with pytest.raises(DecisionError, match="no label"):
        decide_many(np.zeros((2, 0)), FRAUD, classes=[])
    empty = decide_many(np.zeros((0, 2)), FRAUD, classes=["fraud", "ok"])
    assert len(empty) == 0 and empty.decisions == [] and empty.expected_costs.shape == (0, 2)


def random_costs(rng: random.Random, labels: list[str], n_decisions: int) -> dict[str, dict[str, float]]:
    return {
        f"d{i}": {y: rng.choice([0.0, 1.0, rng.uniform(-50, 500)]) for y in rng.sample(labels, len(labels))}
        for i in range(n_decisions)
    }


@pytest.mark.parametrize("seed", range(5))
def test_a_batch_equals_its_rows_bit_for_bit(seed: int) -> None:
    rng = random.Random(seed)
    labels = ["a", "b", "c", "d"][: rng.randint(2, 4)]
    costs = random_costs(rng, labels, rng.randint(1, 6))
    proba = np.random.default_rng(seed).dirichlet(np.ones(len(labels)), size=200)
    proba[::7] = 1.0 / len(labels)  # ties of the expected costs where decisions cost the same on average
    batch = decide_many(proba, costs, classes=labels)
    rows = [dict(zip(labels, row)) for row in proba.tolist()]
    shuffled = [dict(rng.sample(list(r.items()), len(r))) for r in rows]  # key order varies per row
    as_dicts = decide_many(shuffled, costs)
    matrix = CostMatrix.of(costs)
    for i, row in enumerate(rows):
        one = decide(row, costs)
        assert one == batch[i] == as_dicts[i] == decide(row, matrix)
    assert np.array_equal(batch.expected_costs, as_dicts.expected_costs)
    assert [d.decision for d in batch] == batch.decisions
    # and they are the matrix product, up to rounding
    table = np.array([[costs[d][y] for y in labels] for d in costs])
    assert np.allclose(batch.expected_costs, proba @ table.T, rtol=1e-12, atol=1e-9)
    assert batch.decisions == [batch.options[int(np.argmin(row))] for row in batch.expected_costs]


def test_decision_and_cost_matrix_are_frozen() -> None:
    d = decide({"fraud": 0.2, "ok": 0.8}, FRAUD)
    with pytest.raises(dataclasses.FrozenInstanceError):
        d.decision = "approve"  # type: ignore[misc]
    m = CostMatrix.of(FRAUD)
    with pytest.raises(ValueError):
        m.table[0, 0] = 1.0
    assert CostMatrix.of(m) is m
    assert m.to_dict() == {"approve": {"fraud": 1000.0, "ok": 0.0}, "challenge": {"fraud": 90.0, "ok": 90.0}}
    assert m.decisions == ("approve", "challenge") and m.labels == ("fraud", "ok")
    assert m.covers("ok") and not CostMatrix.of({"a": {"x": 1}, "b": {"y": 1}}).covers("x")


def test_the_model_decides_from_its_probabilities() -> None:
    model = ProbabilityTree(grace_period=10)
    with pytest.raises(DecisionError, match="no label"):  # nothing to decide from before any label
        model.decide_one({"amount": 10.0}, FRAUD)
    with pytest.raises(DecisionError, match="no label"):
        model.decide_many([{"amount": 10.0}], FRAUD)
    rng = random.Random(1)
    for _ in range(300):
        amount = rng.uniform(0, 100)
        model.learn_one({"amount": amount}, "fraud" if rng.random() < amount / 150 else "ok")
    xs = [{"amount": a} for a in (1.0, 50.0, 99.0)]
    many = model.decide_many(xs, FRAUD)
    for i, x in enumerate(xs):
        one = model.decide_one(x, FRAUD)
        assert one == decide(model.predict_proba_one(x), FRAUD)
        assert one.decision == many[i].decision
        assert one.expected_costs == pytest.approx(many[i].expected_costs, rel=1e-12)


def test_classes_must_be_an_ordered_sequence() -> None:
    # a set's order follows the hash seed: which column was which label did too
    from streamtree import DecisionError, decide_many

    costs = {"approve": {"fraud": 100.0, "ok": 0.0}, "challenge": {"fraud": 1.0, "ok": 1.0}}
    for classes in ({"fraud", "ok"}, frozenset({"fraud", "ok"}), "xy", {"fraud": 0, "ok": 1}):
        with pytest.raises(DecisionError, match="'classes' parameter of decide_many must be a sequence"):
            decide_many([[0.99, 0.01]], costs, classes=classes)  # type: ignore[arg-type]
    assert decide_many([[0.99, 0.01]], costs, classes=("fraud", "ok")).decisions == ["challenge"]


def test_a_cost_matrix_built_directly_is_checked_and_copied() -> None:
    # the constructor validated nothing: a decision dropped, a label twice, inf costs, the caller's array made read-only
    from streamtree import CostMatrix, DecisionError

    table = np.array([[1.0, 2.0]])
    for decisions, labels, bad in (
        (("a", "b"), ("x",), table),
        (("a",), ("x", "x"), table),
        (("a",), ("x", "y"), np.array([[1.0, np.inf]])),
        (("a",), ("x", "y"), np.array([[1.0, 1e301]])),
    ):
        with pytest.raises(DecisionError):
            CostMatrix(decisions, labels, bad)
    matrix = CostMatrix(("a",), ("x", "y"), table)
    assert table.flags.writeable and not matrix.table.flags.writeable and matrix.column == {"x": 0, "y": 1}
    assert CostMatrix(["a"], ["x", "y"], [[1.0, np.nan]]).labels == ("x", "y")  # NaN: no cost for that label
