"""``bench.forest_cost`` on a short stream: every configuration builds, learns and is timed."""

from __future__ import annotations

from bench.forest_cost import CONFIGS, markdown, measure


def test_each_forest_configuration_is_timed_and_the_table_shows_its_share() -> None:
    r = measure("SEA", warm=60, n=40, rounds=1)
    assert set(r) == set(CONFIGS) and all(v > 0 for v in r.values())
    machine = {"cpus": 2, "loadavg_before": (0.0, 0.0, 0.0), "loadavg_after": (0.0, 0.0, 0.0)}
    res = {"date_utc": "now", "commit": "c", "machine": machine, "warm": 60, "n": 40, "streams": {"SEA": r}}
    row = next(line for line in markdown(res).splitlines() if line.startswith("| SEA |"))
    assert "(1.00)" in row.split("|")[2]  # the default against itself
    assert row.count("|") == len(CONFIGS) + 2
