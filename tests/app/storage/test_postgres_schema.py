"""The PostgreSQL schema: created at first open, old databases migrated, newer ones refused."""

from __future__ import annotations

import threading

import psycopg
import pytest

from app.storage import Snapshot, StorageError, open_store
from app.storage.postgres_schema import MIGRATIONS, migrate, schema_version


def columns(conn: psycopg.Connection, table: str) -> dict[str, str]:  # type: ignore[type-arg]
    rows = conn.execute(
        "SELECT column_name, is_nullable FROM information_schema.columns WHERE table_name = %s", (table,)
    ).fetchall()
    return dict(rows)


def test_a_new_database_gets_the_newest_schema(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        assert schema_version(conn) == 0
    open_store(pg_url).close()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        assert schema_version(conn) == len(MIGRATIONS) == 6
        assert columns(conn, "streamtree_events") == {
            "model": "NO",
            "seq": "NO",
            "event": "NO",
            "logged_at": "NO",
            "idempotency_key": "YES",
            "n": "NO",
        }
        compression = (
            "SELECT attcompression FROM pg_attribute WHERE attrelid = 'streamtree_events'::regclass AND attname = %s"
        )
        assert conn.execute(compression, ("event",)).fetchone() == ("l",)  # lz4: Debian's server has it
        assert migrate(conn) == (6, 6)  # already there: nothing to do
        assert conn.execute("SELECT count(*) FROM streamtree_schema_version").fetchone() == (1,)


def test_a_version_1_database_is_migrated_with_its_data(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        assert migrate(conn, target=1) == (0, 1)
        assert "idempotency_key" not in columns(conn, "streamtree_events")
        # what a version-1 service wrote
        conn.execute("INSERT INTO streamtree_models (name, config) VALUES ('m', '{\"a\": 1}')")
        conn.execute("INSERT INTO streamtree_events (model, seq, event) VALUES ('m', 1, 'e1'), ('m', 2, 'e2')")
        conn.execute(
            "INSERT INTO streamtree_snapshots (model, seq, model_bytes, state) VALUES ('m', 2, '\\x00ff'::bytea, '{}')"
        )
    s = open_store(pg_url)
    assert [(m.name, m.config, m.last_seq) for m in s.models()] == [("m", '{"a": 1}', 2)]
    assert s.read_events("m", 0, 10) == [(1, "e1"), (2, "e2")]
    assert s.snapshots("m") == [Snapshot(2, b"\x00\xff", "{}")]  # written whole, before pieces: read as it was
    s.append("m", 3, ["e3", "e4"])  # one record after the old rows of one event each
    assert s.read_events("m", 1, 10) == [(2, "e2"), (3, "e3"), (4, "e4")]
    assert s.models()[0].last_seq == 4
    s.save_snapshot("m", Snapshot(3, b"new", "{}"), keep=2)  # in pieces, beside the old one
    assert s.snapshots("m") == [Snapshot(3, b"new", "{}"), Snapshot(2, b"\x00\xff", "{}")]
    s.close()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        assert schema_version(conn) == 6
        rows = conn.execute("SELECT seq, n, idempotency_key FROM streamtree_events ORDER BY seq").fetchall()
        assert rows == [(1, 1, None), (2, 1, None), (3, 2, None)]


def test_a_newer_schema_is_refused(pg_url: str) -> None:
    open_store(pg_url).close()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("UPDATE streamtree_schema_version SET version = %s", (len(MIGRATIONS) + 1,))
    with pytest.raises(StorageError, match=f"version {len(MIGRATIONS) + 1}, newer than this streamtree's"):
        open_store(pg_url)


def test_instances_starting_together_migrate_once(pg_url: str) -> None:
    errors: list[BaseException] = []

    def start() -> None:
        try:
            open_store(pg_url).close()
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=start) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    with psycopg.connect(pg_url, autocommit=True) as conn:
        assert conn.execute("SELECT version FROM streamtree_schema_version").fetchall() == [(len(MIGRATIONS),)]
