"""The PostgreSQL engine: every model, its event log and its snapshots in one database.

Selected by a ``postgresql://user:password@host:port/dbname`` URL (libpq's; ``postgres://``
too). A new instance needs nothing but the URL: snapshots are ``bytea`` rows next to the log.
The schema is created and migrated at open (:mod:`app.storage.postgres_schema`).

Connections come from a ``psycopg_pool`` pool in autocommit mode. A small append (a few
single-event learns) is one ``INSERT ... SELECT`` statement that checks the numbering and
writes the events: one round trip. A large one (a batch) reads the last seq and writes the
rows with ``COPY`` in one transaction: four times faster than the statement from a thousand
events on (measured: 18 ms against 70 ms per 1,000 events, commit included). Either way one
commit (``synchronous_commit=on`` with
``sync="full"``: on the server's disk before it returns; ``off`` with ``sync="normal"``:
survives a killed service process, not a database crash). A connection that breaks is
dropped by the pool and the next call opens a new one.

The caller assigns sequence numbers (one writer per database) and the primary key
``(model, seq)`` refuses a duplicate whatever happens, so several writers can never both log
an event under one number. Once the store has handed out its coordinator
(:mod:`app.storage.postgres_lease`), every write also checks the lease's fencing token in its
own statement or transaction, under a share lock on the lease row: an instance that took the
lease waits for such a write to commit, and every later write of the previous holder is
refused with :class:`~app.storage.base.LeaseLost`.

``psycopg`` and its exceptions stay in this module: every failure leaves it as a
:class:`~app.storage.base.StorageError`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Self

import psycopg
from psycopg import errors
from psycopg_pool import ConnectionPool

from app.storage import redact
from app.storage.base import (Coordinator, EventStore, IdempotentAnswer, LeaseLost, ModelExists, SeqConflict,
                              Snapshot, StorageError, StoredModel, Sync)
from app.storage.postgres_schema import migrate

__all__ = ["PostgresStore"]

#: Seconds to wait for a connection (at open, and from the pool for each call) before failing.
CONNECT_TIMEOUT = 10.0

#: Appends of at least this many events are written with ``COPY`` rather than one ``INSERT``.
COPY_FROM = 64

_APPEND = """
INSERT INTO streamtree_events (model, seq, event)
SELECT %(model)s, %(first)s + u.i - 1, u.event
FROM unnest(%(events)s::text[]) WITH ORDINALITY AS u(event, i)
WHERE (SELECT COALESCE(max(seq), 0) FROM streamtree_events WHERE model = %(model)s) = %(first)s - 1
"""

#: Locks the lease row against a change of holder until the transaction ends; no row: the lease is lost.
_FENCE = "SELECT 1 FROM streamtree_lease WHERE id = 1 AND token = %(token)s FOR SHARE"

#: :data:`_APPEND` under the fence, still one statement.
_FENCED_APPEND = f"""
WITH fence AS ({_FENCE})
INSERT INTO streamtree_events (model, seq, event)
SELECT %(model)s, %(first)s + u.i - 1, u.event
FROM unnest(%(events)s::text[]) WITH ORDINALITY AS u(event, i)
WHERE EXISTS (SELECT 1 FROM fence)
AND (SELECT COALESCE(max(seq), 0) FROM streamtree_events WHERE model = %(model)s) = %(first)s - 1
"""


@contextmanager
def _translated(conflict: type[StorageError] = StorageError) -> Iterator[None]:
    """Re-raise psycopg's exceptions as the store's: a unique-key violation as ``conflict``."""
    try:
        yield
    except errors.UniqueViolation as exc:
        raise conflict(str(exc).strip()) from None
    except psycopg.Error as exc:  # also the pool's PoolTimeout and PoolClosed
        raise StorageError(f"{type(exc).__name__}: {str(exc).strip()}") from None


def _check_follows(conn: psycopg.Connection[Any], name: str, first_seq: int) -> None:
    """Raise :class:`SeqConflict` unless ``first_seq`` follows the model's last logged event."""
    row = conn.execute("SELECT COALESCE(max(seq), 0) FROM streamtree_events WHERE model = %s", (name,)).fetchone()
    last = int(row[0]) if row else 0
    if first_seq != last + 1:  # the log stays gap-free whatever the caller does
        raise SeqConflict(f"model {name!r}: append at seq {first_seq} after {last}")


