"""The counter-based draws against a pure-Python SplitMix64."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from streamtree.kernels.randomness import mix, uniform, uniforms

MASK = 2**64 - 1


def splitmix(z: int) -> int:
    z = (z + 0x9E3779B97F4A7C15) & MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def reference_mix(seed: int, a: int, b: int, c: int) -> int:
    z = splitmix(seed)
    for key in (a, b, c):
        z = splitmix(z ^ key)
    return z


keys = st.integers(min_value=0, max_value=2**63 - 1)


@given(keys, keys, keys, keys)
def test_mix_is_splitmix64_of_each_key_in_turn(seed: int, a: int, b: int, c: int) -> None:
    assert int(mix(seed, a, b, c)) == reference_mix(seed, a, b, c)
    assert uniform(seed, a, b, c) == (reference_mix(seed, a, b, c) >> 11) / 2**53


def test_splitmix64_known_value() -> None:
    # the first output of Vigna's splitmix64.c seeded with 0
    assert splitmix(0) == 0xE220A8397B1DCDAF


def test_uniforms_are_the_draws_in_a_row_and_look_uniform() -> None:
    u = uniforms(7, 3, 100, 50_000, 1)
    assert u[5] == uniform(7, 3, 105, 1)
    assert 0.0 <= u.min() and u.max() < 1.0
    assert abs(u.mean() - 0.5) < 0.01
    counts, _ = np.histogram(u, bins=10, range=(0, 1))
    assert counts.min() > 4_500 and counts.max() < 5_500
