"""The metrics history: when points are taken, their values, bounds, rates, drift events,
and that it survives a snapshot + restart and a replay of the log unchanged."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import orjson
import pytest

from app.history import MIN_RATE_SPAN, History, Point
from app.hosting import ModelHost
from app.prequential import Prequential
from app.storage import DB_NAME
from tests.app.conftest import learn_all, make_stream


def proba(i: int) -> dict[str, float]:
    p = 0.05 + 0.09 * (i % 11)
    return {"a": p, "b": 1.0 - p}


def fed(n: int, every: int = 10, max_points: int = 1000, times: list[float] | None = None) -> Prequential:
    preq = Prequential(window=20, bins=4, history=History(every=every, seconds=1e9, max_points=max_points))
    for i in range(n):
        preq.update(proba(i) if i else {}, "a" if i % 3 else "b", None if times is None else times[i])
    return preq


def test_a_point_every_n_events_holds_the_window_metrics_at_that_event() -> None:
    preq = Prequential(window=20, bins=4, history=History(every=10))
    expected = {}
    for i in range(35):
        preq.update(proba(i) if i else {}, "a" if i % 3 else "b")
        if (i + 1) % 10 == 0:
            expected[i + 1] = preq.recent_summary()
    points = preq.history.report()["points"]
    assert [p["seq"] for p in points] == [10, 20, 30]
    for p in points:
        window = expected[p["seq"]]
        assert {k: p[k] for k in ("n", "log_loss", "brier", "accuracy", "ece", "reliability")} == {
            k: window[k] for k in ("n", "log_loss", "brier", "accuracy", "ece", "reliability")
        }
        assert p["time"] is None and p["events_per_s"] is None  # no clock given
    assert points[0]["n"] == 9  # the first event came before any label: not scored


def test_slow_streams_get_a_point_per_time_interval() -> None:
    history = History(every=1000, seconds=30.0)
    window = {"n": 0, "log_loss": None, "brier": None, "accuracy": None, "ece": None, "reliability": []}
    for i, t in enumerate([100.0, 110.0, 129.9, 130.0, 140.0, 165.0, 200.0]):
        history.observe(t, lambda: window)
        assert history.seq == i + 1
    points = history.report()["points"]
    # 30 s after the first event, then 30 s after each point
    assert [(p["seq"], p["time"]) for p in points] == [(4, 130.0), (6, 165.0), (7, 200.0)]
    # from the first event's time, then from the previous point
    assert [p["events_per_s"] for p in points] == pytest.approx([4 / 30.0, 2 / 35.0, 1 / 35.0])


def test_event_rate_spans_at_least_a_second() -> None:
    # batches of 50 events sharing their arrival time, every 0.25 s: 200 events/s
    times = [1000.0 + 0.25 * (i // 50) for i in range(600)]
    points = fed(600, every=50, times=times).history.report()["points"]
    rates = [p["events_per_s"] for p in points]
    assert rates[:4] == [None] * 4  # less than a second of stream
    # measured from the newest point at least 1 s older: exactly the batches' pace
    assert rates[4:] == pytest.approx([200.0] * 8)


def test_points_and_drifts_are_bounded_oldest_first() -> None:
    preq = fed(1000, every=10, max_points=7)
    points = preq.history.report()["points"]
    assert [p["seq"] for p in points] == [940, 950, 960, 970, 980, 990, 1000]
    history = History(max_points=3)
    events: list[dict[str, Any]] = []
    for k in range(5):
        events.append({"event": "detection", "at": 100 * k + 1})
        history.merge_drift_summary({"n_detections": k + 1, "n_swaps": 0, "n_dropped": 0, "events": events[-20:]})
    assert history.report()["drifts"] == [{"seq": s, "event": "detection"} for s in (201, 301, 401)]


def test_drift_events_are_merged_once_each_in_order() -> None:
    history = History()
    events = [{"event": "detection", "at": 120}, {"event": "swap", "at": 130}]
    history.merge_drift_summary({"n_detections": 1, "n_swaps": 0, "n_dropped": 0, "events": events[:1]})
    history.merge_drift_summary({"n_detections": 1, "n_swaps": 0, "n_dropped": 0, "events": events[:1]})
    history.merge_drift_summary({"n_detections": 1, "n_swaps": 1, "n_dropped": 0, "events": events})
    events.append({"event": "dropped", "at": 2130})
    history.merge_drift_summary({"n_detections": 1, "n_swaps": 1, "n_dropped": 1, "events": events})
    assert history.report()["drifts"] == [
        {"seq": 120, "event": "detection"},
        {"seq": 130, "event": "swap"},
        {"seq": 2130, "event": "dropped"},
    ]
    assert history.report(after=125)["drifts"] == [{"seq": 130, "event": "swap"}, {"seq": 2130, "event": "dropped"}]
    history.merge_drifts(object())  # a model without drift reporting changes nothing
    assert len(history.report()["drifts"]) == 3


def test_a_forests_events_are_merged_by_example_number_not_by_count() -> None:
    # a forest lists its members' events together: member 0 dropped its oldest, and the newest
    # three of the list (the change of the counters) held member 1's old event, merged again
    history = History()
    history.merge_drift_summary({"n_detections": 3, "events": [{"event": "detection", "at": a} for a in (10, 12, 50)]})
    ring = [{"event": "detection", "at": a} for a in (50, 70, 80)]  # member 0 kept 70 and 80 of 60, 70, 80
    history.merge_drift_summary({"n_detections": 6, "events": ring})
    assert [d["seq"] for d in history.report()["drifts"]] == [10, 12, 50, 70, 80]
    again = History.from_state(orjson.loads(orjson.dumps(history.state())))
    again.merge_drift_summary({"n_detections": 7, "events": [*ring[1:], {"event": "swap", "at": 90}]})
    assert [(d["seq"], d["event"]) for d in again.report()["drifts"]][-2:] == [(80, "detection"), (90, "swap")]
    old = history.state()
    del old["drift_at"]
    old["drift_total"] = 6  # a snapshot from before: its newest event marks what was merged
    assert History.from_state(old).drift_at == 80


def test_report_after_a_seq() -> None:
    history = fed(100).history
    assert [p["seq"] for p in history.report(after=70)["points"]] == [80, 90, 100]
    assert history.report(after=100) == {"points": [], "drifts": []}


def test_state_round_trip_through_json_continues_identically() -> None:
    times = [50.0 + 0.01 * i for i in range(400)]
    a = fed(300, times=times)
    a.history.merge_drift_summary(
        {"n_detections": 1, "n_swaps": 0, "n_dropped": 0, "events": [{"event": "detection", "at": 250}]}
    )
    b = Prequential.from_state(orjson.loads(orjson.dumps(a.state())))
    for p in (a, b):
        for i in range(300, 400):
            p.update(proba(i), "a", times[i])
    assert a.history.report() == b.history.report()
    assert a.state() == b.state()


def test_a_snapshot_from_before_the_history_starts_one_at_its_seq() -> None:
    state = fed(25).state()
    del state["history"]
    p = Prequential.from_state(state)
    for i in range(25, 130):
        p.update(proba(i), "a")
    assert p.history.seq == 130
    assert [pt["seq"] for pt in p.history.report()["points"]] == [100]  # the default: every 100 events


@pytest.mark.parametrize("bad", [{"every": 0}, {"max_points": 0}, {"seconds": 0.0}, {"seconds": float("nan")}])
def test_bad_parameters_are_refused_by_name(bad: dict[str, Any]) -> None:
    (name,) = bad
    with pytest.raises(ValueError, match=f"History: {name} must be"):
        History(**bad)


# -- through the service --------------------------------------------------------------------


def drifting(n: int = 3000, at: int = 1500) -> list[tuple[dict[str, Any], str]]:
    """The test stream with its labels swapped from event ``at`` on (an abrupt drift)."""
    swapped = {"low": "high", "high": "low", "mid": "mid"}
    events = make_stream(n, seed=1)
    return events[:at] + [(x, swapped[y]) for x, y in events[at:]]


def test_the_service_records_points_and_the_models_drifts(running) -> None:  # type: ignore[no-untyped-def]
    with running(history_every=100, metrics_window=200) as client:
        learn_all(client, drifting(), batch=250)
        history = client.get("/models/default/metrics/history").json()
        drift = client.get("/models/default").json()["summary"]["drift"]
    assert [p["seq"] for p in history["points"]] == list(range(100, 3001, 100))
    assert all(p["time"] is not None for p in history["points"])
    assert [{"seq": e["at"], "event": e["event"]} for e in drift["events"]] == history["drifts"]
    assert any(d["event"] == "swap" and d["seq"] > 1500 for d in history["drifts"])
    loss = {p["seq"]: p["log_loss"] for p in history["points"]}
    assert loss[1600] > 2 * loss[1500]  # the jump at the drift
    assert loss[3000] < loss[1600]  # and the recovery


def test_the_service_bounds_the_history(running) -> None:  # type: ignore[no-untyped-def]
    with running(history_every=10, history_points=5) as client:
        learn_all(client, make_stream(300), batch=100)
        points = client.get("/models/default/metrics/history").json()["points"]
    assert [p["seq"] for p in points] == [260, 270, 280, 290, 300]


def test_history_survives_restart_and_is_identical_after_replay(running, tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    original_close = ModelHost.close

    async def close_without_snapshot(self: ModelHost, snapshot: bool) -> None:
        await original_close(self, snapshot=False)

    settings = {"history_every": 50, "snapshot_every": 1000, "snapshot_pace": 0}  # at exact seqs
    with running(**settings) as client:
        learn_all(client, drifting(), batch=230)
        live = client.get("/models/default/metrics/history").json()
        monkeypatch.setattr(ModelHost, "close", close_without_snapshot)  # as if killed
    assert live["drifts"] and len(live["points"]) == 60
    monkeypatch.setattr(ModelHost, "close", original_close)
    with sqlite3.connect(tmp_path / "data" / DB_NAME) as db:
        assert [r[0] for r in db.execute("SELECT seq FROM snapshots ORDER BY seq")] == [1150, 2300]
    # snapshot at 2,300 + replay of the events after it
    with running(**settings) as client:
        assert client.get("/models/default/metrics/history").json() == live
    # the log alone, replayed from the first event
    with sqlite3.connect(tmp_path / "data" / DB_NAME) as db:
        db.execute("DELETE FROM snapshots")
    with running(**settings) as client:
        assert client.get("/models/default/metrics/history").json() == live
        assert client.get("/models/default/metrics/history?after=2900").json() == {
            "points": [p for p in live["points"] if p["seq"] > 2900],
            "drifts": [d for d in live["drifts"] if d["seq"] > 2900],
        }
    # after a graceful stop (snapshot at the last event) too
    with running(**settings) as client:
        assert client.get("/models/default/metrics/history").json() == live


# -- the batch form against the per-event rules ---------------------------------------------


class ReferenceHistory:
    """The history's rules applied one event at a time, as first written (the reference for
    :meth:`History.observe_many`)."""

    def __init__(self, every: int, seconds: float, max_points: int) -> None:
        self.every, self.seconds, self.max_points = every, seconds, max_points
        self.seq = 0
        self.points: list[Point] = []
        self.origin: tuple[int, float] | None = None
        self.taken: list[int] = []  # the seq of every point taken, dropped or not

    def observe(self, t: float | None, window: Callable[[], Mapping[str, Any]]) -> None:
        self.seq += 1
        if t is not None and self.origin is None:
            self.origin = (self.seq - 1, t)
        due = self.seq % self.every == 0
        if not due and t is not None:
            last = (
                self.points[-1].time
                if self.points and self.points[-1].time is not None
                else (self.origin[1] if self.origin is not None else None)
            )
            due = last is not None and t - last >= self.seconds
        if due:
            point = Point.from_window(self.seq, t, self.rate(t), window())
            self.points = (self.points + [point])[-self.max_points :]
            self.taken.append(self.seq)

    def rate(self, t: float | None) -> float | None:
        if t is None:
            return None
        for p in reversed(self.points):
            if p.time is not None and t - p.time >= MIN_RATE_SPAN:
                return (self.seq - p.seq) / (t - p.time)
        if self.origin is not None and t - self.origin[1] >= MIN_RATE_SPAN:
            return (self.seq - self.origin[0]) / (t - self.origin[1])
        return None

    def state(self) -> dict[str, Any]:
        """As :meth:`History.state` (its format)."""
        h = History(self.every, self.seconds, self.max_points)
        h.seq, h.origin = self.seq, self.origin
        h.points.extend(self.points)
        return h.state()


def arrival_times(n: int, seed: int) -> list[float | None]:
    """Requests of 1 to 40 events sharing their arrival time: mostly a fraction of a second
    apart, sometimes minutes (a slow stream), now and then without a time or a step back."""
    rng = np.random.default_rng(seed)
    times: list[float | None] = []
    t = 1_000.0
    while len(times) < n:
        t += float(rng.choice([0.05, 0.3, 1.7, 31.0, 95.0, -2.0], p=[0.45, 0.25, 0.1, 0.08, 0.04, 0.08]))
        times += [None if rng.random() < 0.1 else t] * int(rng.integers(1, 41))
    return times[:n]


def cuts_of(n: int, seed: int) -> list[int]:
    """Random batch boundaries: batches of 1 to 150 events."""
    rng = np.random.default_rng(seed)
    return np.cumsum(rng.integers(1, 151, size=n)).clip(max=n).tolist()


@pytest.mark.parametrize(
    ("every", "seconds", "max_points"), [(25, 30.0, 1000), (7, 1.5, 6), (1, 30.0, 3), (1000, 30.0, 4)]
)
@pytest.mark.parametrize("seed", [0, 1])
def test_observe_many_takes_the_points_observe_would(every: int, seconds: float, max_points: int, seed: int) -> None:
    """The same points, at the same events, with the same rates, however the events are batched."""
    n = 2000
    times = arrival_times(n, seed)
    times[:30] = [None] * 30  # no clock at first: the origin comes later
    ref = ReferenceHistory(every, seconds, max_points)
    for i, t in enumerate(times):
        ref.observe(t, lambda i=i: window_at(i))  # type: ignore[misc]
    assert len(ref.points) > 2 and any(p.events_per_s is not None for p in ref.points)
    assert every == 1 or any(seq % every for seq in ref.taken)  # some points by time
    for cuts in ([n], cuts_of(n, seed), list(range(1, n + 1))):
        history = History(every, seconds, max_points)
        for a, b in zip([0, *cuts], cuts, strict=False):
            history.observe_many(times[a:b], lambda due, a=a: [window_at(a + i) for i in due])  # type: ignore[misc]
        assert history.state() == ref.state()
        assert orjson.dumps(history.state()) == orjson.dumps(ref.state())  # to the bit


def window_at(i: int) -> dict[str, Any]:
    """A stand-in window summary that names the event it was taken at."""
    return {"n": i, "log_loss": None, "brier": None, "accuracy": None, "ece": None, "reliability": []}


def test_encoded_report_is_the_report_as_json() -> None:
    """The route's bytes are the report's (each point encoded once, then reused), also after
    points are dropped (max_points) and with ``after``."""
    history = fed(1_000, every=50).history
    for after in (0, 120, 10_000):
        assert history.encoded_report(after) == orjson.dumps(history.report(after))
    small = History(every=10, max_points=3)
    for seq in range(1, 200):
        small.observe(
            float(seq),
            lambda seq=seq: {
                "n": seq,
                "log_loss": 0.5,
                "brier": 0.1,
                "accuracy": 1.0,
                "ece": 0.0,
                "reliability": [{"count": 1, "mean_confidence": 0.9, "accuracy": 1.0}],
            },
        )
        assert small.encoded_report() == orjson.dumps(small.report())
