"""The PostgreSQL engine on a real server: URLs, commit durability, a shared log, lost connections."""

from __future__ import annotations

import psycopg
import pytest

from app.storage import SeqConflict, StorageError, open_store
from app.storage.postgres import PostgresStore
from tests.pg import Cluster


def test_urls_pick_the_engine_and_bad_ones_are_clear(pg_url: str) -> None:
    for url in (pg_url, pg_url.replace("postgresql://", "postgres://", 1)):
        s = open_store(url)
        assert isinstance(s, PostgresStore)
        s.close()
    for bad in ("postgresql://", "sqlite:///x"):
        with pytest.raises(StorageError, match="postgresql://user@host:port/dbname"):
            PostgresStore.from_url(bad)


def test_an_unreachable_server_is_a_storage_error_without_the_password(pg_cluster: Cluster) -> None:
    closed_port = pg_cluster.port + 1 if pg_cluster.port < 65535 else pg_cluster.port - 1
    with pytest.raises(StorageError, match="OperationalError") as info:
        open_store(f"postgresql://postgres:s3cret@127.0.0.1:{closed_port}/postgres")
    assert "s3cret" not in str(info.value)
    with pytest.raises(StorageError, match="does not exist"):
        open_store(pg_cluster.url("no_such_database"))


@pytest.mark.parametrize(("sync", "setting"), [("full", "on"), ("normal", "off")])
def test_sync_sets_synchronous_commit(pg_url: str, sync: str, setting: str) -> None:
    s = open_store(pg_url, sync=sync)  # type: ignore[arg-type]
    with s._pool.connection() as conn:  # type: ignore[attr-defined]
        assert conn.execute("SHOW synchronous_commit").fetchone() == (setting,)
    s.close()


def test_two_instances_share_one_log_and_never_duplicate_a_seq(pg_url: str) -> None:
    a, b = open_store(pg_url), open_store(pg_url)
    a.create_model("m", "{}")
    a.append("m", 1, ["a1", "a2"])
    with pytest.raises(SeqConflict):
        b.append("m", 2, ["b2"])  # another instance's number: refused, nothing written
    b.append("m", 3, ["b3"])
    assert a.read_events("m", 0, 10) == [(1, "a1"), (2, "a2"), (3, "b3")]
    assert [(m.name, m.last_seq) for m in b.models()] == [("m", 3)]
    with pytest.raises(StorageError):
        a.append("ghost", 1, ["e"])  # no such model: the foreign key refuses it
    a.close()
    b.close()


def test_a_lost_connection_is_a_storage_error_then_the_pool_reconnects(pg_url: str) -> None:
    s = open_store(pg_url)
    s.create_model("m", "{}")
    with psycopg.connect(pg_url, autocommit=True) as admin:
        killed = admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE application_name = %s AND datname = current_database()",
            (s.sessions,),
        ).fetchall()  # type: ignore[attr-defined]
    assert killed and all(ok for (ok,) in killed)
    try:
        s.append("m", 1, ["e1"])  # on the dead pooled connection: fails, as the store's own error
    except StorageError:
        s.append("m", 1, ["e1"])  # the pool dropped it: a new connection
    assert s.read_events("m", 0, 10) == [(1, "e1")]
    s.close()
