"""Delayed-label ids: expiry by time and by count."""

from __future__ import annotations

from app.pending import PendingIds


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_get_discard_and_replace() -> None:
    p = PendingIds(10, 5.0, Clock())
    p.put("a", {"x": 1})
    p.put(7, {"x": 2})
    assert p.get("a") == {"x": 1} and p.get(7) == {"x": 2} and p.get("7") is None
    p.put("a", {"x": 3})
    assert p.get("a") == {"x": 3} and len(p) == 2
    p.discard("a")
    assert p.get("a") is None and len(p) == 1


def test_ids_expire_after_ttl() -> None:
    clock = Clock()
    p = PendingIds(10, 5.0, clock)
    p.put("a", {})
    clock.t = 3.0
    p.put("b", {})
    clock.t = 5.0
    assert p.get("a") is None and p.get("b") == {}
    clock.t = 8.0
    assert p.get("b") is None and len(p) == 0


def test_oldest_ids_dropped_beyond_max_size() -> None:
    p = PendingIds(2, 100.0, Clock())
    for k in ("a", "b", "c"):
        p.put(k, {})
    assert p.get("a") is None and p.get("b") == {} and p.get("c") == {}


def test_zero_size_keeps_nothing() -> None:
    p = PendingIds(0, 100.0, Clock())
    p.put("a", {})
    assert p.get("a") is None
