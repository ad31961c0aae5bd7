"""The PostgreSQL engine on a real server: URLs, commit durability, a shared log, lost connections."""

from __future__ import annotations

import time

import psycopg
import pytest

from app.storage import SeqConflict, StorageError, open_store
from app.storage.postgres import CHECK_IDLE_AFTER, PostgresStore
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
    # libpq quotes a malformed URL, or its bad part: the password is hidden there too
    for url in (
        "postgresql://st:s3cret@[::1/st",
        "postgresql://st:s3cret%zz@127.0.0.1:1/st",
        "postgresql://st:s3%63ret@[::1/st",  # and percent-decoded
        "postgresql://st@[::1/st?password=s3cret",
    ):
        with pytest.raises(StorageError) as info:
            open_store(url)
        assert "s3cret" not in str(info.value) and "s3%63ret" not in str(info.value) and "***" in str(info.value)


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


def test_a_connection_ended_while_idle_is_replaced_before_it_is_used(pg_url: str) -> None:
    # as a server's idle_session_timeout, a proxy or a NAT ends it: the first call after every
    # quiet period failed (a learn answered 503 and its model rebuilt)
    s = open_store(pg_url)
    s.create_model("m", "{}")
    with psycopg.connect(pg_url, autocommit=True) as admin:
        killed = admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE application_name = %s AND datname = current_database()",
            (s.sessions,),
        ).fetchall()  # type: ignore[attr-defined]
    assert killed and all(ok for (ok,) in killed)
    time.sleep(CHECK_IDLE_AFTER + 0.2)  # as an idle timeout ends it: after a quiet period
    s.append("m", 1, ["e1"])  # the pool checks a connection idle that long: a new one
    assert s.read_events("m", 0, 10) == [(1, "e1")]
    s.close()


def test_after_an_outage_the_store_answers_within_seconds_of_the_servers_return(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # psycopg's pool retried at doubling intervals: after a 35 s outage the store failed for
    # 22 s more (each call waiting its timeout), after 75 s for 41 s
    import time

    import app.storage.postgres
    from tests.pg import start_cluster, stop_cluster

    monkeypatch.setattr(app.storage.postgres, "CONNECT_TIMEOUT", 2.0)
    cluster = start_cluster()
    try:
        s = open_store(cluster.url())
        s.create_model("m", "{}")
        cluster.pg_ctl("stop", "-m", "fast", "-w")
        down_since = time.monotonic()
        while time.monotonic() - down_since < 17:  # attempts 1, 2, 4, 8... s apart: at 1, 3, 7, 15, 31 s
            with pytest.raises(StorageError):
                s.models()
        cluster.start(cluster.options())
        back = time.monotonic()
        while True:
            try:
                assert [m.name for m in s.models()] == ["m"]
                break
            except StorageError:
                assert time.monotonic() - back < 3, "the store is still failing after the server came back"
        s.close()
    finally:
        stop_cluster(cluster)
