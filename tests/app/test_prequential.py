"""Prequential metrics against hand-computed values."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import orjson
import pytest

from app.history import History
from app.prequential import FEW, CostScores, Prequential
from app.scoring import EPS, one_row, score, score_row, scores
from tests.app.test_history import ReferenceHistory, arrival_times, cuts_of


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


class Reference:
    """The obvious per-event implementation, one prediction mapping at a time."""

    def __init__(self, window: int, bins: int) -> None:
        self.bins, self.n, self.unscored, self.ll, self.br, self.nc = bins, 0, 0, 0.0, 0.0, 0
        self.count, self.conf, self.correct = [0] * bins, [0.0] * bins, [0] * bins
        self.recent: list[tuple[float, float, bool, float]] = []
        self.window = window

    def update(self, proba: dict[str, float], label: str) -> None:
        if not proba:
            self.unscored += 1
            return
        p_true = proba.get(label, 0.0)
        ll = -math.log(max(p_true, EPS))
        br = sum((p - (1.0 if c == label else 0.0)) ** 2 for c, p in proba.items()) + (label not in proba)
        top = max(proba, key=proba.__getitem__)
        conf, correct = proba[top], top == label
        b = min(int(conf * self.bins), self.bins - 1)
        self.n += 1
        self.ll += ll
        self.br += br
        self.nc += correct
        self.count[b] += 1
        self.conf[b] += conf
        self.correct[b] += correct
        self.recent = (self.recent + [(ll, br, correct, conf)])[-self.window :]


def stream(n: int, seed: int = 0) -> tuple[list[dict[str, float]], list[str]]:
    """Predictions over classes that appear one by one (ties included), and their labels."""
    rng = np.random.default_rng(seed)
    names = ["a", "b", "c", "d", "e"]
    probas, labels, seen = [], [], 0
    for i in range(n):
        row = rng.dirichlet(np.ones(seen)) if seen else np.zeros(0)
        if seen > 1 and i % 17 == 0:
            row = np.full(seen, 1.0 / seen)  # a tie: the first class wins
        probas.append({names[k]: float(row[k]) for k in range(seen)})
        label = names[int(rng.integers(0, min(seen + 1, 5)))]
        seen = max(seen, names.index(label) + 1)
        labels.append(label)
    return probas, labels


def as_batch(probas: list[dict[str, float]], labels: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    classes = sorted({c for p in probas for c in p} | set(labels))  # a..e: the order of first appearance
    rows = np.array([[p.get(c, 0.0) for c in classes] for p in probas])
    return rows, np.array([len(p) for p in probas]), np.array([classes.index(y) for y in labels])


def test_batches_score_as_the_obvious_per_event_loop() -> None:
    probas, labels = stream(700)
    ref = Reference(window=50, bins=7)
    for p, y in zip(probas, labels, strict=True):
        ref.update(p, y)
    got = Prequential(window=50, bins=7)
    got.update_many(*as_batch(probas, labels))
    s = got.state()
    assert (s["n"], s["unscored"], s["n_correct"], s["bin_count"], s["bin_correct"]) == (
        ref.n,
        ref.unscored,
        ref.nc,
        ref.count,
        ref.correct,
    )
    assert s["sum_log_loss"] == ref.ll  # math.log and left-to-right sums, as the loop does
    assert s["sum_brier"] == pytest.approx(ref.br, rel=1e-14)
    assert s["bin_conf"] == ref.conf
    assert [r[0] for r in s["recent"]] == [r[0] for r in ref.recent]
    assert [(r[2], r[3]) for r in s["recent"]] == [(r[2], r[3]) for r in ref.recent]


@pytest.mark.parametrize("cuts", [[1], [3, 700], [100, 101, 350, 699], list(range(1, 700, 13))])
def test_batch_boundaries_change_nothing(cuts: list[int]) -> None:
    """Replaying a log in pages gives the live requests' numbers, bit for bit."""
    probas, labels = stream(700, seed=1)
    rows, known, label = as_batch(probas, labels)
    whole = Prequential(window=40, bins=10)
    whole.update_many(rows, known, label)
    pieces = Prequential(window=40, bins=10)
    for a, b in zip([0, *cuts], [*cuts, 700], strict=True):
        pieces.update_many(rows[a:b], known[a:b], label[a:b])
    assert pieces.state() == whole.state()
    assert pieces.report() == whole.report()


