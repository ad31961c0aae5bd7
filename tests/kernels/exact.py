"""When a compiled kernel can be held to its numpy oracle bit for bit.

The kernels call the C library's ``exp``, ``log`` and ``log2`` one value at a time; an oracle
written with numpy goes through numpy's own loops, which in some builds are SIMD versions that
may round differently in the last bit (numpy 2.4's ``log2`` does, on this machine's CPUs). So
the oracle tests demand identical bits where numpy agrees with the C library on these
functions (checked here, not assumed) and 1e-12 relative otherwise.
"""

from __future__ import annotations

import math

import numpy as np


def _numpy_matches_libm() -> bool:
    rng = np.random.default_rng(0)
    x = rng.normal(size=4096) * 20
    y = np.abs(x) + 1e-9
    return bool(
        (np.exp(x) == np.array([math.exp(v) for v in x])).all()
        and (np.log(y) == np.array([math.log(v) for v in y])).all()
        and (np.log2(y) == np.array([math.log2(v) for v in y])).all()
    )


BIT_EXACT = _numpy_matches_libm()


def assert_close(got: np.ndarray | float, expected: np.ndarray | float, exact: bool = BIT_EXACT) -> None:
    """Within 1e-12 (NaN where NaN); identical bits when ``exact``."""
    got, expected = np.asarray(got, dtype=np.float64), np.asarray(expected, dtype=np.float64)
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12, equal_nan=True)
    if exact:
        np.testing.assert_array_equal(got, expected)
