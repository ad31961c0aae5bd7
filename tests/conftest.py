"""Shared test configuration: a derandomised hypothesis profile (CI runs are reproducible), and
a heap frozen for the tests that collect garbage again and again."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci", derandomize=True, deadline=None, max_examples=60, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("ci")


@pytest.fixture
def frozen_heap() -> Iterator[None]:
    """The objects alive now left out of garbage collection for the test (``gc.freeze``).

    river's ``check_bounded_memory_growth`` calls ``gc.collect()`` between its phases: late in
    the suite a full collection walks the whole heap of every earlier test, and the checks of
    one model took 5.7 s instead of 1.1 s. What the test itself makes is still collected.
    """
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
