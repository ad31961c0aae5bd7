"""The writer's lease on PostgreSQL: who may take it, and the fence every write checks."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest

from app.storage import EventStore, LeaseLost, Snapshot, open_store
from app.storage.postgres import PostgresStore
from app.storage.postgres_lease import PostgresCoordinator


@pytest.fixture
def stores(pg_url: str) -> Iterator[Callable[[], EventStore]]:
    """``stores()`` opens another store on the test's database; all are closed at the end."""
    opened: list[EventStore] = []

    def make() -> EventStore:
        opened.append(open_store(pg_url))
        return opened[-1]

    yield make
    for s in opened:
        s.close()


def coordinator(store: EventStore, name: str, lease_s: float = 30.0) -> PostgresCoordinator:
    c = store.coordinator(name, f"http://{name}", lease_s, 0.05)
    assert isinstance(c, PostgresCoordinator)
    return c


def wait_for(check: Callable[[], bool], timeout: float = 5.0) -> None:
    t0 = time.monotonic()
    while not check():
        assert time.monotonic() - t0 < timeout, "timed out"
        time.sleep(0.01)


def test_a_store_with_its_coordinator_out_writes_only_under_the_lease(stores: Callable[[], EventStore]) -> None:
    store = stores()
    store.create_model("m", "{}")  # before: a store of its own
    c = coordinator(store, "a")
    with pytest.raises(LeaseLost):
        store.append("m", 1, ["e1"])
    with pytest.raises(LeaseLost):
        store.create_model("n", "{}")
    with pytest.raises(LeaseLost):  # a writer that lost the lease writes no snapshot either
        store.save_snapshot("m", Snapshot(1, b"model", "{}"), keep=2)
    assert store.snapshot_seqs("m") == []
    lease = c.try_acquire()
    assert lease is not None and lease.holder == "a" and lease.token >= 1
    store.append("m", 1, ["e1"])
    store.append("m", 2, ["e"] * 100)  # a batch: one record
    store.create_model("n", "{}")
    store.delete_model("n")
    assert [m.name for m in store.models()] == ["m"] and store.models()[0].last_seq == 101
    c.close()


def test_the_lease_passes_when_the_holders_session_ends_and_fences_the_old_holder(
    stores: Callable[[], EventStore],
) -> None:
    a, b = stores(), stores()
    ca, cb = coordinator(a, "a"), coordinator(b, "b")
    first = ca.try_acquire()
    assert first is not None
    a.create_model("m", "{}")
    assert cb.try_acquire() is None and cb.holder() == first  # alive and not expired
    with pytest.raises(LeaseLost):
        b.append("m", 1, ["from b"])
    a.append("m", 1, ["from a"])
    assert ca._conn is not None
    ca._conn.close()  # a's process "dies": its session ends (the server needs a moment), its lease has 30 s left
    wait_for(lambda: cb.try_acquire() is not None, timeout=2.0)
    second = cb.holder()
    assert second is not None and second.holder == "b" and second.token > first.token
    with pytest.raises(LeaseLost):  # a still believes it holds the lease: the fence says otherwise
        a.append("m", 2, ["late from a"])
    b.append("m", 2, ["from b"])
    assert a.read_events("m", 0, 10) == [(1, "from a"), (2, "from b")]
    cb.close()


def test_a_stopped_holder_keeps_its_session_and_loses_the_lease_when_it_expires(
    stores: Callable[[], EventStore],
) -> None:
    a, b = stores(), stores()
    ca, cb = coordinator(a, "a", lease_s=0.6), coordinator(b, "b", lease_s=0.6)
    assert ca.try_acquire() is not None  # never renewed: as if stopped
    a.create_model("m", "{}")
    t0 = time.monotonic()
    assert cb.try_acquire() is None
    wait_for(lambda: cb.try_acquire() is not None)
    assert time.monotonic() - t0 >= 0.5
    with pytest.raises(LeaseLost):
        a.append("m", 1, ["late"])
    assert a.read_events("m", 0, 10) == []
    cb.close()


