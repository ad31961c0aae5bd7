"""The EventStore contract, run on every engine (add an engine's URL to STORES to run it there)."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from app.storage import EventStore, IdempotentAnswer, ModelExists, SeqConflict, Snapshot, StorageError, open_store

# Each engine: the URL of a fresh, empty store (given the test's request and temporary directory).
STORES: list[object] = [
    pytest.param(lambda request, tmp: f"sqlite:///{tmp}/store.sqlite3", id="sqlite"),
    pytest.param(lambda request, tmp: request.getfixturevalue("pg_url"), id="postgresql"),
]


@pytest.fixture(params=STORES)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    make: Callable[[pytest.FixtureRequest, Path], str] = request.param
    return make(request, tmp_path)


@pytest.fixture
def store(url: str) -> Iterator[EventStore]:
    s = open_store(url)
    yield s
    try:
        s.close()
    except StorageError:
        pass  # a test closed it already


def test_first_start_is_claimed_once_with_its_model(url: str) -> None:
    # the model is stored with the claim: a first start that failed between the two left a
    # database claimed and without `default`, for good
    s = open_store(url)
    assert s.claim_first_start("default", '{"a":1}') is True
    assert [(m.name, m.config) for m in s.models()] == [("default", '{"a":1}')]
    assert s.claim_first_start("default", '{"b":2}') is False
    s.delete_model("default")
    s.close()
    s = open_store(url)
    assert s.claim_first_start("default", '{"a":1}') is False
    assert s.models() == []  # deleted after the first start: not made again
    s.close()


def test_append_is_numbered_gap_free_and_atomic(store: EventStore) -> None:
    store.create_model("m", "{}")
    store.append("m", 1, ["e1", "e2"])
    store.append("m", 3, ["e3"])
    with pytest.raises(SeqConflict):
        store.append("m", 3, ["e4", "e5"])  # seq 3 is taken: nothing of this append is written
    with pytest.raises(SeqConflict):
        store.append("m", 5, ["e5"])  # would leave a gap at 4
    with pytest.raises(SeqConflict):
        store.append("m", 2, ["e2 again"])
    assert store.read_events("m", 0, 100) == [(1, "e1"), (2, "e2"), (3, "e3")]
    assert store.models()[0].last_seq == 3


def test_large_appends_are_checked_and_atomic_too(store: EventStore) -> None:
    """Appends of a whole batch (an engine may write them another way than a few events)."""
    store.create_model("m", "{}")
    texts = [f'{{"i": {i}, "s": "tab\\t, quote \\" and \\\\ backslash"}}' for i in range(1, 1201)]
    texts[7] = "raw\ttab\nnewline\r and \\N"  # whatever the text, it comes back exactly
    store.append("m", 1, texts[:500])
    store.append("m", 501, texts[500:1000])
    for first in (900, 1002, 1):
        with pytest.raises(SeqConflict):
            store.append("m", first, texts[1000:])
    store.append("m", 1001, texts[1000:])
    assert store.read_events("m", 0, 2000) == list(enumerate(texts, start=1))
    assert store.models()[0].last_seq == 1200


def test_idempotency_keys_are_logged_with_their_events_and_survive_a_reopen(url: str) -> None:
    s = open_store(url)
    s.create_model("m", "{}")
    s.create_model("other", "{}")
    s.append("m", 1, ["e1"])
    first, second = IdempotentAnswer("k-1", "h1", 2, 3), IdempotentAnswer("k-2", "h2", 1, 4)
    s.append("m", 2, ["e2", "e3", "e4"], [first, second], 3600.0)
    assert s.find_idempotent("m", "k-1", 3600.0) == first
    assert s.find_idempotent("m", "k-2", 3600.0) == second
    assert s.find_idempotent("m", "k-3", 3600.0) is None
    assert s.find_idempotent("other", "k-1", 3600.0) is None  # keys are per model
    with pytest.raises(SeqConflict):  # a key logged already: nothing of the append is written
        s.append("m", 5, ["e5"], [IdempotentAnswer("k-1", "h9", 1, 5)], 3600.0)
    assert s.read_events("m", 0, 10) == [(1, "e1"), (2, "e2"), (3, "e3"), (4, "e4")]
    s.close()
    s = open_store(url)  # a restart (or, on PostgreSQL, another instance) finds them
    try:
        assert s.find_idempotent("m", "k-1", 3600.0) == first
        s.delete_model("m")
        s.create_model("m", "{}")
        assert s.find_idempotent("m", "k-1", 3600.0) is None  # gone with the model
    finally:
        s.close()


def test_idempotency_keys_past_the_window_are_forgotten(store: EventStore) -> None:
    store.create_model("m", "{}")
    store.append("m", 1, ["e1"], [IdempotentAnswer("k", "h1", 1, 1)], 3600.0)
    time.sleep(0.05)
    assert store.find_idempotent("m", "k", 3600.0) == IdempotentAnswer("k", "h1", 1, 1)
    assert store.find_idempotent("m", "k", 0.01) is None
    store.append("m", 2, ["e2"], [IdempotentAnswer("k", "h2", 1, 2)], 0.01)  # past the window: used afresh
    assert store.find_idempotent("m", "k", 3600.0) == IdempotentAnswer("k", "h2", 1, 2)


def test_read_events_pages_in_order(store: EventStore) -> None:
    store.create_model("m", "{}")
    texts = [f'{{"i": {i}}}' for i in range(1, 26)]
    store.append("m", 1, texts[:10])
    store.append("m", 11, texts[10:])
    assert store.read_events("m", 2, 1) == [(3, texts[2])]
    pages, after = [], 0
    while page := store.read_events("m", after, 7):
        pages.append(page)
        after = page[-1][0]
    assert [len(p) for p in pages] == [7, 7, 7, 4]
    assert [e for p in pages for e in p] == list(enumerate(texts, start=1))
    assert store.read_events("m", 25, 10) == [] and store.read_events("other", 0, 10) == []


def test_a_batch_is_one_record_and_each_of_its_events_reads_by_seq(url: str, store: EventStore) -> None:
    store.create_model("m", "{}")
    texts = [f'{{"i": {i}}}' for i in range(1, 1004)]
    store.append("m", 1, texts[:1])
    store.append("m", 2, texts[1:1001])  # one row for the thousand (app.storage.records)
    store.append("m", 1002, texts[1001:])
    assert raw(url, "SELECT seq, n FROM {t}events ORDER BY seq") == [(1, 1), (2, 1000), (1002, 2)]
    assert store.models()[0].last_seq == 1003
    for after, limit in [(0, 1), (0, 2), (1, 5), (500, 3), (998, 10), (1000, 2), (1001, 50), (1003, 5), (2000, 5)]:
        assert store.read_events("m", after, limit) == list(enumerate(texts, start=1))[after : after + limit]
    with pytest.raises(SeqConflict):  # inside a record is taken too
        store.append("m", 500, ["again"])


def test_read_events_within_max_bytes_stops_at_the_record_that_passes_it(store: EventStore) -> None:
    # the export's pages: read by size, as events may be megabytes each
    store.create_model("m", "{}")
    small, big = [f'{{"i": {i}}}' for i in range(1, 11)], ["x" * 100_000 for _ in range(5)]
    for seq, text in enumerate(small + big, start=1):
        store.append("m", seq, [text])
    store.append("m", 16, small)  # one record of ten events
    everything = list(enumerate(small + big + small, start=1))
    assert store.read_events("m", 0, 100, max_bytes=10**9) == everything
    assert store.read_events("m", 0, 100, max_bytes=1) == everything[:1]  # at least one record
    assert store.read_events("m", 0, 100, max_bytes=50) == everything[:7]  # 8 or 9 characters each
    assert store.read_events("m", 5, 100, max_bytes=150_000) == everything[5:12]  # the first big one passes it
    assert store.read_events("m", 12, 3, max_bytes=100_001) == everything[12:14]
    assert store.read_events("m", 16, 4, max_bytes=1) == everything[16:20]  # inside one record: all of it
    assert store.read_events("m", 25, 10, max_bytes=1) == []


def test_a_record_that_lost_events_is_a_storage_error(url: str, store: EventStore) -> None:
    store.create_model("m", "{}")
    store.append("m", 1, ["a", "b", "c"])
    raw(url, "UPDATE {t}events SET n = 4 WHERE seq = 1")
    with pytest.raises(StorageError, match="record at seq 1 holds 3 events, not 4"):
        store.read_events("m", 0, 10)


def test_models_are_independent_and_listed_by_name(store: EventStore) -> None:
    store.create_model("b", '{"x": 1}')
    store.create_model("a", "{}")
    store.append("b", 1, ["b1", "b2"])
    store.append("a", 1, ["a1"])
    assert [(m.name, m.config, m.last_seq) for m in store.models()] == [("a", "{}", 1), ("b", '{"x": 1}', 2)]
    assert store.read_events("a", 0, 10) == [(1, "a1")]
    store.create_model("B", "{}")
    store.create_model("a.b", "{}")
    assert [m.name for m in store.models()] == ["B", "a", "a.b", "b"]  # byte order on every engine


def test_events_keep_their_exact_text(store: EventStore) -> None:
    store.create_model("m", "{}")
    text = '{"x":{"f":0.1,"s":"é ☃ \\"q\\"","n":null},"y":true}'
    store.append("m", 1, [text])
    assert store.read_events("m", 0, 1) == [(1, text)]


def test_snapshots_newest_first_and_pruned(store: EventStore) -> None:
    store.create_model("m", "{}")
    for seq in (10, 20, 30):
        store.save_snapshot("m", Snapshot(seq, bytes([seq, 0, 255]), f'{{"s": {seq}}}'), keep=2)
    assert store.snapshots("m") == [
        Snapshot(30, bytes([30, 0, 255]), '{"s": 30}'),
        Snapshot(20, bytes([20, 0, 255]), '{"s": 20}'),
    ]
    store.save_snapshot("m", Snapshot(30, b"again", "{}"), keep=2)  # the same seq again replaces it
    assert [(s.seq, s.model_bytes) for s in store.snapshots("m")] == [(30, b"again"), (20, bytes([20, 0, 255]))]
    assert store.snapshots("other") == []


def raw(url: str, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Run ``sql`` on the store's database with its own driver (PostgreSQL's tables have the
    ``streamtree_`` prefix; ``{t}`` stands for it)."""
    if url.startswith("sqlite:///"):
        with sqlite3.connect(url.removeprefix("sqlite:///")) as db:
            return db.execute(sql.format(t=""), params).fetchall()
    with psycopg.connect(url, autocommit=True) as conn:
        cur = conn.execute(sql.format(t="streamtree_").replace("?", "%s"), params)
        return cur.fetchall() if cur.description else []


