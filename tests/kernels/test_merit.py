"""The merit, Hoeffding-bound and split-decision kernels against tests.reference.criteria and
hand values (the split search itself: test_split.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from streamtree.kernels import criteria as kc
from tests.kernels.exact import assert_close
from tests.reference import criteria

CRITERIA = ("info_gain", "gini", "hellinger")


# -- criteria -------------------------------------------------------------------------------------


def _random_counts(rng: np.random.Generator, k: int) -> tuple[np.ndarray, np.ndarray]:
    total = rng.integers(0, 30, size=k).astype(float)
    total[rng.random(k) < 0.2] = 0.0
    if rng.random() < 0.5:
        total += rng.random(k) * (total > 0)  # Gaussian estimates are not integers
    share = rng.random(k)
    share[rng.random(k) < 0.2] = 0.0
    share[rng.random(k) < 0.2] = 1.0
    return total * share, total


@pytest.mark.parametrize("criterion", CRITERIA)
@pytest.mark.parametrize("k", [1, 2, 3, 4, 5, 6, 9, 12])
def test_merit_matches_the_criteria(criterion: str, k: int) -> None:
    rng = np.random.default_rng(k)
    code = kc.CRITERION_CODES[criterion]
    for _ in range(200):
        left, total = _random_counts(rng, k)
        expected = float(criteria.CRITERIA[criterion](left, total))
        assert_close(kc.merit(code, np.append(left, 99.0), np.append(total, 99.0), k), expected)


@pytest.mark.parametrize(
    ("criterion", "left", "total", "expected"),
    [
        ("info_gain", [5.0, 0.0], [5.0, 5.0], 1.0),
        ("info_gain", [2.0, 2.0], [4.0, 4.0], 0.0),
        ("info_gain", [0.0, 0.0], [0.0, 0.0], 0.0),
        ("gini", [5.0, 0.0], [5.0, 5.0], 0.5),
        ("gini", [1.0, 0.0, 0.0], [1.0, 1.0, 1.0], 1.0 - 1.0 / 3.0 - 2.0 / 3.0 * 0.5),
        ("hellinger", [5.0, 0.0], [5.0, 5.0], math.sqrt(2.0)),
        ("hellinger", [5.0, 0.0, 0.0], [5.0, 0.0, 5.0], math.sqrt(2.0)),  # absent class 1 ignored
        ("hellinger", [3.0], [6.0], 0.0),  # no pair of classes
    ],
)
def test_merit_hand_values(criterion: str, left: list[float], total: list[float], expected: float) -> None:
    got = kc.merit(kc.CRITERION_CODES[criterion], np.array(left), np.array(total), len(left))
    assert got == pytest.approx(expected, rel=1e-12, abs=1e-15)


def test_criterion_codes_and_ranges() -> None:
    assert kc.CRITERION_CODES == {"info_gain": kc.INFO_GAIN, "gini": kc.GINI, "hellinger": kc.HELLINGER}
    assert (kc.INFO_GAIN, kc.GINI, kc.HELLINGER) == (0, 1, 2)
    for name, code in kc.CRITERION_CODES.items():
        for k in range(1, 12):
            assert kc.criterion_range(code, k) == criteria.RANGES[name](k)
    assert kc.criterion_range(kc.INFO_GAIN, 8) == 3.0


def test_hoeffding_bound() -> None:
    # R^2 ln(1/delta) / (2n) = 1 * ln(1e7) / 400
    assert kc.hoeffding_bound(1.0, 1e-7, 200.0) == pytest.approx(math.sqrt(math.log(1e7) / 400.0), rel=1e-15)
    assert kc.hoeffding_bound(1.0, 1e-7, 200.0) == pytest.approx(0.2007367, abs=1e-7)
    # R = 2 (info gain, 4 classes), ln(1/delta) = 2, n = 4: sqrt(4 * 2 / 8) = 1
    assert kc.hoeffding_bound(2.0, math.exp(-2.0), 4.0) == pytest.approx(1.0, rel=1e-15)
    # R = sqrt 2 (Hellinger), delta = 1/e, n = 1: sqrt(2 * 1 / 2) = 1
    assert kc.hoeffding_bound(math.sqrt(2.0), math.exp(-1.0), 1.0) == pytest.approx(1.0, rel=1e-15)
    rng = np.random.default_rng(0)
    for _ in range(100):
        r, d, n = rng.uniform(0.1, 3), 10.0 ** rng.uniform(-9, -1), float(rng.integers(1, 10**6))
        assert kc.hoeffding_bound(r, d, n) == criteria.hoeffding_bound(r, d, n)


@pytest.mark.parametrize(
    ("merit", "second", "tau", "expected"),
    [
        (0.5, 0.2, 0.05, True),  # 0.3 > eps = 0.20074
        (0.5, 0.4, 0.05, False),  # 0.1 < eps and eps > tau
        (0.5, 0.4, 0.25, True),  # a tie: eps < tau
        (0.3, 0.0, 0.05, True),
        (0.2, 0.0, 0.05, False),  # 0.2 < eps = 0.20074
        (0.0, 0.0, 1.0, False),  # no merit, never
        (-1e-12, -1.0, 1.0, False),
    ],
)
def test_split_decision_hand_values(merit: float, second: float, tau: float, expected: bool) -> None:
    # Gini: R = 1; delta = 1e-7 and n = 200 give eps = sqrt(ln(1e7) / 400) = 0.20074; with R = 1
    # a threshold relative to the range is the absolute one
    for relative in (False, True):
        assert kc.split_decision(merit, second, kc.GINI, 3, 1e-7, tau, 200.0, relative) is expected


def test_a_relative_tie_threshold_breaks_ties_at_one_count_for_every_class_count() -> None:
    # information gain, delta = 0.2: eps = log2(K) sqrt(ln 5 / (2 n)), below 0.2 log2(K) from n = 21
    for k in (2, 3, 5, 10, 50):
        assert not kc.split_decision(0.01, 0.0, kc.INFO_GAIN, k, 0.2, 0.2, 20.0, True)
        assert kc.split_decision(0.01, 0.0, kc.INFO_GAIN, k, 0.2, 0.2, 21.0, True)
    # absolute: 21 examples break a binary tie, a 5-class one waits for 109
    assert kc.split_decision(0.01, 0.0, kc.INFO_GAIN, 2, 0.2, 0.2, 21.0, False)
    assert not kc.split_decision(0.01, 0.0, kc.INFO_GAIN, 5, 0.2, 0.2, 108.0, False)
    assert kc.split_decision(0.01, 0.0, kc.INFO_GAIN, 5, 0.2, 0.2, 109.0, False)


def test_split_decision_is_the_trees_test() -> None:
    rng = np.random.default_rng(1)
    for _ in range(500):
        name = str(rng.choice(CRITERIA))
        k = int(rng.integers(1, 8))
        m, s = rng.uniform(-0.1, 1.0), rng.uniform(0.0, 1.0)
        delta, tau, n = 10.0 ** rng.uniform(-9, -1), rng.uniform(0.0, 0.2), float(rng.integers(1, 5000))
        relative = bool(rng.integers(2))
        range_ = criteria.RANGES[name](k)
        eps = criteria.hoeffding_bound(range_, delta, n)
        expected = m > 0 and (m - s > eps or eps < (tau * range_ if relative else tau))
        assert kc.split_decision(m, s, kc.CRITERION_CODES[name], k, delta, tau, n, relative) is expected
