"""Split criteria against direct definitions, and the Hoeffding bound by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from tests.reference.criteria import gini, hellinger, hoeffding_bound, info_gain


def entropy(c: np.ndarray) -> np.ndarray:
    t = c.sum(-1, keepdims=True)
    p = np.divide(c, t, out=np.zeros_like(c), where=t > 0)
    return -(p * np.log2(np.where(p > 0, p, 1.0))).sum(-1)


counts = arrays(np.float64, (3, 4), elements=st.integers(0, 40).map(float))


@given(counts, st.floats(0.0, 1.0))
def test_info_gain_is_the_entropy_decrease(total: np.ndarray, fraction: float) -> None:
    left = np.floor(total * fraction)
    n, n_left = total.sum(-1), left.sum(-1)
    expected = (
        entropy(total)
        - np.divide(n_left, n, out=np.zeros_like(n), where=n > 0) * entropy(left)
        - np.divide(n - n_left, n, out=np.zeros_like(n), where=n > 0) * entropy(total - left)
    )
    np.testing.assert_allclose(info_gain(left, total), expected, atol=1e-12)
    assert np.all(info_gain(left, total) >= -1e-12)


@given(counts, st.floats(0.0, 1.0))
def test_gini_and_hellinger_are_bounded_and_zero_for_proportional_splits(total: np.ndarray, fraction: float) -> None:
    left = total * fraction  # every class split in the same proportion: no information
    np.testing.assert_allclose(gini(left, total), 0.0, atol=1e-12)
    np.testing.assert_allclose(hellinger(left, total), 0.0, atol=1e-7)
    pure = np.where(np.arange(4) < 2, total, 0.0)
    assert np.all(hellinger(pure, total) <= math.sqrt(2) + 1e-12)


def test_perfect_binary_split_values() -> None:
    left, total = np.array([5.0, 0.0]), np.array([5.0, 5.0])
    assert info_gain(left, total) == pytest.approx(1.0)
    assert gini(left, total) == pytest.approx(0.5)
    assert hellinger(left, total) == pytest.approx(math.sqrt(2))


def test_hoeffding_bound_by_hand() -> None:
    assert hoeffding_bound(1.0, 1e-7, 200) == pytest.approx(math.sqrt(math.log(1e7) / 400))
    assert hoeffding_bound(2.0, 0.05, 50) > hoeffding_bound(2.0, 0.05, 500)