def test_snapshots_larger_than_a_piece_are_stored_in_pieces_and_read_back_whole(url: str, store: EventStore) -> None:
    store.piece_bytes = 7
    store.create_model("m", "{}")
    data = bytes(range(256)) * 3 + b"tail"  # 772 bytes: 110 whole pieces and one of 2
    for seq, blob in [(1, b""), (2, b"x"), (3, b"exactly"), (4, data)]:
        store.save_snapshot("m", Snapshot(seq, blob, f'{{"s": {seq}}}'), keep=10)
        assert store.read_snapshot("m", seq) == Snapshot(seq, blob, f'{{"s": {seq}}}')
    assert store.snapshot_seqs("m") == [4, 3, 2, 1]
    # no stored value is larger than a piece: the snapshot row holds none of the bytes
    assert raw(url, "SELECT max(length(bytes)), count(*) FROM {t}snapshot_pieces WHERE seq = 4") == [(7, 111)]
    assert raw(url, "SELECT length(model_bytes) FROM {t}snapshots WHERE seq = 4") == [(0,)]
    store.save_snapshot("m", Snapshot(4, b"again", "{}"), keep=2)  # the same seq again: its pieces replaced
    assert store.snapshots("m") == [Snapshot(4, b"again", "{}"), Snapshot(3, b"exactly", '{"s": 3}')]
    assert raw(url, "SELECT DISTINCT seq FROM {t}snapshot_pieces ORDER BY seq") == [(3,), (4,)]  # pruned with theirs
    store.delete_model("m")
    assert raw(url, "SELECT count(*) FROM {t}snapshot_pieces") == [(0,)]


