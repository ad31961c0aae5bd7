"""Shared test configuration: the kernels compiled once before any test runs, a derandomised
hypothesis profile (CI runs are reproducible), and a heap frozen for the tests that collect
garbage again and again."""

from __future__ import annotations

import gc
import subprocess
import sys
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings


def pytest_sessionstart(session: pytest.Session) -> None:
    """Compile every kernel into the on-disk cache (``streamtree.warm_up`` in a subprocess)
    before the workers start, in the controller only.

    On a fresh machine (or after a kernel changed) the cache is empty. Without this, each
    worker and every server a test starts compiled the same kernels at once, on two cores: a
    server's first start took over three minutes and outlived its test's wait for ``/health``.
    Compiled once here, they load from disk in about two seconds; with the cache warm this
    costs those two seconds.
    """
    if hasattr(session.config, "workerinput"):  # an xdist worker: the controller did it
        return
    code = "import streamtree, sys; c = streamtree.kernels_cached(); streamtree.warm_up(); sys.exit(0 if c else 3)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if result.returncode not in (0, 3):
        raise pytest.UsageError(f"compiling the kernels failed:\n{result.stderr}")
    if result.returncode == 3:
        print("\ncompiled the kernels into the on-disk cache (a fresh cache: minutes, once)")


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
