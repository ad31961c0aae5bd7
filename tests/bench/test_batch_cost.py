"""``bench.batch_cost`` on a short stream: every configuration timed, and its share read off the default."""

from __future__ import annotations

from bench.batch_cost import CONFIGS, batches, markdown, measure


def test_each_configuration_is_timed_and_the_table_shows_its_share() -> None:
    data = batches("SEA", 450, 200)
    assert [len(X) for X, _ in data] == [200, 200, 50] and all(len(X) == len(y) for X, y in data)
    r = measure("SEA", n=400, size=200, rounds=1)
    assert set(r) == set(CONFIGS) and all(v > 0 for v in r.values())
    machine = {"cpus": 2, "loadavg_before": (0.0, 0.0, 0.0), "loadavg_after": (0.0, 0.0, 0.0)}
    res = {"date_utc": "now", "commit": "c", "machine": machine, "n": 400, "batch": 200, "streams": {"SEA": r}}
    row = next(line for line in markdown(res).splitlines() if line.startswith("| SEA |"))
    assert "(1.00)" in row.split("|")[2]  # the default against itself
    assert row.count("|") == len(CONFIGS) + 2