def test_a_corrupt_or_missing_piece_is_a_storage_error_and_older_snapshots_still_read(
    url: str, store: EventStore
) -> None:
    store.piece_bytes = 4
    store.create_model("m", "{}")
    store.save_snapshot("m", Snapshot(1, b"older snapshot", "{}"), keep=3)
    store.save_snapshot("m", Snapshot(2, b"newer snapshot", "{}"), keep=3)
    store.save_snapshot("m", Snapshot(3, b"newest snapshot", "{}"), keep=3)
    raw(url, "UPDATE {t}snapshot_pieces SET bytes = ? WHERE seq = 3 AND piece = 1", (b"XXXX",))  # same length
    with pytest.raises(StorageError, match="seq 3 is corrupt"):
        store.read_snapshot("m", 3)
    raw(url, "DELETE FROM {t}snapshot_pieces WHERE seq = 2 AND piece = 3")
    with pytest.raises(StorageError, match="seq 2 lacks its piece 3"):
        store.read_snapshot("m", 2)
    with pytest.raises(StorageError, match="no snapshot at seq 9"):
        store.read_snapshot("m", 9)
    assert store.snapshot_seqs("m") == [3, 2, 1]
    assert store.read_snapshot("m", 1) == Snapshot(1, b"older snapshot", "{}")