def test_the_takeover_waits_for_a_write_in_flight_under_the_fence(
    pg_url: str, stores: Callable[[], EventStore]
) -> None:
    """A write under the fence by a session the taker does not end (not one of the holder's
    store sessions): each attempt waits a short while for the row, then gives up until the
    next poll; once the write commits the lease is taken and the write is seen."""
    a, b = stores(), stores()
    ca, cb = coordinator(a, "a", lease_s=0.6), coordinator(b, "b", lease_s=0.6)
    lease = ca.try_acquire()
    assert lease is not None
    a.create_model("m", "{}")
    with psycopg.connect(pg_url) as conn:  # a write in flight: the fence's lock, held
        conn.execute("SELECT 1 FROM streamtree_lease WHERE token = %s FOR SHARE", (lease.token,))
        conn.execute("INSERT INTO streamtree_events (model, seq, event) VALUES ('m', 1, 'in flight')")
        time.sleep(0.7)  # a's lease expires meanwhile
        for _ in range(3):
            assert cb.try_acquire() is None, "the lease was taken while a write under the old token was in flight"
        conn.commit()
    wait_for(lambda: cb.try_acquire() is not None)
    assert cb.holder() is not None and cb.holder().holder == "b"
    assert b.models()[0].last_seq == 1  # the new writer sees the committed write before its first own
    b.append("m", 2, ["b"])
    cb.close()


def test_the_takeover_ends_a_stopped_holders_transaction(pg_url: str, stores: Callable[[], EventStore]) -> None:
    """A write of the holder's own store sessions stopped mid-transaction (its client SIGSTOPped
    after the fence): once the lease expired, the taker ends the holder's sessions, so the
    write is rolled back, the lease is taken at once and the new writer appends unhindered."""
    a, b = stores(), stores()
    assert isinstance(a, PostgresStore)
    ca, cb = coordinator(a, "a", lease_s=0.6), coordinator(b, "b", lease_s=0.6)
    lease = ca.try_acquire()
    assert lease is not None
    a.create_model("m", "{}")
    with psycopg.connect(pg_url, application_name=a.sessions) as conn:  # one of a's sessions
        conn.execute("INSERT INTO streamtree_events (model, seq, event) VALUES ('m', 1, 'in flight')")
        conn.execute("SELECT 1 FROM streamtree_lease WHERE token = %s FOR SHARE", (lease.token,))
        assert cb.try_acquire() is None  # not expired: the holder is alive
        time.sleep(0.7)  # expired, the transaction still open
        wait_for(lambda: cb.try_acquire() is not None)  # not held up by the stopped transaction
        b.append("m", 1, ["b"])  # not held up by the rows a's transaction wrote
        with pytest.raises(psycopg.OperationalError):
            conn.commit()  # its session was ended: nothing of it is written
    assert b.read_events("m", 0, 10) == [(1, "b")]
    with pytest.raises(LeaseLost):  # a's own store: its dead sessions replaced, its writes fenced
        a.append("m", 2, ["late from a"])
    cb.close()


def test_a_clean_close_hands_the_lease_over_at_once(stores: Callable[[], EventStore]) -> None:
    a, b = stores(), stores()
    ca, cb = coordinator(a, "a"), coordinator(b, "b")
    assert ca.try_acquire() is not None
    ca.close()
    assert cb.try_acquire() is not None
    cb.close()


def test_notices_of_appends_creations_and_holders(stores: Callable[[], EventStore]) -> None:
    a, b = stores(), stores()
    ca, cb = coordinator(a, "a"), coordinator(b, "b")
    assert ca.try_acquire() is not None
    notices: list[tuple[str | None, int]] = []
    leases: list[Any] = []
    cb.start(leases.append, lambda model, seq: notices.append((model, seq)))
    wait_for(lambda: (None, 0) in notices)  # the first read after connecting
    a.create_model("m", "{}")
    a.append("m", 1, ["e1", "e2", "e3"])
    a.append("m", 4, ["e"] * 70)
    wait_for(lambda: ("m", 73) in notices)
    assert ("m", 3) in notices
    # the holder is as last polled: a poll that met a's append committing tries again later
    wait_for(lambda: (lease := cb.holder()) is not None and lease.holder == "a")
    ca.close()  # released: b's lease thread takes it and says so
    wait_for(lambda: bool(leases))
    assert leases[0].holder == "b"
    b.append("m", 74, ["b"])
    cb.close()


