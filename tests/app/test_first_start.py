"""A first start says that it compiles the kernels, about how long that takes and each step;
a start with the kernels cached says nothing of it."""

from __future__ import annotations

import logging

import pytest

import streamtree
from app.main import compile_progress


def test_a_first_start_says_it_compiles_and_reports_each_step(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="streamtree.app"):
        progress = compile_progress(cached=False)
        assert progress is not None
        streamtree.warm_up(progress)
    lines = [r.getMessage() for r in caplog.records if r.name == "streamtree.app"]
    assert lines[0].startswith("First start with this version: compiling streamtree's kernels into ")
    assert "2 to 3 minutes" in lines[0] and "The port opens when they are ready." in lines[0]
    steps = [line for line in lines if line.startswith("compiling kernels: step ")]
    assert steps[0] == "compiling kernels: step 1 of 9 (tree, smoothing='hgs')" and len(steps) == 9
    assert lines[-1] == "kernels compiled"


def test_a_start_with_cached_kernels_says_nothing_of_compiling() -> None:
    assert compile_progress(cached=True) is None
