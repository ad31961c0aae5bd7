"""A model's prequential metrics over time: a bounded list of points, and its drift events.

Every ``every`` events (and, on a slow stream, at the first event ``seconds`` after the last
point) the history takes a *point*: the sequence number, the events' arrival time, the
windowed metrics of :class:`~app.prequential.Prequential` (log loss, Brier, accuracy,
expected calibration error and the reliability bins of the recent window) and the event
rate. Beside the points it keeps the model's drift events (detections, swaps, dropped
background trees) with the sequence number at which each happened.

Both lists are bounded (``max_points`` each, oldest dropped first). The state is plain data
stored with each snapshot, and a point depends only on the scored events and their logged
arrival times, so replaying the log after a restart rebuilds exactly the same points. The
drift events too, unless one tree had more than 20 within one request or one page of the
replay (the library keeps each tree's last 20: :meth:`History.merge_drifts`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
import orjson

__all__ = ["MIN_RATE_SPAN", "History", "Point"]

#: Shortest time span (seconds) an event rate is measured over; a shorter one is noise.
MIN_RATE_SPAN = 1.0


class Point(NamedTuple):
    """One sample of the windowed metrics (``None`` where undefined, e.g. no scored event)."""

    seq: int
    time: float | None
    events_per_s: float | None
    n: int
    log_loss: float | None
    brier: float | None
    accuracy: float | None
    ece: float | None
    counts: tuple[int, ...]
    mean_confidence: tuple[float | None, ...]
    bin_accuracy: tuple[float | None, ...]

    def as_json(self) -> dict[str, Any]:
        """The point as the API returns it; its bins in the ``/metrics`` reliability format."""
        bins = len(self.counts)
        reliability = [
            {"lower": b / bins, "upper": (b + 1) / bins, "count": c, "mean_confidence": conf, "accuracy": acc}
            for b, (c, conf, acc) in enumerate(zip(self.counts, self.mean_confidence, self.bin_accuracy, strict=True))
        ]
        return {
            "seq": self.seq,
            "time": self.time,
            "events_per_s": self.events_per_s,
            "n": self.n,
            "log_loss": self.log_loss,
            "brier": self.brier,
            "accuracy": self.accuracy,
            "ece": self.ece,
            "reliability": reliability,
        }

    @classmethod
    def from_window(cls, seq: int, time: float | None, rate: float | None, window: Mapping[str, Any]) -> Point:
        """A point from a window summary (:meth:`app.prequential.Prequential.recent_summary`)."""
        bins = window["reliability"]
        return cls(
            seq,
            time,
            rate,
            int(window["n"]),
            window["log_loss"],
            window["brier"],
            window["accuracy"],
            window["ece"],
            tuple(int(b["count"]) for b in bins),
            tuple(b["mean_confidence"] for b in bins),
            tuple(b["accuracy"] for b in bins),
        )


def _opt_float(value: Any) -> float | None:
    return None if value is None else float(value)


class History:
    """A bounded history of a model's windowed prequential metrics and of its drift events.

    Parameters
    ----------
    every
        Take a point every ``every`` events.
    seconds
        Also take a point at the first event at least ``seconds`` after the previous point
        (so a slow stream still gets points); events without a time never trigger this.
    max_points
        Most points kept, and most drift events kept; the oldest go first.

    Notes
    -----
    ``events_per_s`` at a point with time :math:`t` and sequence number :math:`s` is
    :math:`(s - s_r) / (t - t_r)`, where :math:`(s_r, t_r)` is the newest earlier point at
    least :data:`MIN_RATE_SPAN` seconds older (or the first timed event). The events of one
    request share their arrival time, so a shorter span would mostly measure batching.
    """

    def __init__(self, every: int = 100, seconds: float = 30.0, max_points: int = 1000) -> None:
        for name, value, ok in (
            ("every", every, every >= 1),
            ("seconds", seconds, seconds > 0),
            ("max_points", max_points, max_points >= 1),
        ):
            if not ok:
                raise ValueError(f"History: {name} must be {'> 0' if name == 'seconds' else '>= 1'}, got {value!r}")
        self.every = every
        self.seconds = seconds
        self.max_points = max_points
        self.seq = 0  # events observed; the model's sequence number
        self.points: deque[Point] = deque(maxlen=max_points)
        self.drifts: deque[tuple[int, str]] = deque(maxlen=max_points)
        self.drift_at = 0  # the example number of the last drift event merged
        self.origin: tuple[int, float] | None = None  # (events before the first timed one, its time)
        self._last_rate: tuple[float, int, Point | None] | None = None  # see _rate_point
        self._encoded: dict[int, orjson.Fragment] = {}  # a point's JSON by its seq: see encoded_report

    def observe(self, t: float | None, window: Callable[[], Mapping[str, Any]]) -> None:
        """Count one event (scored or not) that arrived at time ``t``; take a point if one is due.

        Parameters
        ----------
        t
            The event's arrival time (Unix seconds, as logged), or ``None`` if unknown.
        window
            Returns the current window summary; called only when a point is taken.
        """
        self.observe_many([t], lambda due: [window() for _ in due])

    def observe_many(
        self, times: Sequence[float | None], windows: Callable[[list[int]], Sequence[Mapping[str, Any]]]
    ) -> None:
        """Count consecutive events, in order; take the points that fall due among them.

        The same points as :meth:`observe` called once per event, found without a Python
        call per event (:meth:`_due`).

        Parameters
        ----------
        times
            Each event's arrival time (Unix seconds, as logged), or ``None`` if unknown.
        windows
            ``windows(due)``: the window summary just after each event ``i`` in ``due`` (indices
            into ``times``, increasing); called once, with the events where points fall due.
        """
        start = self.seq
        if self.origin is None:
            first = next(((i, t) for i, t in enumerate(times) if t is not None), None)
            if first is not None:
                self.origin = (start + first[0], first[1])
        due = self._due(times)
        for i, window in zip(due, windows(due) if due else (), strict=True):
            self.seq = start + i + 1
            self.points.append(Point.from_window(self.seq, times[i], self._rate(times[i]), window))
        self.seq = start + len(times)

    def _due(self, times: Sequence[float | None]) -> list[int]:
        """The events of ``times`` (indices; they follow the ``seq`` events counted) where points
        fall due: after a point, the next is due at the next multiple of ``every`` events or at
        the first event ``seconds`` after the point, whichever comes first."""
        if not len(times):
            return []
        every, seconds = self.every, self.seconds
        clock = np.array(times, dtype=np.float64)  # None as NaN: never due by time
        # The latest time in each block of events up to a multiple of every: t - last is
        # monotone in t, so a block whose latest time is not seconds after the last point has
        # no point due by time, and needs no look at its events.
        latest = np.fmax.reduceat(clock, [0, *range((-(self.seq + 1)) % every + 1, len(times), every)]).tolist()
        due: list[int] = []
        last = self._last_time()
        i = 0
        while i < len(times):
            nxt = i + (-(self.seq + i + 1)) % every  # its sequence number is a multiple of every
            block = (self.seq + i) // every - self.seq // every
            if last is not None and latest[block] - last >= seconds:  # an event before it may be late enough
                late = np.flatnonzero(clock[i:nxt] - last >= seconds)
                nxt = i + int(late[0]) if late.size else nxt
            if nxt >= len(times):
                break
            due.append(nxt)
            last = self._time_or_origin(times[nxt])
            i = nxt + 1
        return due

    def _last_time(self) -> float | None:
        return self._time_or_origin(self.points[-1].time if self.points else None)

    def _time_or_origin(self, t: float | None) -> float | None:
        """A point's time, or if it has none the first timed event's (``None`` if none yet)."""
        if t is not None:
            return t
        return self.origin[1] if self.origin is not None else None

    def _rate(self, t: float | None) -> float | None:
        if t is None:
            return None
        p = self._rate_point(t)
        if p is not None:
            return (self.seq - p.seq) / (t - p.time)  # type: ignore[operator]  # a point with a time
        if self.origin is not None and t - self.origin[1] >= MIN_RATE_SPAN:
            return (self.seq - self.origin[0]) / (t - self.origin[1])
        return None

    def _rate_point(self, t: float) -> Point | None:
        """The newest point at least :data:`MIN_RATE_SPAN` seconds before ``t`` (``None``: none).

        The points are looked at newest first; at the same ``t`` as the last call (the events
        of a request share their time), only those taken since then.
        """
        newest, found = 0, None  # the points up to seq newest were looked at, found the newest fit
        if self._last_rate is not None and self._last_rate[0] == t:
            _, newest, found = self._last_rate
            if found is not None and found.seq < self.points[0].seq:
                found = None  # dropped since (max_points); none after it fits
        for p in reversed(self.points):
            if p.seq <= newest:
                break
            if p.time is not None and t - p.time >= MIN_RATE_SPAN:
                found = p
                break
        self._last_rate = (t, self.points[-1].seq if self.points else 0, found)
        return found

    def merge_drifts(self, model: Any) -> None:
        """Record the drift events ``model`` reported since the last merge (if it reports any).

        Parameters
        ----------
        model
            The model; its ``drift_summary()`` (``ProbabilityTree``'s) holds counters of
            detections, swaps and dropped background trees, and its most recent events
            ``{"event", "at"}``, ``at`` being the example number (the sequence number).

        Notes
        -----
        The events merged are those past the last one merged (by example number: every event
        of an example is reported once it is learned). The library lists each tree's last 20
        events, so merging after every request (and every page of a replay) misses none unless
        one tree has more than 20 drift events in one request (or page).
        """
        summary = getattr(model, "drift_summary", None)
        if summary is not None:
            self.merge_drift_summary(summary())

    def merge_drift_summary(self, drift: Mapping[str, Any]) -> None:
        """:meth:`merge_drifts` from the drift summary itself (its ``events`` in order of ``at``)."""
        # Not by the change of the counters: a forest lists its members' events together, and
        # the newest n of them are not the n new ones when a member dropped some of its own.
        for event in drift.get("events", ()):
            at = int(event["at"])
            if at > self.drift_at:
                self.drifts.append((at, str(event["event"])))
        self.drift_at = max(self.drift_at, self.drifts[-1][0] if self.drifts else 0)

    def report(self, after: int = 0) -> dict[str, Any]:
        """``{"points": [...], "drifts": [{"seq", "event"}]}``, each with ``seq > after``."""
        return {
            "points": [p.as_json() for p in self.points if p.seq > after],
            "drifts": self._drifts_after(after),
        }

    def encoded_report(self, after: int = 0) -> bytes:
        """:meth:`report` as JSON: the same bytes as ``orjson.dumps(report(after))``, with each
        point encoded once (points never change), so a full history costs little to serve."""
        points = [self._encoded_point(p) for p in self.points if p.seq > after]
        return orjson.dumps({"points": points, "drifts": self._drifts_after(after)})

    def _drifts_after(self, after: int) -> list[dict[str, Any]]:
        return [{"seq": seq, "event": kind} for seq, kind in self.drifts if seq > after]

    def _encoded_point(self, point: Point) -> orjson.Fragment:
        encoded = self._encoded.get(point.seq)
        if encoded is None:
            if len(self._encoded) >= 2 * self.max_points:  # forget the points dropped since
                first = self.points[0].seq
                self._encoded = {seq: e for seq, e in self._encoded.items() if seq >= first}
            encoded = self._encoded[point.seq] = orjson.Fragment(orjson.dumps(point.as_json()))
        return encoded

    def state(self) -> dict[str, Any]:
        """Everything needed to resume, as JSON-able data."""
        return {
            "every": self.every,
            "seconds": self.seconds,
            "max_points": self.max_points,
            "seq": self.seq,
            "points": [[*p[:8], list(p.counts), list(p.mean_confidence), list(p.bin_accuracy)] for p in self.points],
            "drifts": [list(d) for d in self.drifts],
            "drift_at": self.drift_at,
            "origin": None if self.origin is None else list(self.origin),
        }

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> History:
        """Rebuild from :meth:`state` output."""
        h = cls(int(state["every"]), float(state["seconds"]), int(state["max_points"]))
        h.seq = int(state["seq"])
        for p in state["points"]:
            h.points.append(
                Point(
                    int(p[0]),
                    _opt_float(p[1]),
                    _opt_float(p[2]),
                    int(p[3]),
                    _opt_float(p[4]),
                    _opt_float(p[5]),
                    _opt_float(p[6]),
                    _opt_float(p[7]),
                    tuple(int(c) for c in p[8]),
                    tuple(_opt_float(v) for v in p[9]),
                    tuple(_opt_float(v) for v in p[10]),
                )
            )
        h.drifts.extend((int(seq), str(kind)) for seq, kind in state["drifts"])
        # "drift_at" since the merge by example number; before it, the newest event merged
        h.drift_at = int(state.get("drift_at", max((seq for seq, _ in h.drifts), default=0)))
        origin = state["origin"]
        h.origin = None if origin is None else (int(origin[0]), float(origin[1]))
        return h
