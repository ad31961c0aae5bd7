"""Prequential metrics against hand-computed values."""

from __future__ import annotations

import math

import pytest

from app.prequential import EPS, Prequential, score


def test_score_by_hand() -> None:
    ll, brier, correct, conf = score({"a": 0.7, "b": 0.2, "c": 0.1}, "b")
    assert ll == pytest.approx(-math.log(0.2))
    assert brier == pytest.approx(0.7**2 + 0.8**2 + 0.1**2)
    assert correct is False and conf == 0.7


def test_score_of_unseen_label_uses_the_floor() -> None:
    ll, brier, correct, _ = score({"a": 0.6, "b": 0.4}, "z")
    assert ll == pytest.approx(-math.log(EPS))
    assert brier == pytest.approx(0.36 + 0.16 + 1.0)
    assert correct is False


def test_aggregates_window_and_ece() -> None:
    p = Prequential(window=2, bins=2)
    p.update({}, "a")  # before any label: not scored
    p.update({"a": 0.9, "b": 0.1}, "a")  # bin 1, correct
    p.update({"a": 0.3, "b": 0.7}, "a")  # bin 1, wrong
    p.update({"a": 0.6, "b": 0.4}, "a")  # bin 1, correct
    r = p.report()
    assert r["unscored"] == 1
    a = r["all"]
    assert a["n"] == 3
    assert a["log_loss"] == pytest.approx((-math.log(0.9) - math.log(0.3) - math.log(0.6)) / 3)
    assert a["accuracy"] == pytest.approx(2 / 3)
    # all three in bin [0.5, 1): mean confidence (0.9+0.7+0.6)/3, accuracy 2/3
    assert a["ece"] == pytest.approx(abs(2 / 3 - 2.2 / 3))
    assert [b["count"] for b in a["reliability"]] == [0, 3]
    assert a["reliability"][0]["accuracy"] is None
    rec = r["recent"]
    assert rec["n"] == 2 and rec["window"] == 2
    assert rec["accuracy"] == pytest.approx(0.5)


def test_state_round_trip_continues_identically() -> None:
    a = Prequential(window=3, bins=4)
    for i in range(10):
        a.update({"x": 0.1 * (i % 9) + 0.05, "y": 0.95 - 0.1 * (i % 9)}, "x" if i % 3 else "y")
    b = Prequential.from_state(a.state())
    for p in (a, b):
        p.update({"x": 0.25, "y": 0.75}, "y")
    assert a.report() == b.report()
    assert a.state() == b.state()
