"""The improved squared error (streamtree.metrics): Eq. 3 of Fan et al. (2005) by hand, and its
multi-class threshold against a brute-force search along the line it is defined on."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from streamtree import DecisionError, decide
from streamtree.metrics import decision_threshold, decision_thresholds, improved_squared_error, improved_squared_errors

FRAUD = {"approve": {"fraud": 1000, "ok": 0}, "challenge": {"fraud": 90, "ok": 90}}


def zero_one(labels: list[str]) -> dict[str, dict[str, float]]:
    return {d: {y: 0.0 if y == d else 1.0 for y in labels} for d in labels}


def eq3(p_true: float, v: float) -> float:
    """Eq. 3 as printed: (1 - [[p / v]])^2 with [[a]] = min(1, a)."""
    return (1.0 - min(1.0, p_true / v)) ** 2


@pytest.mark.parametrize("p_fraud", [0.0, 0.01, 0.05, 0.0899, 0.0901, 0.3, 0.5, 0.9, 1.0])
def test_the_fraud_thresholds_are_the_papers(p_fraud: float) -> None:
    proba = {"fraud": p_fraud, "ok": 1 - p_fraud}
    # Section 3: challenge a fraud from p(fraud) > 90/1000; so ok needs p(ok) >= 1 - 0.09
    assert decision_threshold(proba, "fraud", FRAUD) == pytest.approx(0.09, abs=1e-15)
    assert decision_threshold(proba, "ok", FRAUD) == pytest.approx(0.91, abs=1e-15)
    assert improved_squared_error(proba, "fraud", FRAUD) == pytest.approx(eq3(p_fraud, 0.09), abs=1e-15)
    assert improved_squared_error(proba, "ok", FRAUD) == pytest.approx(eq3(1 - p_fraud, 0.91), abs=1e-15)


def test_the_papers_example_after_eq3() -> None:
    """Two models miss a positive under 0-1 loss; 0.4 is closer to deciding right than 0.1."""
    costs = zero_one(["+", "-"])
    assert improved_squared_error({"+": 0.4, "-": 0.6}, "+", costs) == pytest.approx((1 - 0.4 / 0.5) ** 2)
    assert improved_squared_error({"+": 0.1, "-": 0.9}, "+", costs) == pytest.approx((1 - 0.1 / 0.5) ** 2)
    # a right decision is 0 whatever the probability (squared error against the label would not be)
    assert improved_squared_error({"+": 0.6, "-": 0.4}, "+", costs) == 0.0
    assert improved_squared_error({"+": 1.0, "-": 0.0}, "+", costs) == 0.0


def test_a_tie_counts_as_the_right_decision() -> None:
    costs = zero_one(["+", "-"])
    for y in ("+", "-"):  # decide breaks the tie towards "+", yet both labels are at their threshold
        assert improved_squared_error({"+": 0.5, "-": 0.5}, y, costs) == 0.0


def test_binary_thresholds_are_the_closed_form_for_any_costs() -> None:
    """Two labels t, o: v(t) = b / (a + b) with a = C(e,t) - C(d,t), b = C(d,o) - C(e,o)."""
    rng = random.Random(7)
    for _ in range(300):
        c = {d: {y: rng.choice([0.0, 1.0, rng.uniform(-100, 100)]) for y in "to"} for d in ("d1", "d2")}
        p = rng.random()
        proba = {"t": p, "o": 1 - p}
        star = min(c, key=lambda d: c[d]["t"])
        other = "d2" if star == "d1" else "d1"
        if c[star]["t"] == c[other]["t"]:  # both right for t
            expected = 0.0
        else:
            a = c[other]["t"] - c[star]["t"]
            b = c[star]["o"] - c[other]["o"]
            expected = b / (a + b) if b > 0 else 0.0
        assert decision_threshold(proba, "t", c) == pytest.approx(expected, abs=1e-12)
        right = p >= expected
        ise = improved_squared_error(proba, "t", c)
        assert ise == (0.0 if right else pytest.approx(eq3(p, expected), abs=1e-12))


def test_multiclass_zero_one_by_hand() -> None:
    """0-1 loss: v(t) = m / (1 + m - p_t), m the largest other probability."""
    costs = zero_one(["t", "b", "c"])
    proba = {"t": 0.2, "b": 0.5, "c": 0.3}
    assert decision_threshold(proba, "t", costs) == pytest.approx(0.5 / 1.3)
    assert improved_squared_error(proba, "t", costs) == pytest.approx((1 - 0.2 / (0.5 / 1.3)) ** 2)
    assert improved_squared_error(proba, "t", costs) == pytest.approx(0.2304)
    assert improved_squared_error(proba, "b", costs) == 0.0


def brute_threshold(proba: dict[str, float], t: str, costs: dict[str, dict[str, float]], steps: int = 20_000) -> float:
    """The least p(t) on the line from the prediction to certainty of t (the other labels keeping
    their proportions) at which a decision of least cost for t has least expected cost."""
    others = {y: p for y, p in proba.items() if y != t}
    total = sum(others.values())
    rest = {y: p / total for y, p in others.items()} if total > 0 else {y: 1 / len(others) for y in others}
    labels = [t, *rest]
    table = np.array([[costs[d][y] for y in labels] for d in costs])
    right = table[:, 0] == table[:, 0].min()
    s = np.linspace(0.0, 1.0, steps + 1)[:, None]
    q = np.hstack([s, (1 - s) * np.array([list(rest.values())])])  # every point of the line, as a row
    expected = q @ table.T
    made = expected[:, right].min(axis=1) <= expected.min(axis=1) + 1e-12
    assert made[-1], "a right decision is made at certainty"
    return float(s[np.argmax(made), 0])


@pytest.mark.parametrize("seed", range(8))
def test_multiclass_threshold_equals_a_brute_force_search(seed: int) -> None:
    rng = random.Random(seed)
    labels = ["x", "y", "z", "w"][: rng.randint(3, 4)]
    costs = {f"d{i}": {y: round(rng.uniform(0, 10), 1) for y in labels} for i in range(rng.randint(2, 5))}
    for _ in range(20):
        raw = [rng.random() for _ in labels]
        proba = {y: r / sum(raw) for y, r in zip(labels, raw, strict=True)}
        t = rng.choice(labels)
        v = decision_threshold(proba, t, costs)
        assert v == pytest.approx(brute_threshold(proba, t, costs), abs=1e-4)
        right = decide(proba, {d: c for d, c in costs.items()}).decision in {
            d for d in costs if costs[d][t] == min(c[t] for c in costs.values())
        }
        ise = improved_squared_error(proba, t, costs)
        if right:
            assert ise == 0.0
        else:
            assert ise == pytest.approx(eq3(proba[t], v), abs=1e-12) and 0.0 < ise <= 1.0


def test_a_true_label_without_probability_scores_one() -> None:
    assert improved_squared_error({"ok": 1.0}, "fraud", FRAUD) == 1.0
    assert improved_squared_error({"fraud": 1.0}, "ok", FRAUD) == 1.0
    # a right decision whatever p(t) (v = 0): nothing to score
    costs = {"a": {"x": 0, "y": 0}, "b": {"x": 1, "y": 1}}
    assert decision_threshold({"y": 1.0}, "x", costs) == 0.0
    assert improved_squared_error({"y": 1.0}, "x", costs) == 0.0


def test_a_true_label_without_cost_is_an_error_naming_it() -> None:
    with pytest.raises(DecisionError, match="'maybe'") as info:
        improved_squared_error({"fraud": 0.5, "ok": 0.5}, "maybe", FRAUD)
    assert info.value.label == "maybe" and info.value.param == "costs"
    with pytest.raises(DecisionError, match="one true label per row"):
        improved_squared_errors(np.array([[0.5, 0.5]]), ["ok", "ok"], FRAUD, classes=["fraud", "ok"])


@pytest.mark.parametrize("seed", range(4))
def test_a_batch_equals_its_rows_bit_for_bit(seed: int) -> None:
    rng = np.random.default_rng(seed)
    labels = ["a", "b", "c"]
    costs = {
        "d0": {"a": 0, "b": 5, "c": 9},
        "d1": {"a": 3, "b": 0, "c": 2},
        "d2": {"a": 4, "b": 4, "c": 0},
        "d3": {"a": 1, "b": 1, "c": 1},
    }
    proba = rng.dirichlet(np.ones(3), size=300)
    proba[::11] = [1.0, 0.0, 0.0]
    y = [labels[i] for i in rng.integers(0, 3, size=300)]
    batch = improved_squared_errors(proba, y, costs, classes=labels)
    rows = [improved_squared_error(dict(zip(labels, row)), t, costs) for row, t in zip(proba.tolist(), y)]
    assert batch.tolist() == rows
    assert improved_squared_errors([dict(zip(labels, row)) for row in proba.tolist()], y, costs).tolist() == rows
    assert ((batch >= 0) & (batch <= 1)).all()
    v, p_true, right = decision_thresholds(proba, y, costs, classes=labels)
    assert ((v >= 0) & (v <= 1)).all() and (batch[right] == 0).all() and (p_true[~right] < v[~right]).all()


def test_mean_is_the_papers_improved_mse() -> None:
    proba = np.array([[0.05, 0.95], [0.2, 0.8], [0.5, 0.5], [1.0, 0.0]])
    y = ["fraud", "fraud", "ok", "ok"]
    errors = improved_squared_errors(proba, y, FRAUD, classes=["fraud", "ok"])
    assert errors == pytest.approx([(1 - 0.05 / 0.09) ** 2, 0.0, (1 - 0.5 / 0.91) ** 2, 1.0])
    assert math.isclose(errors.mean(), ((4 / 9) ** 2 + (41 / 91) ** 2 + 1) / 4)
