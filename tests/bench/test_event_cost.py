"""``bench.event_cost`` on a short stream: every part measured, and the split adds up."""

from __future__ import annotations

import pytest

from bench.event_cost import PARTS, markdown, measure


def test_the_parts_of_an_event_add_up() -> None:
    r = measure("SEA", warm=300, n=200, rounds=1)
    assert set(PARTS) <= set(r) and all(r[p] > 0 for p in ("total", "predict", "encode", "predict_kernel"))
    assert r["learn"] == pytest.approx(r["total"] - r["predict"])
    assert r["python"] == pytest.approx(r["total"] - r["predict_kernel"] - r["learn_kernel"])
    assert 0 < r["rows_through_kernels"] <= 200
    machine = {"cpus": 2, "loadavg_before": (0.0, 0.0, 0.0), "loadavg_after": (0.0, 0.0, 0.0)}
    res = {"date_utc": "now", "commit": "c", "machine": machine, "warm": 300, "n": 200, "streams": {"SEA": r}}
    assert "| SEA |" in markdown(res)
