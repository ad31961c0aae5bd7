"""The SQLite engine: its URLs, WAL with full sync, its exceptions kept inside."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from app.storage import IdempotentAnswer, StorageError
from app.storage.sqlite import SQLiteStore


def test_wal_and_full_sync(tmp_path: Path) -> None:
    s = SQLiteStore(tmp_path / "db", sync="full")
    assert s._db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert s._db.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    s.close()
    s = SQLiteStore(tmp_path / "db", sync="normal")
    assert s._db.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
    s.close()


def test_urls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    absolute = SQLiteStore.from_url(f"sqlite:///{tmp_path}/a/b.sqlite3")  # sqlite:////abs/path
    assert absolute.path == f"{tmp_path}/a/b.sqlite3" and (tmp_path / "a" / "b.sqlite3").exists()
    absolute.close()
    monkeypatch.chdir(tmp_path)
    SQLiteStore.from_url("sqlite:///rel/c.sqlite3").close()
    assert (tmp_path / "rel" / "c.sqlite3").exists()
    memory = SQLiteStore.from_url("sqlite:///:memory:")
    memory.create_model("m", "{}")
    assert memory.models()[0].name == "m"
    for bad in ("sqlite://", "sqlite:///", "postgresql://host/db"):
        with pytest.raises(StorageError, match="sqlite:///"):
            SQLiteStore.from_url(bad)


def test_a_failed_commit_leaves_no_open_transaction(tmp_path: Path) -> None:
    s = SQLiteStore(tmp_path / "db")
    s.create_model("m", "{}")
    other = sqlite3.connect(tmp_path / "db", timeout=0)
    other.execute("BEGIN IMMEDIATE")  # another writer holds the lock: our BEGIN fails (busy)
    s._db.execute("PRAGMA busy_timeout = 0")
    with pytest.raises(StorageError, match="OperationalError"):
        s.append("m", 1, ["e"])
    other.rollback()
    other.close()
    assert not s._db.in_transaction
    s.append("m", 1, ["e"])  # the store still works
    assert s.read_events("m", 0, 5) == [(1, "e")]
    s.close()


def test_a_database_made_before_idempotency_keys_opens_and_keeps_its_log(tmp_path: Path) -> None:
    with sqlite3.connect(tmp_path / "db") as db:  # the schema of a service without the idempotency table
        db.executescript(
            "CREATE TABLE models (name TEXT PRIMARY KEY, config TEXT NOT NULL, created_at REAL NOT NULL);"
            "CREATE TABLE events (model TEXT NOT NULL, seq INTEGER NOT NULL, event TEXT NOT NULL, "
            "PRIMARY KEY (model, seq)) WITHOUT ROWID;"
            "INSERT INTO models VALUES ('m', '{}', 0); INSERT INTO events VALUES ('m', 1, 'e1');"
        )
    s = SQLiteStore(tmp_path / "db")
    try:
        assert s.read_events("m", 0, 10) == [(1, "e1")]
        assert s.find_idempotent("m", "k", 60.0) is None
        s.append("m", 2, ["e2"], [IdempotentAnswer("k", "h", 1, 2)], 60.0)
        assert s.find_idempotent("m", "k", 60.0) == IdempotentAnswer("k", "h", 1, 2)
        s.append("m", 3, ["e3", "e4"])  # a record of two after the rows of one event each
        assert s.read_events("m", 1, 10) == [(2, "e2"), (3, "e3"), (4, "e4")]
        assert s.models()[0].last_seq == 4
    finally:
        s.close()


def test_one_process_at_a_time_owns_a_database(tmp_path: Path) -> None:
    # a second server on the same file was a second writer: each rebuilt models from the
    # other's writes, and a delete on one made the other's acknowledged events orphans
    first, second = SQLiteStore(tmp_path / "db.sqlite3"), SQLiteStore(tmp_path / "db.sqlite3")
    first.own()
    with pytest.raises(StorageError, match="another streamtree server uses .*db.sqlite3"):
        second.own()
    first.close()
    second.own()  # released with the store (and by the kernel with a killed process)
    second.close()
    memory = SQLiteStore(":memory:")
    memory.own()
    memory.close()


def test_a_database_of_another_program_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "theirs.sqlite3"
    with sqlite3.connect(path) as theirs:
        theirs.executescript("CREATE TABLE models (id INTEGER, weights BLOB); CREATE TABLE runs (id INTEGER);")
    before = path.read_bytes()
    with pytest.raises(StorageError, match=r"theirs.sqlite3 is not a streamtree database \(its tables: models, runs\)"):
        SQLiteStore(path)
    assert path.read_bytes() == before  # no table added, no WAL mode set
    assert not (tmp_path / "theirs.sqlite3-wal").exists()


def fails_every_call(s: SQLiteStore, seq: int, match: str) -> None:
    """Every call of ``s`` (an append of event ``seq``, a read, the list of models) raises
    :class:`StorageError` matching ``match``."""
    for call in (lambda: s.append("m", seq, [f"e{seq}"]), lambda: s.read_events("m", 0, 10), s.models):
        with pytest.raises(StorageError, match=match):
            call()


@pytest.mark.parametrize("removed", ["database", "wal", "directory"])
def test_a_database_removed_under_a_running_store_fails_every_call_after(
    tmp_path: Path, removed: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # its commits went on into the unlinked file (in WAL mode SQLite does not notice): every
    # learn was acknowledged and lost, and the next start began an empty database
    import shutil

    import app.storage.sqlite
    import app.storage.sqlite_files

    monkeypatch.setattr(app.storage.sqlite_files, "WAL_CHECK_EVERY", 0.0)  # the WAL's identity at every call too

    path = tmp_path / "data" / "streamtree.sqlite3"
    s = SQLiteStore(path)
    s.own()
    s.create_model("m", "{}")
    s.append("m", 1, ["e1"])
    if removed == "database":
        path.unlink()
    elif removed == "wal":
        Path(f"{path}-wal").unlink()
    else:
        shutil.rmtree(path.parent)
    fails_every_call(s, 2, "was removed or replaced while this server ran")
    s.close()
    if removed == "database":  # the lock shows a database was there: not a first start
        with pytest.raises(StorageError, match="is missing, but .*lock shows that a server used it"):
            SQLiteStore(path)


def test_a_checkpoint_that_fails_at_close_is_a_warning_and_the_wal_keeps_the_events(tmp_path: Path, caplog) -> None:  # type: ignore[no-untyped-def]
    # on a full disk it raised out of the service's shutdown (a traceback, "shutdown failed")
    class FullDisk:
        def __init__(self, real: sqlite3.Connection) -> None:
            self.real = real

        def execute(self, sql: str, *args: object) -> object:
            if sql.startswith("PRAGMA wal_checkpoint"):
                raise sqlite3.OperationalError("database or disk is full")
            return self.real.execute(sql, *args)

        def close(self) -> None:
            self.real.close()

    s = SQLiteStore(tmp_path / "db")
    s.create_model("m", "{}")
    s.append("m", 1, ["e1"])
    s._db = FullDisk(s._db)  # type: ignore[assignment]
    s.close()
    assert "the WAL was not checkpointed at close" in caplog.text
    again = SQLiteStore(tmp_path / "db")
    assert again.read_events("m", 0, 10) == [(1, "e1")]
    again.close()


@pytest.fixture
def checked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[SQLiteStore, Path]:
    """An owned store of model "m" whose WAL is checked at every call, and its path."""
    import app.storage.sqlite
    import app.storage.sqlite_files

    monkeypatch.setattr(app.storage.sqlite_files, "WAL_CHECK_EVERY", 0.0)
    path = tmp_path / "streamtree.sqlite3"
    s = SQLiteStore(path)
    s.own()
    s.create_model("m", "{}")
    return s, path


@pytest.mark.parametrize("written_past", [False, True])
def test_a_wal_cut_short_under_a_running_store_fails_every_call_after(
    checked: tuple[SQLiteStore, Path], written_past: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a WAL truncated (say by a clean-up script) kept its inode: commits went on past the cut,
    # every one acknowledged, and the next open took the zeroed header for an empty WAL and
    # started without the model and its events
    import app.storage.sqlite
    import app.storage.sqlite_files

    s, path = checked
    for seq in (1, 2, 3):
        s.append("m", seq, [f"e{seq}"])
    if written_past:  # a commit lands after the cut and before the next check of the WAL
        monkeypatch.setattr(app.storage.sqlite_files, "WAL_CHECK_EVERY", 1e9)
    with open(f"{path}-wal", "r+b") as wal:
        wal.truncate(0)
    if written_past:
        s.append("m", 4, ["e4"])
        monkeypatch.setattr(app.storage.sqlite_files, "WAL_CHECK_EVERY", 0.0)
    fails_every_call(s, 5, "-wal was cut short while this server ran")
    s.close()


def test_checkpoints_that_restart_the_wal_are_not_taken_for_a_cut(checked: tuple[SQLiteStore, Path]) -> None:
    # SQLite's automatic checkpoint (every 1,000 pages) rewrites the WAL from its start
    s, path = checked
    sizes = []
    for seq in range(1, 401):
        s.append("m", seq, ["x" * 20_000])
        sizes.append(Path(f"{path}-wal").stat().st_size)
    assert len(s.read_events("m", 0, 1000)) == 400
    assert max(sizes) < 20_000 * 400  # the WAL was restarted (checkpointed) along the way
    s.close()


def test_a_copy_over_the_running_database_fails_every_call_after(checked: tuple[SQLiteStore, Path]) -> None:
    # `cp backup streamtree.sqlite3` writes into the same inode: commits went on, acknowledged,
    # into a database the next start found malformed, every model's events out of reach
    s, path = checked
    for seq in range(1, 401):  # past SQLite's automatic checkpoints: this store's own writes into the file
        s.append("m", seq, ["x" * 20_000])
    assert len(s.read_events("m", 0, 1000)) == 400  # its own checkpoints are not taken for another's
    backup = path.with_name("backup.sqlite3")
    with sqlite3.connect(path) as live, sqlite3.connect(backup) as copy:
        live.backup(copy)
    with open(path, "r+b") as f:  # as cp writes: same inode
        f.write(backup.read_bytes())
    fails_every_call(s, 401, "was written by another program while this server ran")
    s.close()


def test_a_change_of_the_databases_mode_or_a_hard_link_to_it_is_not_a_write(checked: tuple[SQLiteStore, Path]) -> None:
    # they move its ctime, which the watch compared too: every call then failed until a restart
    s, path = checked
    s.append("m", 1, ["e1"])
    path.chmod(0o640)
    os.link(path, path.with_name("hard-link.sqlite3"))
    s.append("m", 2, ["e2"])
    assert s.read_events("m", 0, 10) == [(1, "e1"), (2, "e2")]
    s.close()


@pytest.mark.parametrize("why", ["read-only", "full"])
def test_a_directory_that_cannot_take_the_database_is_named_as_the_reason(
    tmp_path: Path, why: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # SQLite said "unable to open database file" (a read-only mount) or "disk I/O error" (a full disk)
    import os
    from types import SimpleNamespace

    import app.storage.sqlite
    import app.storage.sqlite_files

    def refused(*args: object, **kwargs: object) -> sqlite3.Connection:
        raise sqlite3.OperationalError("unable to open database file")

    monkeypatch.setattr(app.storage.sqlite.sqlite3, "connect", refused)
    if why == "read-only":  # as root, a mode does not refuse: the check is what is tested
        monkeypatch.setattr(app.storage.sqlite_files.os, "access", lambda path, mode: False)
        expected = f"the data directory {tmp_path} is not writable"
    else:
        monkeypatch.setattr(
            app.storage.sqlite_files.os, "statvfs", lambda path: SimpleNamespace(f_bavail=3, f_frsize=4096)
        )
        expected = f"the disk holding {tmp_path} is full"
    with pytest.raises(StorageError) as refusal:
        SQLiteStore(tmp_path / "streamtree.sqlite3")
    assert (
        str(refusal.value)
        == f"{expected}{' (SQLite makes its -wal and -shm files there)' if why == 'read-only' else ''} (OperationalError: unable to open database file)"
    )
    assert os.path.isdir(tmp_path)


def test_a_lock_file_another_user_made_is_one_line_naming_it_and_the_uids(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a volume first used by a root container: the image's user got a PermissionError traceback
    import os

    import app.storage.sqlite

    def refused(file: object, *args: object, **kwargs: object) -> object:
        raise PermissionError(13, "Permission denied")

    store = SQLiteStore(tmp_path / "streamtree.sqlite3")
    monkeypatch.setattr(app.storage.sqlite, "open", refused, raising=False)
    with pytest.raises(StorageError) as refusal:
        store.own()
    assert str(refusal.value) == (
        f"cannot use {tmp_path}/streamtree.sqlite3.lock: Permission denied (this process runs as uid "
        f"{os.getuid()}; in {tmp_path}, owned by uid {os.stat(tmp_path).st_uid})"
    )


def test_a_data_directory_this_user_cannot_enter_is_one_line_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a private host directory (mode 700, another owner) bind-mounted as /data: a traceback
    # from Path.exists() before the store's own checks
    import os

    real = Path.exists

    def exists(self: Path, *args: object, **kwargs: object) -> bool:
        if self.parent == tmp_path:
            raise PermissionError(13, "Permission denied")
        return real(self)

    monkeypatch.setattr(Path, "exists", exists)
    with pytest.raises(StorageError) as refusal:
        SQLiteStore(tmp_path / "streamtree.sqlite3")
    assert str(refusal.value) == (
        f"cannot use {tmp_path}: Permission denied (this process runs as uid {os.getuid()}; "
        f"owned by uid {os.stat(tmp_path).st_uid})"
    )