class PostgresStore(EventStore):
    """The streamtree tables of the database at ``url``.

    Parameters
    ----------
    url
        A libpq URL, ``postgresql://user:password@host:port/dbname``.
    sync
        ``"full"``: each commit waits for the server's WAL flush (``synchronous_commit=on``);
        ``"normal"``: it does not (``off``), so a database crash may lose the last commits.
    max_connections
        Most connections the pool opens.

    Raises
    ------
    StorageError
        The database cannot be reached, or its schema is newer than this code.
    """

    def __init__(self, url: str, sync: Sync = "full", max_connections: int = 4) -> None:
        self.url = redact(url)
        self._dsn = url
        self._fenced = False  # set for good once the coordinator is handed out
        self._token: int | None = None  # the lease's fencing token, once taken
        self._setting = "on" if sync == "full" else "off"
        with _translated():
            # One direct connection first: it migrates, and a wrong URL fails here with the
            # server's own message rather than as a pool timeout.
            with psycopg.connect(url, autocommit=True, connect_timeout=int(CONNECT_TIMEOUT)) as conn:
                migrate(conn)
            self._pool: ConnectionPool[Any] = ConnectionPool(
                url, min_size=1, max_size=max_connections, open=False, timeout=CONNECT_TIMEOUT,
                kwargs={"autocommit": True, "connect_timeout": int(CONNECT_TIMEOUT)},
                configure=self._configure, name="streamtree",
            )
            self._pool.open(wait=True, timeout=CONNECT_TIMEOUT)

    def _configure(self, conn: psycopg.Connection[Any]) -> None:
        """Set up each new pooled connection: the commit durability, a name for pg_stat_activity."""
        conn.execute(f"SET synchronous_commit = {self._setting}")
        conn.execute("SET application_name = 'streamtree'")

    @classmethod
    def from_url(cls, url: str, sync: Sync = "full") -> Self:
        """Open ``postgresql://...`` (or ``postgres://...``)."""
        scheme, sep, rest = url.partition("://")
        if scheme not in ("postgresql", "postgres") or not sep or not rest:
            raise StorageError(f"A PostgreSQL URL is postgresql://user@host:port/dbname; got {redact(url)!r}")
        return cls(url, sync)

    @contextmanager
    def _conn(self, conflict: type[StorageError] = StorageError) -> Iterator[psycopg.Connection[Any]]:
        with _translated(conflict), self._pool.connection() as conn:
            yield conn

    def close(self) -> None:
        """Close every pooled connection."""
        with _translated():
            self._pool.close()

    def coordinator(self, holder: str, url: str, lease_s: float, poll_s: float) -> Coordinator:
        """The database's writer lease and log notices (:class:`~app.storage.postgres_lease.PostgresCoordinator`);
        from now on every write of this store needs the lease."""
        from app.storage.postgres_lease import PostgresCoordinator

        self._fenced = True
        return PostgresCoordinator(self._dsn, holder, url, lease_s, poll_s, on_token=self._set_token)

    def _set_token(self, token: int) -> None:
        """Called by the coordinator when it takes the lease, before it tells the service."""
        self._token = token

    def _check_fence(self, conn: psycopg.Connection[Any]) -> None:
        """Inside a transaction: hold the lease row until commit, or raise :class:`LeaseLost`."""
        if not self._fenced:
            return
        if self._token is None or conn.execute(_FENCE, {"token": self._token}).fetchone() is None:
            raise LeaseLost("this instance does not hold the writer's lease")

    def claim_first_start(self) -> bool:
        """Return True exactly once per database: on the service's first start."""
        with self._conn() as conn:
            cur = conn.execute("INSERT INTO streamtree_meta (key, value) VALUES ('initialised', now()::text) "
                               "ON CONFLICT (key) DO NOTHING")
            return cur.rowcount == 1

    def models(self) -> list[StoredModel]:
        """All models, by name (byte order, as SQLite), with their last logged sequence number."""
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT m.name, m.config, "
                "COALESCE((SELECT max(e.seq) FROM streamtree_events e WHERE e.model = m.name), 0), m.generation "
                'FROM streamtree_models m ORDER BY m.name COLLATE "C"'
            ).fetchall()
        return [StoredModel(name, config, int(last_seq), int(gen)) for name, config, last_seq, gen in rows]

    def create_model(self, name: str, config: str) -> None:
        """Record a new model; :class:`ModelExists` if the name is taken."""
        with self._conn(ModelExists) as conn, conn.transaction():
            self._check_fence(conn)
            conn.execute("INSERT INTO streamtree_models (name, config) VALUES (%s, %s)", (name, config))

    def delete_model(self, name: str) -> None:
        """Remove a model; its events and snapshots go with it (``ON DELETE CASCADE``), in one statement."""
        with self._conn() as conn, conn.transaction():
            self._check_fence(conn)
            conn.execute("DELETE FROM streamtree_models WHERE name = %s", (name,))

    def append(self, name: str, first_seq: int, events: Sequence[str],
               keys: Sequence[IdempotentAnswer] = (), window_s: float = 86_400.0) -> None:
        """Append events numbered ``first_seq, ...`` with the requests' idempotency keys, in one transaction.

        :class:`SeqConflict` on a gap or overlap, or a key recorded already within ``window_s``
        (the primary key ``(model, key)`` refuses it, also from another instance).
        """
        with self._conn(SeqConflict) as conn:
            if keys:
                with conn.transaction():
                    self._check_fence(conn)
                    _check_follows(conn, name, first_seq)
                    conn.cursor().executemany(
                        "INSERT INTO streamtree_events (model, seq, event) VALUES (%s, %s, %s)",
                        [(name, first_seq + i, event) for i, event in enumerate(events)])
                    # forget the model's keys past the window, so a key may be used again after it
                    conn.execute("DELETE FROM streamtree_idempotency WHERE model = %s "
                                  "AND created_at <= now() - make_interval(secs => %s)", (name, window_s))
                    conn.cursor().executemany(
                        "INSERT INTO streamtree_idempotency (model, key, body_hash, learned, seq) "
                        "VALUES (%s, %s, %s, %s, %s)", [(name, k.key, k.body_hash, k.learned, k.seq) for k in keys])
                return
            if len(events) < COPY_FROM:
                params = {"model": name, "first": first_seq, "events": list(events), "token": self._token}
                cur = conn.execute(_FENCED_APPEND if self._fenced else _APPEND, params)
                if cur.rowcount == len(events):
                    return
                with conn.transaction():  # refused by the fence or the numbering: say which
                    self._check_fence(conn)
                    _check_follows(conn, name, first_seq)
                raise SeqConflict(f"model {name!r}: append at seq {first_seq} refused")
            with conn.transaction():
                self._check_fence(conn)
                _check_follows(conn, name, first_seq)
                with conn.cursor().copy("COPY streamtree_events (model, seq, event) FROM STDIN") as copy:
                    for i, event in enumerate(events):
                        copy.write_row((name, first_seq + i, event))

    def find_idempotent(self, name: str, key: str, window_s: float) -> IdempotentAnswer | None:
        """The model's request logged with ``key`` less than ``window_s`` seconds ago, if any."""
        with self._conn() as conn:
            row = conn.execute(
                "SELECT body_hash, learned, seq FROM streamtree_idempotency WHERE model = %s AND key = %s "
                "AND created_at > now() - make_interval(secs => %s)", (name, key, window_s)).fetchone()
        return None if row is None else IdempotentAnswer(key, row[0], int(row[1]), int(row[2]))

    def read_events(self, name: str, after: int, limit: int) -> list[tuple[int, str]]:
        """Up to ``limit`` events numbered above ``after``, in order."""
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT seq, event FROM streamtree_events WHERE model = %s AND seq > %s ORDER BY seq LIMIT %s",
                (name, after, limit),
            ).fetchall()
        return [(int(seq), event) for seq, event in rows]

    def snapshots(self, name: str) -> list[Snapshot]:
        """The model's snapshots, newest first."""
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT seq, model_bytes, state FROM streamtree_snapshots WHERE model = %s ORDER BY seq DESC",
                (name,),
            ).fetchall()
        return [Snapshot(int(seq), bytes(blob), state) for seq, blob, state in rows]

    def save_snapshot(self, name: str, snapshot: Snapshot, keep: int) -> None:
        """Store a snapshot and keep only the newest ``keep`` of the model's, in one transaction."""
        with self._conn() as conn, conn.transaction():
            conn.execute(
                "INSERT INTO streamtree_snapshots (model, seq, model_bytes, state) VALUES (%s, %s, %s, %s) "
                "ON CONFLICT (model, seq) DO UPDATE SET model_bytes = EXCLUDED.model_bytes, "
                "state = EXCLUDED.state, created_at = now()",
                (name, snapshot.seq, snapshot.model_bytes, snapshot.state),
            )
            conn.execute(
                "DELETE FROM streamtree_snapshots WHERE model = %s AND seq NOT IN "
                "(SELECT seq FROM streamtree_snapshots WHERE model = %s ORDER BY seq DESC LIMIT %s)",
                (name, name, keep),
            )
