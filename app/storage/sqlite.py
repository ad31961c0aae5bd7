"""The SQLite engine: one embedded database file (WAL) holding every model.

A snapshot's model bytes are rows of ``snapshot_pieces`` (at most ``piece_bytes`` each, with
a CRC-32), so no blob comes near SQLite's 1 GB limit; a database written before pieces keeps
its snapshots' bytes in ``snapshots.model_bytes`` (``pieces`` NULL) and they read as before.

``sqlite3`` and its exceptions stay in this module: every failure leaves it as a
:class:`~app.storage.base.StorageError`.
"""

from __future__ import annotations

import fcntl
import logging
import sqlite3
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Self

from .base import (
    PIECE_BYTES,
    EventStore,
    IdempotentAnswer,
    ModelExists,
    SeqConflict,
    Snapshot,
    StorageError,
    StoredModel,
    Sync,
    piece_crc,
    pieces,
    read_pieces,
)
from .records import expand, records, seq_range, within
from .sqlite_files import FileWatch, refused_access, why_not_writable

__all__ = ["SQLiteStore"]

log = logging.getLogger("streamtree.app")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS models (
    name TEXT PRIMARY KEY,
    config TEXT NOT NULL,
    created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS events (
    model TEXT NOT NULL,
    seq INTEGER NOT NULL,
    event TEXT NOT NULL,
    n INTEGER NOT NULL DEFAULT 1,
    PRIMARY KEY (model, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS snapshots (
    model TEXT NOT NULL,
    seq INTEGER NOT NULL,
    model_bytes BLOB NOT NULL,
    state TEXT NOT NULL,
    created_at REAL NOT NULL,
    pieces INTEGER,
    size INTEGER,
    PRIMARY KEY (model, seq)
);
CREATE TABLE IF NOT EXISTS snapshot_pieces (
    model TEXT NOT NULL,
    seq INTEGER NOT NULL,
    piece INTEGER NOT NULL,
    bytes BLOB NOT NULL,
    crc INTEGER NOT NULL,
    PRIMARY KEY (model, seq, piece)
);
CREATE TABLE IF NOT EXISTS idempotency (
    model TEXT NOT NULL,
    key TEXT NOT NULL,
    body_hash TEXT NOT NULL,
    learned INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    created_at REAL NOT NULL,
    PRIMARY KEY (model, key)
);
CREATE INDEX IF NOT EXISTS idempotency_age ON idempotency (model, created_at);
"""

#: Columns added since the first release (in the rows written before: NULL, or the default).
#: ``events.n``: a row is a record of ``n`` events (:mod:`app.storage.records`); one before.
_ADDED = {"snapshots": ("pieces INTEGER", "size INTEGER"), "events": ("n INTEGER NOT NULL DEFAULT 1",)}

#: The seq of a model's last logged event (0 without any), from its newest record.
_LAST_SEQ = "COALESCE((SELECT seq + n - 1 FROM events e WHERE e.model = {} ORDER BY seq DESC LIMIT 1), 0)"


#: The tables and columns every streamtree database has had since its first release.
_CORE = {"models": {"name", "config"}, "events": {"model", "seq", "event"}}


def _check_ours(db: sqlite3.Connection, path: Path | str) -> None:
    """Raise :class:`StorageError` unless the database is empty or streamtree's: a file of
    another program is refused before streamtree adds its tables to it."""
    tables = sorted(row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'"))
    if not tables:
        return
    for table, needed in _CORE.items():
        have = {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
        if not needed <= have:
            shown = ", ".join(tables[:5]) + (", ..." if len(tables) > 5 else "")
            raise StorageError(
                f"{path} is not a streamtree database (its tables: {shown}); "
                "give the server a data directory or URL of its own"
            )


@contextmanager
def _translated(conflict: type[StorageError] = StorageError) -> Iterator[None]:
    """Re-raise SQLite's exceptions as the store's: a constraint violation as ``conflict``."""
    try:
        yield
    except sqlite3.IntegrityError as exc:
        raise conflict(str(exc)) from None
    except sqlite3.Error as exc:
        raise StorageError(f"{type(exc).__name__}: {exc}") from None


class SQLiteStore(EventStore):
    """The database file at ``path``.

    Parameters
    ----------
    path
        The database file (its directory is created if missing), or ``":memory:"``.
    sync
        SQLite ``synchronous`` mode: ``"full"`` makes every commit reach the disk (fsync)
        before it returns; ``"normal"`` survives a killed process but not a power cut.
    """

    def __init__(self, path: Path | str, sync: Sync = "full", piece_bytes: int = PIECE_BYTES) -> None:
        if piece_bytes < 1:
            raise ValueError(
                f"piece_bytes is the most bytes of a snapshot stored in one blob, at least 1; got {piece_bytes!r}"
            )
        self.path = path
        self.piece_bytes = piece_bytes
        self._owner: IO[str] | None = None
        self._released = False  # closed by a refused own()
        try:
            removed = str(path) != ":memory:" and not Path(path).exists() and Path(f"{path}.lock").exists()
        except OSError as exc:  # a directory this user cannot enter (a private one mounted in)
            raise StorageError(refused_access(Path(path).parent, exc)) from None
        if removed:
            # the lock a server takes (own) outlives the database: it was removed, not never made
            raise StorageError(
                f"{path} is missing, but {path}.lock shows that a server used it: restore the "
                "database, or remove the lock file to start with an empty one"
            )
        try:
            self._open(path, sync)
        except StorageError as exc:
            why = None if str(path) == ":memory:" else why_not_writable(Path(path).parent)
            if why is None:
                raise
            raise StorageError(f"{why} ({exc})") from None
        self._files = None if str(path) == ":memory:" else FileWatch(str(path))

    def _open(self, path: Path | str, sync: Sync) -> None:
        """Connect to the database at ``path`` (made if missing) and set it up for this store."""
        with _translated():
            if str(path) != ":memory:":
                try:
                    Path(path).parent.mkdir(parents=True, exist_ok=True)
                except OSError as exc:  # e.g. a file on the way, no permission
                    raise StorageError(
                        f"cannot make the directory {Path(path).parent}: {exc.strerror or exc}"
                    ) from None
            self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
            try:
                _check_ours(self._db, path)  # before anything is written to it
            except StorageError:
                self._db.close()
                raise
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(f"PRAGMA synchronous={sync.upper()}")
            self._db.execute("PRAGMA foreign_keys=ON")
            self._db.executescript(_SCHEMA)
            for table, columns in _ADDED.items():  # a database made before them
                have = {row[1] for row in self._db.execute(f"PRAGMA table_info({table})")}
                for column in columns:
                    if column.split()[0] not in have:
                        self._db.execute(f"ALTER TABLE {table} ADD COLUMN {column}")

    def _check_files(self) -> None:
        """:meth:`FileWatch.check` of the database's files (none for ``:memory:``)."""
        if self._files is not None:
            self._files.check()

    @classmethod
    def from_url(cls, url: str, sync: Sync = "full") -> Self:
        """Open ``sqlite:///relative/path``, ``sqlite:////absolute/path`` or ``sqlite:///:memory:``."""
        prefix = "sqlite:///"
        if not url.startswith(prefix) or len(url) == len(prefix):
            raise StorageError(f"An SQLite URL is {prefix}<path to the database file>; got {url!r}")
        return cls(url[len(prefix) :], sync)

    def close(self) -> None:
        """Checkpoint the WAL into the main file and close the connection (and the claim)."""
        if self._released:
            return
        try:
            if self._files is None or self._files.lost is None:
                with _translated():
                    self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        except StorageError as exc:  # e.g. the disk is full: the WAL keeps the events, read at the next open
            log.warning("%s: the WAL was not checkpointed at close (%s); the next start reads it", self.path, exc)
        finally:
            with _translated():
                self._db.close()
            if self._owner is not None:
                self._owner.close()  # the lock goes with the file (and with a killed process)
                self._owner = None

    def own(self) -> None:
        """Hold an exclusive lock on ``<database>.lock`` until :meth:`close`: a second server on
        the same file would also be its writer (no lease arbitrates SQLite), and each would
        rebuild models from the other's writes or lose them. The kernel drops the lock with
        the process, so a killed server never leaves it held."""
        if str(self.path) == ":memory:" or self._owner is not None:
            return
        lock = Path(f"{self.path}.lock")
        try:
            owner = open(lock, "a+")  # noqa: SIM115 - held open until close()
        except OSError as exc:  # a volume whose files another user made
            self._db.close()
            self._released = True
            raise StorageError(refused_access(lock, exc)) from None
        try:
            fcntl.flock(owner, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            owner.close()
            # let go of the database at once: close()'s checkpoint would wait for the owner
            self._db.close()
            self._released = True
            raise StorageError(
                f"another streamtree server uses {self.path} (it holds {lock}): one server per SQLite "
                "database; stop it, or give this one another --data-dir"
            ) from None
        self._owner = owner

    def claim_first_start(self, model: str, config: str) -> bool:
        """Return True exactly once per database, recording the first start's model with the claim."""
        with _translated(), self._transaction():
            cur = self._db.execute(
                "INSERT OR IGNORE INTO meta(key, value) VALUES ('initialised', ?)", (repr(time.time()),)
            )
            if cur.rowcount != 1:
                return False
            self._db.execute(
                "INSERT OR IGNORE INTO models(name, config, created_at) VALUES (?, ?, ?)", (model, config, time.time())
            )
            return True

    def models(self) -> list[StoredModel]:
        """All models, by name, with their last logged sequence number."""
        self._check_files()
        with _translated():
            rows = self._db.execute(
                f"SELECT m.name, m.config, {_LAST_SEQ.format('m.name')} FROM models m ORDER BY m.name"
            ).fetchall()
        return [StoredModel(name, config, last_seq) for name, config, last_seq in rows]

    def create_model(self, name: str, config: str) -> None:
        """Record a new model; :class:`ModelExists` if the name is taken."""
        with _translated(ModelExists), self._transaction():
            self._db.execute(
                "INSERT INTO models(name, config, created_at) VALUES (?, ?, ?)", (name, config, time.time())
            )

    def delete_model(self, name: str) -> None:
        """Remove a model with its event log and snapshots, in one transaction."""
        with _translated(), self._transaction():
            self._db.execute("DELETE FROM events WHERE model = ?", (name,))
            self._db.execute("DELETE FROM snapshot_pieces WHERE model = ?", (name,))
            self._db.execute("DELETE FROM snapshots WHERE model = ?", (name,))
            self._db.execute("DELETE FROM idempotency WHERE model = ?", (name,))
            self._db.execute("DELETE FROM models WHERE name = ?", (name,))

    def append(
        self,
        name: str,
        first_seq: int,
        events: Sequence[str],
        keys: Sequence[IdempotentAnswer] = (),
        window_s: float = 86_400.0,
    ) -> None:
        """Append events numbered ``first_seq, ...`` with the requests' idempotency keys, and commit.

        :class:`SeqConflict` on a gap or overlap, or a key recorded already within ``window_s``.
        """
        rows = [(name, seq, n, text) for seq, n, text in records(first_seq, events)]
        now = time.time()
        with _translated(SeqConflict), self._transaction():
            last = self._db.execute(f"SELECT {_LAST_SEQ.format('?')}", (name,)).fetchone()[0]
            if first_seq != last + 1:  # the log stays gap-free whatever the caller does
                raise SeqConflict(f"model {name!r}: append at seq {first_seq} after {last}")
            self._db.executemany("INSERT INTO events(model, seq, n, event) VALUES (?, ?, ?, ?)", rows)
            if keys:  # forget the model's keys past the window, so a key may be used again after it
                self._db.execute("DELETE FROM idempotency WHERE model = ? AND created_at <= ?", (name, now - window_s))
                self._db.executemany(
                    "INSERT INTO idempotency(model, key, body_hash, learned, seq, created_at) "
                    "VALUES (?, ?, ?, ?, ?, ?)",
                    [(name, k.key, k.body_hash, k.learned, k.seq, now) for k in keys],
                )

    def find_idempotent(self, name: str, key: str, window_s: float) -> IdempotentAnswer | None:
        """The model's request logged with ``key`` less than ``window_s`` seconds ago, if any."""
        self._check_files()
        with _translated():
            row = self._db.execute(
                "SELECT body_hash, learned, seq FROM idempotency WHERE model = ? AND key = ? AND created_at > ?",
                (name, key, time.time() - window_s),
            ).fetchone()
        return None if row is None else IdempotentAnswer(key, row[0], int(row[1]), int(row[2]))

    def read_events(self, name: str, after: int, limit: int, max_bytes: int | None = None) -> list[tuple[int, str]]:
        """Up to ``limit`` events numbered above ``after``, in order: from the record that holds
        event ``after + 1`` to the one that holds event ``after + limit`` (or the last that
        starts within ``max_bytes``: the rows are fetched one at a time, the rest never read)."""
        self._check_files()
        with _translated():
            cursor = self._db.execute(
                "SELECT seq, n, event FROM events WHERE model = ?1 AND seq <= ?3 AND seq >= COALESCE("
                "(SELECT seq FROM events WHERE model = ?1 AND seq <= ?2 ORDER BY seq DESC LIMIT 1), 0) ORDER BY seq",
                (name, *seq_range(after, limit)),
            )
            try:
                rows = cursor.fetchall() if max_bytes is None else list(within(cursor, max_bytes))
            finally:
                cursor.close()  # a statement left unfinished would hold its read snapshot
        return expand(name, rows, after, limit)

    def snapshot_seqs(self, name: str) -> list[int]:
        """The seqs of the model's snapshots, newest first."""
        self._check_files()
        with _translated():
            rows = self._db.execute("SELECT seq FROM snapshots WHERE model = ? ORDER BY seq DESC", (name,)).fetchall()
        return [int(seq) for (seq,) in rows]

    def read_snapshot(self, name: str, seq: int) -> Snapshot:
        """The snapshot at ``seq``, its pieces read one at a time and checked (:class:`StorageError` if
        missing or corrupt)."""
        self._check_files()
        with _translated():
            row = self._db.execute(
                "SELECT model_bytes, state, pieces, size FROM snapshots WHERE model = ? AND seq = ?", (name, seq)
            ).fetchone()
            if row is None:
                raise StorageError(f"model {name!r} has no snapshot at seq {seq}")
            blob, state, count, size = row
            if count is None:  # written before pieces: the bytes are in the row
                return Snapshot(seq, bytes(blob), state)
            return Snapshot(
                seq,
                read_pieces(
                    name,
                    seq,
                    count,
                    size,
                    lambda i: self._db.execute(
                        "SELECT bytes, crc FROM snapshot_pieces WHERE model = ? AND seq = ? AND piece = ?",
                        (name, seq, i),
                    ).fetchone(),
                ),
                state,
            )

    def save_snapshot(self, name: str, snapshot: Snapshot, keep: int) -> None:
        """Store a snapshot (its bytes in pieces) atomically and keep only the newest ``keep`` of the model's."""
        parts = pieces(snapshot.model_bytes, self.piece_bytes)
        with _translated(), self._transaction():
            self._db.execute("DELETE FROM snapshot_pieces WHERE model = ? AND seq = ?", (name, snapshot.seq))
            self._db.execute(
                "INSERT OR REPLACE INTO snapshots(model, seq, model_bytes, state, created_at, pieces, size) "
                "VALUES (?, ?, x'', ?, ?, ?, ?)",
                (name, snapshot.seq, snapshot.state, time.time(), len(parts), len(snapshot.model_bytes)),
            )
            for i, part in enumerate(parts):
                self._db.execute(
                    "INSERT INTO snapshot_pieces(model, seq, piece, bytes, crc) VALUES (?, ?, ?, ?, ?)",
                    (name, snapshot.seq, i, part, piece_crc(part)),
                )
            self._db.execute(
                "DELETE FROM snapshots WHERE model = ? AND seq NOT IN "
                "(SELECT seq FROM snapshots WHERE model = ? ORDER BY seq DESC LIMIT ?)",
                (name, name, keep),
            )
            self._db.execute(
                "DELETE FROM snapshot_pieces WHERE model = ? AND seq NOT IN "
                "(SELECT seq FROM snapshots WHERE model = ?)",
                (name, name),
            )

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        """``BEGIN IMMEDIATE`` ... ``COMMIT``, or ``ROLLBACK`` on any exception; the files
        checked before and after (:meth:`_check_files`: a commit into a removed file fails)."""
        self._check_files()
        try:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            try:
                self._db.execute("COMMIT")
            except sqlite3.Error:
                if self._db.in_transaction:  # a failed COMMIT may leave it open: later writes would all fail
                    self._db.execute("ROLLBACK")
                raise
        finally:  # its checkpoints wrote into the database file (even one that failed half-way)
            if self._files is not None:
                self._files.wrote()
        self._check_files()
