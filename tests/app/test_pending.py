"""Delayed-label ids: write-once, expiry by time, bounds in count and bytes, trusted ids kept."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from app.exceptions import PendingFull, PendingIdTaken
from app.pending import IdTaken, NoRoom, PendingIds, Taken, entry_bytes

BIG = 10**9


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_get_take_and_ids_by_type() -> None:
    p = PendingIds(10, BIG, 5.0, Clock())
    p.put("a", {"x": 1})
    p.put(7, {"x": 2})
    assert p.get("a") == {"x": 1} and p.get(7) == {"x": 2} and p.get("7") is None
    assert p.take("a") is not None and p.take("a") is None
    assert p.get("a") is None and len(p) == 1 and p.bytes == entry_bytes(7, {"x": 2})
    p.put("a", {"x": 3})  # labelled, so free again
    assert p.get("a") == {"x": 3}


def test_restore_gives_ids_back_in_expiry_order_unless_expired_or_predicted_anew() -> None:
    # a label whose commit failed gives its id back: the retry finds the prediction
    clock = Clock()
    p = PendingIds(10, BIG, 5.0, clock)
    for t, key in enumerate(["a", "b", "c", "d"]):
        clock.t = float(t)
        p.put(key, {"x": t}, trusted=key != "b")
    taken = [p.take(k) for k in ("b", "a", "c", "d")]
    p.put("d", {"x": "new"})  # predicted anew meanwhile: the newer prediction stays
    clock.t = 5.5  # "a" (expiring at 5.0) is gone for good
    p.restore([t for t in taken if t is not None])
    assert [p.get(k) for k in "abcd"] == [None, {"x": 1}, {"x": 2}, {"x": "new"}]
    assert p.bytes == sum(entry_bytes(k, x) for k, x in [("b", {"x": 1}), ("c", {"x": 2}), ("d", {"x": "new"})])
    clock.t = 7.0  # "b" and "c" keep their expiry (6.0 and 7.0); "d" was put at 3.0 anew
    assert [p.get(k) for k in "bcd"] == [None, None, {"x": "new"}]


def test_a_key_holder_replaces_an_id_a_caller_without_a_key_took() -> None:
    # else a caller without a key could take an order number ahead of the key holder, and the
    # key holder's label would train on the features it chose
    p = PendingIds(10, BIG, 5.0, Clock())
    p.put("order-1", {"x": "bogus"}, trusted=False)
    p.put_many([("order-2", {"x": 2}), ("order-1", {"x": 1})], trusted=True)
    assert p.get("order-1") == {"x": 1} and len(p) == 2
    assert p.bytes == entry_bytes("order-1", {"x": 1}) + entry_bytes("order-2", {"x": 2})
    for trusted in (False, True):  # and a key holder's id is written once, for anyone
        with pytest.raises(PendingIdTaken):
            p.put("order-1", {"x": 3}, trusted)
    taken = p.take("order-1")
    assert taken is not None and taken.trusted and taken.entry.features == {"x": 1}


def test_an_id_is_written_once_until_it_is_labelled_or_expires() -> None:
    clock = Clock()
    p = PendingIds(10, BIG, 5.0, clock)
    p.put("a", {"x": 1})
    for trusted in (True, False):
        with pytest.raises(PendingIdTaken):
            p.put("a", {"x": 2}, trusted)
    assert p.get("a") == {"x": 1} and len(p) == 1
    clock.t = 5.0
    p.put("a", {"x": 3})
    assert p.get("a") == {"x": 3}


def test_ids_expire_after_ttl() -> None:
    clock = Clock()
    p = PendingIds(10, BIG, 5.0, clock)
    p.put("a", {})
    clock.t = 3.0
    p.put("b", {}, trusted=False)
    clock.t = 5.0
    assert p.get("a") is None and p.get("b") == {}
    clock.t = 8.0
    assert p.get("b") is None and len(p) == 0 and p.bytes == 0


def test_oldest_ids_dropped_beyond_max_size() -> None:
    p = PendingIds(2, BIG, 100.0, Clock())
    for k in ("a", "b", "c"):
        p.put(k, {})
    assert p.get("a") is None and p.get("b") == {} and p.get("c") == {}


def test_bytes_are_bounded() -> None:
    x = {f"f{i}": float(i) for i in range(10)}
    p = PendingIds(1000, 3 * entry_bytes("k0", x), 100.0, Clock())
    for i in range(5):
        p.put(f"k{i}", x)
    assert len(p) == 3 and p.get("k1") is None and p.get("k4") == x
    with pytest.raises(PendingFull):  # one entry larger than the whole budget
        p.put("huge", {f"f{i}": "v" * 100 for i in range(1000)})
    assert len(p) == 3


def test_untrusted_ids_never_push_out_trusted_ones() -> None:
    p = PendingIds(3, BIG, 100.0, Clock())
    p.put("t1", {})
    p.put("t2", {})
    for i in range(10):  # a flood without a key evicts only its own kind
        p.put(f"u{i}", {}, trusted=False)
    assert p.get("t1") == {} and p.get("t2") == {} and p.get("u9") == {} and p.get("u8") is None
    p.put("t3", {})  # a trusted id pushes out an untrusted one first
    assert p.get("u9") is None and len(p) == 3
    with pytest.raises(PendingFull):  # only trusted ids are left: no room for an untrusted one
        p.put("u10", {}, trusted=False)
    p.put("t4", {})  # a trusted id may push out the oldest trusted one
    assert p.get("t1") is None and p.get("t4") == {}


def test_zero_size_keeps_nothing() -> None:
    p = PendingIds(0, BIG, 100.0, Clock())
    with pytest.raises(PendingFull):
        p.put("a", {})
    assert p.get("a") is None


def test_a_batch_is_kept_all_or_none_and_a_refusal_names_its_first_entry() -> None:
    p = PendingIds(5, BIG, 100.0, Clock())
    p.put("old", {"x": 0})
    with pytest.raises(IdTaken) as taken:
        p.put_many([("a", {}), ("b", {}), ("old", {}), ("c", {})])
    assert taken.value.index == 2 and isinstance(taken.value, PendingIdTaken)
    with pytest.raises(IdTaken) as taken:
        p.put_many([("a", {}), ("b", {}), ("a", {})])  # the same key twice
    assert taken.value.index == 2
    with pytest.raises(NoRoom) as full:
        p.put_many([(k, {}) for k in "abcdef"])  # six entries never fit in five
    assert full.value.index == 5 and isinstance(full.value, PendingFull)
    assert len(p) == 1 and p.get("a") is None and p.get("old") == {"x": 0}
    p.put_many([(k, {"x": k}) for k in "abcde"])  # fits by pushing out the oldest
    assert p.get("old") is None and [p.get(k) for k in "abcde"] == [{"x": k} for k in "abcde"]
    assert p.bytes == sum(entry_bytes(k, {"x": k}) for k in "abcde")


def test_an_untrusted_batch_fits_only_in_the_room_untrusted_ids_leave() -> None:
    p = PendingIds(4, BIG, 100.0, Clock())
    p.put_many([("t0", {}), ("t1", {})])
    p.put_many([("u0", {}), ("u1", {})], trusted=False)
    with pytest.raises(NoRoom) as full:
        p.put_many([("u2", {}), ("u3", {}), ("u4", {})], trusted=False)
    assert full.value.index == 2 and len(p) == 4 and p.get("u0") == {}
    p.put_many([("u2", {}), ("u3", {})], trusted=False)
    assert [k for k in ("t0", "t1", "u0", "u1", "u2", "u3") if k in p] == ["t0", "t1", "u2", "u3"]
    size = entry_bytes("b0", {})
    p = PendingIds(10, 3 * size, 100.0, Clock())
    p.put("t0", {})
    p.put("u0", {}, trusted=False)
    with pytest.raises(NoRoom) as full:
        p.put_many([("b0", {}), ("b1", {}), ("b2", {})], trusted=False)  # bytes: only u0's to free
    assert full.value.index == 2


class PendingRules(RuleBasedStateMachine):
    """Random puts, labels and clock steps against a plain model of the rules."""

    def __init__(self) -> None:
        super().__init__()
        self.clock = Clock()
        self.p = PendingIds(4, 4 * entry_bytes("k0", {"a": 1.0}) + 200, 10.0, self.clock)
        self.trusted_alive: dict[Any, dict[str, Any]] = {}
        self.taken: list[Taken] = []

    def _forget_expired(self) -> None:
        """Drop the trusted ids that expired or that a trusted put pushed out."""
        self.trusted_alive = {k: v for k, v in self.trusted_alive.items() if self.p.get(k) is not None}

    @rule(key=st.sampled_from(["k0", "k1", "k2", "k3", "k4", "k5", 1, 2]), trusted=st.booleans(), n=st.integers(0, 3))
    def put(self, key: Any, trusted: bool, n: int) -> None:
        x = {f"f{i}": float(i) for i in range(n)}
        before = self.p.get(key)
        was_untrusted = key in self.p._untrusted
        n_before, bytes_before = len(self.p), self.p.bytes
        try:
            self.p.put(key, x, trusted)
        except PendingIdTaken:
            assert before is not None and self.p.get(key) is before  # written once
            assert (len(self.p), self.p.bytes) == (n_before, bytes_before)
            return
        except PendingFull:
            assert not trusted  # a trusted caller can always make room (each entry fits the budget)
            assert (len(self.p), self.p.bytes) == (n_before, bytes_before)  # nothing evicted
            assert all(self.p.get(k) is v for k, v in self.trusted_alive.items())
            return
        assert (before is None or (trusted and was_untrusted)) and self.p.get(key) is x
        if trusted:  # it may have pushed out older trusted ids
            self._forget_expired()
            self.trusted_alive[key] = x

    @rule(
        keys=st.lists(st.sampled_from(["k0", "k1", "k2", "k3", "k4", "k5", 1, 2]), max_size=6),
        trusted=st.booleans(),
        n=st.integers(0, 3),
    )
    def put_many(self, keys: list[Any], trusted: bool, n: int) -> None:
        entries = [(k, {f"f{i}": float(i) for i in range(n)}) for k in keys]
        before = copy.deepcopy(self.p)
        try:
            self.p.put_many(entries, trusted)
        except (IdTaken, NoRoom) as exc:
            j = exc.index
            assert (len(self.p), self.p.bytes) == (len(before), before.bytes)  # nothing changed
            assert all(self.p.get(k) is v for k, v in self.trusted_alive.items())
            prefix = copy.deepcopy(before)
            prefix.put_many(entries[:j], trusted)  # every entry before the refused one fits
            if isinstance(exc, IdTaken):
                assert before.get(keys[j]) is not None or keys[j] in keys[:j]
            else:
                assert not trusted or j >= self.p.max_size or prefix.bytes + entry_bytes(*entries[j]) > self.p.max_bytes
            return
        assert all(self.p.get(k) is x for k, x in entries)
        if trusted:
            self._forget_expired()
            self.trusted_alive.update(entries)

    @rule(key=st.sampled_from(["k0", "k1", "k2", 1]))
    def label(self, key: Any) -> None:
        taken = self.p.take(key)
        if taken is not None:
            self.taken.append(taken)
        self.trusted_alive.pop(key, None)
        assert self.p.get(key) is None

    @rule()
    def commit_failed(self) -> None:  # the labels taken so far are given back
        self.p.restore(self.taken)
        self._forget_expired()  # a trusted id given back may push out older ones
        for key, entry, trusted in self.taken:
            if trusted and self.p.get(key) is entry.features:
                self.trusted_alive[key] = entry.features
        self.taken = []

    @rule(dt=st.sampled_from([0.5, 3.0, 10.0]))
    def wait(self, dt: float) -> None:
        self.clock.t += dt
        self._forget_expired()

    @invariant()
    def bounded(self) -> None:
        assert len(self.p) <= self.p.max_size and 0 <= self.p.bytes <= self.p.max_bytes

    @invariant()
    def untrusted_puts_never_evict_trusted_ids(self) -> None:
        # every trusted id still alive by time was pushed out, if at all, by a trusted put
        assert all(self.p.get(k) is v for k, v in self.trusted_alive.items())

    @invariant()
    def kept_in_expiry_order(self) -> None:
        for items in (self.p._trusted, self.p._untrusted):
            expiries = [e.expires for e in items.values()]
            assert expiries == sorted(expiries)

    @invariant()
    def bytes_add_up(self) -> None:
        assert self.p.bytes == sum(e.size for d in (self.p._trusted, self.p._untrusted) for e in d.values())


TestPendingRules = PendingRules.TestCase
TestPendingRules.settings = settings(max_examples=150, stateful_step_count=30, deadline=None)