def test_an_instance_that_is_not_eligible_leaves_a_free_lease_to_one_that_is(stores: Callable[[], EventStore]) -> None:
    """One that cannot serve every model defers: it takes a free lease only once it has been
    free for a further lease length, so an eligible one takes it first, and it still takes it
    when no other does."""
    a, b, c = stores(), stores(), stores()
    ca, cb, cc = coordinator(a, "a", lease_s=0.6), coordinator(b, "b", lease_s=0.6), coordinator(c, "c", lease_s=0.6)
    assert ca.try_acquire() is not None
    cb.set_eligible(False)
    ca.release()  # free now
    assert ca.holder() is None
    assert cb.try_acquire() is None  # not eligible: it waits...
    assert cc.try_acquire() is not None  # ...and an eligible one takes it
    cc.release()
    t0 = time.monotonic()
    wait_for(lambda: cb.try_acquire() is not None)  # no eligible one: it takes it after the further lease length
    assert time.monotonic() - t0 >= 0.5
    cb.set_eligible(True)
    cb.release()
    assert cb.try_acquire() is not None  # eligible again: at once
    for co in (ca, cb, cc):
        co.close()


def test_a_replica_polling_for_the_lease_does_not_make_the_holder_renew_at_every_attempt(
    pg_url: str, stores: Callable[[], EventStore]
) -> None:
    """Each attempt to take the lease used to send the lease's notice (a statement-level trigger
    fires on zero rows too), which woke the attempting instance at once: it tried again about a
    hundred times a second, and the holder, woken too, renewed as often. The notice now comes
    only when the token changes: the holder renews every quarter lease."""
    a, b = stores(), stores()
    ca, cb = coordinator(a, "a", lease_s=2.0), coordinator(b, "b", lease_s=2.0)
    assert ca.try_acquire() is not None
    ca.start(lambda lease: None, lambda model, seq: None)
    cb.start(lambda lease: None, lambda model, seq: None)  # polls every 0.05 s
    seen = set()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        t0 = time.monotonic()
        while time.monotonic() - t0 < 1.5:
            seen.add(conn.execute("SELECT expires_at FROM streamtree_lease").fetchone())
            time.sleep(0.005)
    assert len(seen) <= 6, f"{len(seen)} renewals in 1.5 s of a 2 s lease (one every 0.5 s expected)"
    cb.close()
    ca.close()


def _cluster_pids(root: Any) -> list[int]:
    """The server processes of one test cluster: its postmaster and the postmaster's children."""
    from pathlib import Path

    postmaster = int((Path(root) / "data" / "postmaster.pid").read_text().split()[0])
    children = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == postmaster:  # the parent's pid
            children.append(int(stat.parent.name))
    return [postmaster, *children]


def test_a_holder_whose_database_hangs_gives_the_lease_up_when_it_expires() -> None:
    # a stopped server keeps its connections open: the renewal waited for it without limit, and
    # the instance went on calling itself the writer long after its lease had passed
    import os
    import signal

    from tests.pg import start_cluster, stop_cluster

    cluster = start_cluster()
    frozen: list[int] = []
    try:
        store = open_store(cluster.url())
        leases: list[Any] = []
        c = coordinator(store, "a", lease_s=1.0)
        c.start(leases.append, lambda model, seq: None)
        wait_for(lambda: bool(leases) and leases[-1] is not None)
        frozen = _cluster_pids(cluster.root)  # only this test's cluster
        for pid in frozen:
            os.kill(pid, signal.SIGSTOP)
        stopped = time.monotonic()
        wait_for(lambda: leases[-1] is None, timeout=4.0)
        assert time.monotonic() - stopped < 2.5  # a lease's length, and a quarter of it to notice
        for pid in frozen:
            os.kill(pid, signal.SIGCONT)
        frozen = []
        wait_for(lambda: leases[-1] is not None, timeout=10.0)  # the database answers: taken again
        c.close()
        store.close()
    finally:
        for pid in frozen:
            os.kill(pid, signal.SIGCONT)
        stop_cluster(cluster)