def test_one_event_at_a_time_is_a_batch_of_one() -> None:
    probas, labels = stream(200, seed=2)
    one = Prequential(window=30, bins=5)
    for p, y in zip(probas, labels, strict=True):
        one.update(p, y)
    many = Prequential(window=30, bins=5)
    many.update_many(*as_batch(probas, labels))
    assert one.state() == many.state()


FRAUD = {"approve": {"fraud": 1000, "ok": 0}, "challenge": {"fraud": 90, "ok": 90}}


def test_cost_metrics_by_hand() -> None:
    """Improved squared error (Fan et al. Eq. 3) and the cost of the least-expected-cost decision."""
    p = Prequential(window=3, bins=2, costs=FRAUD)
    p.update({}, "fraud")  # before any label: not scored
    p.update({"fraud": 1.0}, "ok")  # challenge, cost 90; p(ok) = 0 < 0.91: error 1
    p.update({"fraud": 0.05, "ok": 0.95}, "fraud")  # approve, cost 1000; error (1 - 0.05/0.09)^2
    p.update({"fraud": 0.5, "ok": 0.5}, "ok")  # challenge, cost 90; error (1 - 0.5/0.91)^2
    p.update({"fraud": 0.5, "ok": 0.3, "new": 0.2}, "ok")  # a label without costs: scored, not costed
    r = p.report()
    errors = [1.0, (1 - 0.05 / 0.09) ** 2, (1 - 0.5 / 0.91) ** 2]
    assert r["all"]["n"] == 4 and r["all"]["costed"] == 3
    assert r["all"]["improved_squared_error"] == pytest.approx(sum(errors) / 3, rel=1e-14)
    assert r["all"]["decision_cost"] == pytest.approx((90 + 1000 + 90) / 3)
    rec = r["recent"]  # the last 3 scored events, 2 of them costed
    assert (rec["n"], rec["costed"]) == (3, 2)
    assert rec["improved_squared_error"] == pytest.approx(sum(errors[1:]) / 2, rel=1e-14)
    assert rec["decision_cost"] == pytest.approx((1000 + 90) / 2)
    assert "improved_squared_error" not in Prequential().report()["all"]  # no costs, no cost metrics


def test_cost_metrics_before_any_costed_event_are_null() -> None:
    p = Prequential(window=3, bins=2, costs=FRAUD)
    p.update({"other": 1.0}, "other")
    assert {k: p.report()["all"][k] for k in ("costed", "improved_squared_error", "decision_cost")} == {
        "costed": 0,
        "improved_squared_error": None,
        "decision_cost": None,
    }


def test_cost_state_round_trip_and_snapshots_without_costs() -> None:
    a = Prequential(window=3, bins=4, costs=FRAUD)
    for i in range(10):
        f = 0.1 * (i % 9) + 0.05
        a.update({"fraud": f, "ok": 1 - f} | ({"new": 0.0} if i == 4 else {}), "fraud" if i % 3 else "ok")
    state = json.loads(json.dumps(a.state()))  # as stored: JSON, NaN as null
    b = Prequential.from_state(state)
    for p in (a, b):
        p.update({"fraud": 0.25, "ok": 0.75}, "fraud")
    assert a.report() == b.report() and a.state() == b.state()
    old = Prequential(window=3, bins=4).state()  # a snapshot from before the cost metrics
    assert "costs" not in old and Prequential.from_state(old).costs is None


COSTS_A_TO_D = {
    "cheap": {"a": 0, "b": 1, "c": 4, "d": 9},
    "mid": {"a": 2, "b": 2, "c": 2, "d": 2},
    "safe": {"a": 5, "b": 3, "c": 1, "d": -1},
}  # "e" arrives later: from then on nothing is costed


@pytest.mark.parametrize("cuts", [[1], [100, 101, 350, 699], list(range(1, 700, 13))])
def test_cost_metrics_do_not_depend_on_batch_boundaries(cuts: list[int]) -> None:
    probas, labels = stream(700, seed=3)
    classes = ["a", "b", "c", "d", "e"]
    rows, known, label = as_batch(probas, labels)
    whole = Prequential(window=40, bins=10, costs=COSTS_A_TO_D)
    whole.update_many(rows, known, label, classes=classes)
    pieces = Prequential(window=40, bins=10, costs=COSTS_A_TO_D)
    for a, b in zip([0, *cuts], [*cuts, 700], strict=True):
        pieces.update_many(rows[a:b], known[a:b], label[a:b], classes=classes)
    one = Prequential(window=40, bins=10, costs=COSTS_A_TO_D)
    for p, y in zip(probas, labels, strict=True):
        one.update(p, y)
    assert pieces.state() == whole.state() == one.state()
    costed = whole.report()["all"]["costed"]
    assert 0 < costed < whole.report()["all"]["n"]