def test_create_twice_is_model_exists(store: EventStore) -> None:
    store.create_model("m", '{"a": 1}')
    with pytest.raises(ModelExists):
        store.create_model("m", "{}")
    assert issubclass(ModelExists, StorageError) and issubclass(SeqConflict, StorageError)


def test_delete_removes_everything_and_name_is_reusable(store: EventStore) -> None:
    store.create_model("m", '{"a": 1}')
    store.create_model("keep", "{}")
    store.append("m", 1, ["e"])
    store.append("keep", 1, ["k"])
    store.save_snapshot("m", Snapshot(1, b"x", "{}"), keep=2)
    store.delete_model("m")
    assert [m.name for m in store.models()] == ["keep"]
    assert store.read_events("m", 0, 10) == [] and store.snapshots("m") == []
    store.delete_model("m")  # already gone: nothing to do
    store.create_model("m", "{}")
    assert store.models()[1].last_seq == 0
    store.append("m", 1, ["new"])  # the numbering starts over
    assert store.read_events("keep", 0, 10) == [(1, "k")]


def test_everything_survives_reopening(url: str) -> None:
    s = open_store(url)
    s.create_model("m", '{"a": 1}')
    s.append("m", 1, ["e1", "e2"])
    s.save_snapshot("m", Snapshot(2, b"bytes", "{}"), keep=1)
    s.close()
    s = open_store(url)
    assert [(m.name, m.config, m.last_seq) for m in s.models()] == [("m", '{"a": 1}', 2)]
    assert s.read_events("m", 0, 10) == [(1, "e1"), (2, "e2")]
    assert s.snapshots("m") == [Snapshot(2, b"bytes", "{}")]
    s.close()


def test_engine_failures_are_storage_errors(store: EventStore) -> None:
    """Whatever the engine's driver raises leaves the store as a StorageError."""
    store.create_model("m", "{}")
    store.close()
    for call in (
        store.models,
        lambda: store.append("m", 1, ["e"]),
        lambda: store.read_events("m", 0, 1),
        lambda: store.create_model("n", "{}"),
        lambda: store.snapshots("m"),
    ):
        with pytest.raises(StorageError):
            call()
