"""The durable store: one embedded SQLite database (WAL) per data directory.

It holds, per model, its config, an append-only event log numbered 1, 2, 3, ... and periodic
snapshots (the library's own safe byte format, never pickle) with the prequential metrics
state at the same sequence number. A snapshot and the events after it rebuild the model.

A :class:`Store` is not thread-safe: the service calls it from one dedicated thread only
(see :class:`app.registry.Registry`).
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

__all__ = ["Snapshot", "Store", "StoredModel"]

DB_NAME = "streamtree.sqlite3"

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
    PRIMARY KEY (model, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS snapshots (
    model TEXT NOT NULL,
    seq INTEGER NOT NULL,
    model_bytes BLOB NOT NULL,
    state TEXT NOT NULL,
    created_at REAL NOT NULL,
    PRIMARY KEY (model, seq)
);
"""


@dataclass(frozen=True)
class StoredModel:
    """A model's durable identity: its name, its complete config (JSON text) and last seq."""

    name: str
    config: str
    last_seq: int


@dataclass(frozen=True)
class Snapshot:
    """A model serialised after event ``seq``, with the service-side state (JSON text)."""

    seq: int
    model_bytes: bytes
    state: str


class Store:
    """The SQLite database under a data directory.

    Parameters
    ----------
    data_dir
        Directory for the database file; created if missing.
    sync
        SQLite ``synchronous`` mode: ``"full"`` makes every commit reach the disk (fsync)
        before it returns; ``"normal"`` survives a killed process but not a power cut.

    Notes
    -----
    Every write is one transaction, so an append of many events, a snapshot, a model's
    creation or deletion is all-or-nothing even when the process is killed mid-write.
    """

    def __init__(self, data_dir: Path, sync: Literal["full", "normal"] = "full") -> None:
        data_dir.mkdir(parents=True, exist_ok=True)
        self.path = data_dir / DB_NAME
        self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(f"PRAGMA synchronous={sync.upper()}")
        self._db.execute("PRAGMA foreign_keys=ON")
        self._db.executescript(_SCHEMA)

    def close(self) -> None:
        """Checkpoint the WAL into the main file and close the connection."""
        try:
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            self._db.close()

    def claim_first_start(self) -> bool:
        """Return True exactly once per database: on the service's first start."""
        with self._transaction():
            cur = self._db.execute(
                "INSERT OR IGNORE INTO meta(key, value) VALUES ('initialised', ?)",
                (repr(time.time()),),
            )
            return cur.rowcount == 1

    def models(self) -> list[StoredModel]:
        """All models, by name, with their last logged sequence number."""
        rows = self._db.execute(
            "SELECT m.name, m.config, "
            "COALESCE((SELECT MAX(seq) FROM events e WHERE e.model = m.name), 0) "
            "FROM models m ORDER BY m.name"
        ).fetchall()
        return [StoredModel(name, config, last_seq) for name, config, last_seq in rows]

    def create_model(self, name: str, config: str) -> None:
        """Record a new model; raises ``sqlite3.IntegrityError`` if the name is taken."""
        with self._transaction():
            self._db.execute(
                "INSERT INTO models(name, config, created_at) VALUES (?, ?, ?)",
                (name, config, time.time()),
            )

    def delete_model(self, name: str) -> None:
        """Remove a model with its event log and snapshots, in one transaction."""
        with self._transaction():
            self._db.execute("DELETE FROM events WHERE model = ?", (name,))
            self._db.execute("DELETE FROM snapshots WHERE model = ?", (name,))
            self._db.execute("DELETE FROM models WHERE name = ?", (name,))

    def append(self, name: str, first_seq: int, events: Sequence[str]) -> None:
        """Append events numbered ``first_seq, first_seq + 1, ...`` and commit.

        Returns only once the transaction is committed (with ``sync="full"``: on disk).
        Unless ``first_seq`` follows the last logged event, raises ``sqlite3.IntegrityError``
        and writes nothing: the log never has a gap or a duplicate.
        """
        rows = [(name, first_seq + i, event) for i, event in enumerate(events)]
        with self._transaction():
            last = self._db.execute("SELECT MAX(seq) FROM events WHERE model = ?", (name,)).fetchone()[0] or 0
            if first_seq != last + 1:  # the log stays gap-free whatever the caller does
                raise sqlite3.IntegrityError(f"model {name!r}: append at seq {first_seq} after {last}")
            self._db.executemany("INSERT INTO events(model, seq, event) VALUES (?, ?, ?)", rows)

    def events_after(self, name: str, seq: int) -> Iterator[tuple[int, str]]:
        """Yield ``(seq, event)`` for the model's events after ``seq``, in order."""
        cur = self._db.execute(
            "SELECT seq, event FROM events WHERE model = ? AND seq > ? ORDER BY seq",
            (name, seq),
        )
        while rows := cur.fetchmany(1024):
            yield from rows

    def snapshots(self, name: str) -> list[Snapshot]:
        """The model's snapshots, newest first."""
        rows = self._db.execute(
            "SELECT seq, model_bytes, state FROM snapshots WHERE model = ? ORDER BY seq DESC",
            (name,),
        ).fetchall()
        return [Snapshot(seq, bytes(blob), state) for seq, blob, state in rows]

    def save_snapshot(self, name: str, snapshot: Snapshot, keep: int) -> None:
        """Store a snapshot atomically and keep only the newest ``keep`` of the model's."""
        with self._transaction():
            self._db.execute(
                "INSERT OR REPLACE INTO snapshots(model, seq, model_bytes, state, created_at) "
                "VALUES (?, ?, ?, ?, ?)",
                (name, snapshot.seq, snapshot.model_bytes, snapshot.state, time.time()),
            )
            self._db.execute(
                "DELETE FROM snapshots WHERE model = ? AND seq NOT IN "
                "(SELECT seq FROM snapshots WHERE model = ? ORDER BY seq DESC LIMIT ?)",
                (name, name, keep),
            )

    def _transaction(self) -> _Transaction:
        return _Transaction(self._db)


class _Transaction:
    """``BEGIN IMMEDIATE`` ... ``COMMIT``, or ``ROLLBACK`` on any exception."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def __enter__(self) -> None:
        self._db.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            self._db.execute("COMMIT")
        else:
            self._db.execute("ROLLBACK")