# -- the batch implementation against a plain per-event one ---------------------------------


class FullReference:
    """Everything :class:`Prequential` keeps, one event at a time in plain Python: the window a
    list of score tuples, every sum a loop from 0.0, the history :class:`ReferenceHistory`."""

    def __init__(self, window: int, bins: int, history: ReferenceHistory, costs: Any = None) -> None:
        self.window, self.bins, self.history = window, bins, history
        self.n = self.unscored = self.n_correct = self.costed = 0
        self.sum_log_loss = self.sum_brier = self.sum_ise = self.sum_cost = 0.0
        self.bin_count, self.bin_conf, self.bin_correct = [0] * bins, [0.0] * bins, [0] * bins
        self.recent: list[tuple[float, float, bool, float]] = []
        self.recent_costs: list[tuple[float, float]] = []
        self.costs = CostScores(costs, window) if costs is not None else None  # its row scorer only
        self.format = Prequential(bins=bins)._summary  # the summary's format (not its numbers)

    def update(self, proba: dict[str, float], label: str, t: float | None) -> None:
        if proba:
            self.score(proba, label)
        else:
            self.unscored += 1
        self.history.observe(t, self.recent_summary)

    def score(self, proba: dict[str, float], label: str) -> None:
        log_loss = -math.log(max(proba.get(label, 0.0), EPS))
        brier = 0.0
        for c, p in proba.items():
            d = p - (c == label)
            brier += d * d
        brier += label not in proba
        top = max(proba, key=proba.__getitem__)  # the first on ties
        conf, correct = proba[top], top == label
        b = min(int(conf * self.bins), self.bins - 1)
        self.n += 1
        self.sum_log_loss += log_loss
        self.sum_brier += brier
        self.n_correct += correct
        self.bin_count[b] += 1
        self.bin_conf[b] += conf
        self.bin_correct[b] += correct
        self.recent = (self.recent + [(log_loss, brier, correct, conf)])[-self.window :] if self.window else []
        if self.costs is not None:
            row, known, column, classes = one_row(proba, label)
            ise, cost = (float(v[0]) for v in self.costs.scores(row, known, column, classes))
            if not math.isnan(ise):
                self.costed += 1
                self.sum_ise += ise
                self.sum_cost += cost
            self.recent_costs = (self.recent_costs + [(ise, cost)])[-self.window :] if self.window else []

    def recent_summary(self) -> dict[str, Any]:
        log_loss = brier = 0.0
        counts, confs, corrects = [0] * self.bins, [0.0] * self.bins, [0] * self.bins
        for ll, br, correct, conf in self.recent:
            b = min(int(conf * self.bins), self.bins - 1)
            log_loss += ll
            brier += br
            counts[b] += 1
            confs[b] += conf
            corrects[b] += correct
        summary = self.format(len(self.recent), log_loss, brier, sum(corrects), counts, confs, corrects)
        if self.costs is None:
            return summary
        ise = cost = 0.0
        costed = [(i, c) for i, c in self.recent_costs if not math.isnan(i)]
        for i, c in costed:
            ise += i
            cost += c
        return summary | self.cost_summary(len(costed), ise, cost)

    @staticmethod
    def cost_summary(n: int, ise: float, cost: float) -> dict[str, Any]:
        return {"costed": n, "improved_squared_error": ise / n if n else None, "decision_cost": cost / n if n else None}

    def report(self) -> dict[str, Any]:
        every = self.format(
            self.n, self.sum_log_loss, self.sum_brier, self.n_correct, self.bin_count, self.bin_conf, self.bin_correct
        )
        if self.costs is not None:
            every |= self.cost_summary(self.costed, self.sum_ise, self.sum_cost)
        return {"unscored": self.unscored, "all": every, "recent": self.recent_summary() | {"window": self.window}}

    def state(self) -> dict[str, Any]:
        state = {
            "window": self.window,
            "bins": self.bins,
            "n": self.n,
            "unscored": self.unscored,
            "sum_log_loss": self.sum_log_loss,
            "sum_brier": self.sum_brier,
            "n_correct": self.n_correct,
            "bin_count": self.bin_count,
            "bin_conf": self.bin_conf,
            "bin_correct": self.bin_correct,
            "recent": [list(r) for r in self.recent],
            "history": self.history.state(),
        }
        if self.costs is None:
            return state
        recent = [[None if math.isnan(i) else i, None if math.isnan(c) else c] for i, c in self.recent_costs]
        return state | {
            "costs": {
                "costs": self.costs.costs.to_dict(),
                "n": self.costed,
                "sum_ise": self.sum_ise,
                "sum_cost": self.sum_cost,
                "recent": recent,
            }
        }


