"""``bench.batch_cost`` and ``bench.forest_cost`` on a short stream: every configuration is
timed, and the table shows each one's share of the default's time."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from bench import batch_cost, forest_cost
from bench.batch_cost import batches

MACHINE = {"cpus": 2, "loadavg_before": (0.0, 0.0, 0.0), "loadavg_after": (0.0, 0.0, 0.0)}


def test_a_stream_is_cut_into_batches_of_the_size_asked() -> None:
    data = batches("SEA", 450, 200)
    assert [len(X) for X, _ in data] == [200, 200, 50] and all(len(X) == len(y) for X, y in data)


@pytest.mark.parametrize(
    ("bench", "run", "fields"),
    [
        (batch_cost, lambda: batch_cost.measure("SEA", n=400, size=200, rounds=1), {"n": 400, "batch": 200}),
        (forest_cost, lambda: forest_cost.measure("SEA", warm=60, n=40, rounds=1), {"warm": 60, "n": 40}),
    ],
    ids=["batch_cost", "forest_cost"],
)
def test_each_configuration_is_timed_and_the_table_shows_its_share(
    bench: Any, run: Callable[[], dict[str, float]], fields: dict[str, int]
) -> None:
    r = run()
    assert set(r) == set(bench.CONFIGS) and all(v > 0 for v in r.values())
    res = {"date_utc": "now", "commit": "c", "machine": MACHINE, "streams": {"SEA": r}} | fields
    row = next(line for line in bench.markdown(res).splitlines() if line.startswith("| SEA |"))
    assert "(1.00)" in row.split("|")[2]  # the default against itself
    assert row.count("|") == len(bench.CONFIGS) + 2
