"""The compiled sums reproduce numpy's, bit for bit (the kernels' oracles sum with numpy)."""

from __future__ import annotations

import numpy as np

from streamtree.kernels.reductions import np_sum, pairwise


def test_np_sum_is_numpys_pairwise_sum() -> None:
    rng = np.random.default_rng(0)
    for n in list(range(0, 40)) + [127, 128, 129, 136, 200, 255, 256, 257, 1000, 1031, 4099, 20000]:
        a = rng.random(n) * 10.0 ** rng.uniform(-3, 3, n)
        assert np_sum(a, 0, n) == a.sum(), n
        assert np_sum(np.concatenate([[1e9, 2e9], a, [1e9]]), 2, n) == a.sum()  # only those n terms


def test_sums_of_mixed_signs_and_magnitudes() -> None:
    rng = np.random.default_rng(3)
    a = rng.normal(size=1100) * 10.0 ** rng.uniform(-4, 4, size=1100)
    for n in [1, 7, 8, 9, 15, 16, 17, 127, 128, 129, 255, 300, 512, 1100]:
        assert np_sum(a, 0, n) == a[:n].sum(), n
        assert pairwise(a, 0, n) == a[:n].sum(), n  # numpy's identity 0 changes only the sign of a zero
