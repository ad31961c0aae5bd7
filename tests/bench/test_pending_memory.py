"""The pending-id memory benchmark: what an id is charged is at least what it holds."""

from __future__ import annotations

import pytest

from bench.pending_memory import MIXES, measure


@pytest.mark.parametrize("mix", list(MIXES))
def test_the_charge_covers_the_memory_and_ten_thousand_ids_fit_in_20_mib(mix: str) -> None:
    row = measure(1_000, *MIXES[mix])
    assert row["charged_over_measured"] >= 1.0
    assert row["measured_per_id"] * 10_000 < 20 * 1024 * 1024
