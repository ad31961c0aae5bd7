"""The SQLite store: models, append-only log, snapshots, atomicity."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from app.storage import Snapshot, Store


def test_first_start_is_claimed_once(tmp_path: Path) -> None:
    s = Store(tmp_path)
    assert s.claim_first_start() is True
    assert s.claim_first_start() is False
    s.close()
    assert Store(tmp_path).claim_first_start() is False


def test_append_is_numbered_and_atomic(tmp_path: Path) -> None:
    s = Store(tmp_path)
    s.create_model("m", "{}")
    s.append("m", 1, ["e1", "e2"])
    s.append("m", 3, ["e3"])
    with pytest.raises(sqlite3.IntegrityError):
        s.append("m", 3, ["e4", "e5"])  # seq 3 is taken: nothing of this append is written
    with pytest.raises(sqlite3.IntegrityError):
        s.append("m", 5, ["e5"])  # would leave a gap at 4
    assert list(s.events_after("m", 0)) == [(1, "e1"), (2, "e2"), (3, "e3")]
    assert list(s.events_after("m", 2)) == [(3, "e3")]
    assert s.models()[0].last_seq == 3


def test_snapshots_newest_first_and_pruned(tmp_path: Path) -> None:
    s = Store(tmp_path)
    s.create_model("m", "{}")
    for seq in (10, 20, 30):
        s.save_snapshot("m", Snapshot(seq, bytes([seq]), "{}"), keep=2)
    assert [snap.seq for snap in s.snapshots("m")] == [30, 20]
    assert s.snapshots("m")[0].model_bytes == bytes([30])


def test_delete_removes_everything_and_name_is_reusable(tmp_path: Path) -> None:
    s = Store(tmp_path)
    s.create_model("m", '{"a": 1}')
    s.append("m", 1, ["e"])
    s.save_snapshot("m", Snapshot(1, b"x", "{}"), keep=2)
    with pytest.raises(sqlite3.IntegrityError):
        s.create_model("m", "{}")
    s.delete_model("m")
    assert s.models() == [] and list(s.events_after("m", 0)) == [] and s.snapshots("m") == []
    s.create_model("m", "{}")
    assert s.models()[0].last_seq == 0


def test_wal_and_full_sync(tmp_path: Path) -> None:
    s = Store(tmp_path, sync="full")
    assert s._db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert s._db.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