def bits(data: Any) -> bytes:
    """JSON with every float to the bit (``-0.0`` apart from ``0.0``; ``==`` would not tell)."""
    return orjson.dumps(data)


@pytest.mark.parametrize(
    ("window", "bins", "every", "seconds", "costs"),
    [
        (40, 7, 25, 3.0, None),  # the window wraps many times, inside batches too
        (300, 10, 100, 30.0, COSTS_A_TO_D),  # longer than most batches; cost metrics, "e" not costed
        (1, 3, 1, 30.0, None),  # a window of one, a point at every event
        (5000, 4, 64, 1.5, None),  # never full
    ],
)
@pytest.mark.parametrize("seed", [4, 5])
def test_any_batching_gives_the_per_event_reference_to_the_bit(
    window: int, bins: int, every: int, seconds: float, costs: Any, seed: int
) -> None:
    """Every number, the window and the history points as the plain loop gives them, whether
    events come one by one (:meth:`Prequential.update`) or in batches of any size, with classes
    appearing inside batches, unscored events in the middle and points taken by time."""
    n = 700
    probas, labels = stream(n, seed=seed)
    for i in range(50, n, 97):
        probas[i] = {}  # unscored, as before the first label
    times = arrival_times(n, seed)
    classes = ["a", "b", "c", "d", "e"]
    ref = FullReference(window, bins, ReferenceHistory(every, seconds, 50), costs)
    for p, y, t in zip(probas, labels, times, strict=True):
        ref.update(p, y, t)
    assert ref.unscored > 1 and ref.n > 600 and ref.history.points
    assert every == 1 or any(seq % every for seq in ref.history.taken)  # some points by time
    rows, known, label = as_batch(probas, labels)
    assert classes == sorted(set(labels)) and len(np.flatnonzero(np.diff(known) > 0)) >= 4
    for cuts in ([n], cuts_of(n, seed), [25, 400, 401, n], None):
        got = Prequential(window, bins, History(every, seconds, 50), costs=costs)
        if cuts is None:
            for p, y, t in zip(probas, labels, times, strict=True):
                got.update(p, y, t)
        else:
            for a, b in zip([0, *cuts], cuts, strict=False):
                got.update_many(rows[a:b], known[a:b], label[a:b], times[a:b], classes=classes)
        assert bits(got.state()) == bits(ref.state())
        assert bits(got.report()) == bits(ref.report())
        assert bits(got.history.report()) == bits(Prequential.from_state(ref.state()).history.report())
        restored = Prequential.from_state(json.loads(json.dumps(got.state())))  # as a snapshot stores it
        assert bits(restored.state()) == bits(ref.state()) and bits(restored.report()) == bits(ref.report())


def test_a_few_rows_are_scored_as_a_batch_scores_them() -> None:
    """The few-rows path (Python floats) gives the batch path's (numpy) scores and sums to the
    bit, with ties, classes not seen yet at a row, an unseen true label and unscored rows."""
    rng = np.random.default_rng(11)
    n, k = 60, 4
    proba = rng.dirichlet(np.ones(k), size=n)
    proba[5] = [0.4, 0.4, 0.2, 0.0]  # a tie: the first is the top class
    proba[9] = [0.25, 0.25, 0.25, 0.25]
    known = rng.integers(0, k + 1, size=n)  # 0: unscored (no label seen yet)
    label = rng.integers(0, k, size=n)  # sometimes not among the known classes
    for i in range(n):
        assert score_row(proba[i].tolist(), int(known[i]) or 1, int(label[i])) == tuple(
            float(v)
            for v in np.array(scores(proba[i : i + 1], np.array([known[i] or 1]), label[i : i + 1]))[[0, 1, 3, 2], 0]
        )
    batch = Prequential(window=25, history=History(every=7, seconds=1e9))
    assert n > FEW
    batch.update_many(proba, known, label)
    few = Prequential(window=25, history=History(every=7, seconds=1e9))
    for a in range(0, n, 3):
        few.update_many(proba[a : a + 3], known[a : a + 3], label[a : a + 3])
    assert bits(few.state()) == bits(batch.state()) and bits(few.report()) == bits(batch.report())
    assert bits(few.history.report()) == bits(batch.history.report()) and few.history.points
