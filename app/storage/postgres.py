"""The PostgreSQL engine: every model, its event log and its snapshots in one database.

Selected by a ``postgresql://user:password@host:port/dbname`` URL (libpq's; ``postgres://``
too). A new instance needs nothing but the URL: snapshots are rows next to the log, their
bytes in ``bytea`` pieces of at most ``piece_bytes`` (16 MiB by default) with a CRC-32 each,
written in the snapshot's transaction and read back one piece at a time in binary, so no
value comes near the server's 1 GB limit (a ``bytea``'s text form is twice its size; why:
``docs/decisions/background-snapshots.md``). The schema is created and migrated at open
(:mod:`app.storage.postgres_schema`).

Connections come from a ``psycopg_pool`` pool in autocommit mode. An append is one
``INSERT ... SELECT`` statement that checks the numbering and writes the events as records
(:mod:`app.storage.records`: a batch is one row): one round trip and one commit
(``synchronous_commit=on`` with
``sync="full"``: on the server's disk before it returns; ``off`` with ``sync="normal"``:
survives a killed service process, not a database crash). A connection that breaks is
dropped by the pool and the next call opens a new one.

The caller assigns sequence numbers (one writer per database) and the primary key
``(model, seq)`` refuses a duplicate whatever happens, so several writers can never both log
an event under one number. Once the store has handed out its coordinator
(:mod:`app.storage.postgres_lease`), every write also checks the lease's fencing token in its
own statement, or as the last statement of its transaction, under a share lock on the lease
row: an instance that took the lease waited for such a write to commit, and every later
write of the previous holder is refused with :class:`~app.storage.base.LeaseLost`. The check
comes last so that the lock is held for one round trip and the commit, not across the
transaction (a writer's own renewal of the lease waits for it).

Every session of a store carries one ``application_name``, ``streamtree-<12 hex digits>``,
recorded in the lease by its coordinator: the instance that takes an expired lease ends
these sessions (a stopped writer keeps its transaction open, and its locks, for as long as it
is stopped). As a backstop where it may not (another database role), each session also has
``idle_in_transaction_session_timeout`` and ``lock_timeout`` set
(:data:`SESSION_TIMEOUT`), so no transaction of a stopped process outlives it by much and no
statement waits on a lock for ever.

``psycopg`` and its exceptions stay in this module: every failure leaves it as a
:class:`~app.storage.base.StorageError`.
"""

from __future__ import annotations

import math
import time
import uuid
import weakref
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Self

import psycopg
from psycopg import errors
from psycopg_pool import ConnectionPool

from . import redact, scrub
from .base import (
    PIECE_BYTES,
    Coordinator,
    EventStore,
    IdempotentAnswer,
    LeaseLost,
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
from .postgres_schema import migrate
from .records import expand, records, seq_range

__all__ = ["PostgresStore"]

#: Seconds to wait for a connection (at open, and from the pool for each call) before failing.
CONNECT_TIMEOUT = 10.0

#: Seconds a store session may sit idle inside a transaction, and a statement may wait for a
#: lock, before the server ends it: bounds how long a stopped process's transaction holds its
#: locks when the instance taking the lease may not end its sessions. None of the store's
#: transactions waits on its client (every statement's data is ready before it begins).
SESSION_TIMEOUT = 5.0

#: Seconds a pooled connection is retried (1, 2, 4... s apart) before the attempt is given up;
#: the next call that needs a connection starts another at once. psycopg's default (300 s)
#: let the retries drift up to a minute apart: after an outage the store kept failing for
#: up to as long again.
RECONNECT_TIMEOUT = 3.0


#: A pooled connection idle for longer than this is checked (one round trip) before it is used:
#: one the server, a proxy or a NAT closed meanwhile is replaced rather than failing the call.
#: Checking every one cost a quarter of the commits per second.
CHECK_IDLE_AFTER = 1.0

#: The seq of a model's last logged event (0 without any), from its newest record.
_LAST_SEQ = "COALESCE((SELECT seq + n - 1 FROM streamtree_events WHERE model = {} ORDER BY seq DESC LIMIT 1), 0)"

#: Writes the records (:mod:`app.storage.records`) if they follow the model's last logged event.
#: Their texts go in binary (``%b``): psycopg's text form of an array quotes every record in
#: Python (what that cost: ``docs/decisions/batch-ingestion.md``).
_APPEND = f"""
INSERT INTO streamtree_events (model, seq, n, event)
SELECT %(model)s, u.seq, u.n, u.event
FROM unnest(%(seqs)s::bigint[], %(ns)s::integer[], %(events)b::text[]) AS u(seq, n, event)
WHERE {_LAST_SEQ.format("%(model)s")} = %(first)s - 1
"""

#: Locks the lease row against a change of holder until the transaction ends; no row: the lease is lost.
_FENCE = "SELECT 1 FROM streamtree_lease WHERE id = 1 AND token = %(token)s FOR SHARE"

#: :data:`_APPEND` under the fence, still one statement.
_FENCED_APPEND = f"""
WITH fence AS ({_FENCE})
INSERT INTO streamtree_events (model, seq, n, event)
SELECT %(model)s, u.seq, u.n, u.event
FROM unnest(%(seqs)s::bigint[], %(ns)s::integer[], %(events)b::text[]) AS u(seq, n, event)
WHERE EXISTS (SELECT 1 FROM fence)
AND {_LAST_SEQ.format("%(model)s")} = %(first)s - 1
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
    row = conn.execute(f"SELECT {_LAST_SEQ.format('%s')}", (name,)).fetchone()
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

    piece_bytes
        Most bytes of a snapshot stored in one value (:data:`~app.storage.base.PIECE_BYTES`).

    Raises
    ------
    StorageError
        The database cannot be reached, or its schema is newer than this code.
    """

    def __init__(self, url: str, sync: Sync = "full", max_connections: int = 4, piece_bytes: int = PIECE_BYTES) -> None:
        if piece_bytes < 1:
            raise ValueError(
                f"piece_bytes is the most bytes of a snapshot stored in one value, at least 1; got {piece_bytes!r}"
            )
        self.url = redact(url)
        self.piece_bytes = piece_bytes
        #: The ``application_name`` of every session of this store (recorded with the lease).
        self.sessions = f"streamtree-{uuid.uuid4().hex[:12]}"
        self._dsn = url
        self._fenced = False  # set for good once the coordinator is handed out
        self._token: int | None = None  # the lease's fencing token, once taken
        self._setting = "on" if sync == "full" else "off"
        self._used: weakref.WeakKeyDictionary[psycopg.Connection[Any], float] = weakref.WeakKeyDictionary()
        try:
            self._open(url, max_connections)
        except StorageError as exc:  # libpq quotes a malformed URL (or its bad part) in its message
            raise StorageError(scrub(str(exc), url)) from None

    def _open(self, url: str, max_connections: int) -> None:
        """Migrate the database and open the pool."""
        with _translated():
            # One direct connection first: it migrates, and a wrong URL fails here with the
            # server's own message rather than as a pool timeout.
            with psycopg.connect(url, autocommit=True, connect_timeout=int(CONNECT_TIMEOUT)) as conn:
                migrate(conn)
            self._pool: ConnectionPool[Any] = ConnectionPool(
                url,
                min_size=1,
                max_size=max_connections,
                open=False,
                timeout=CONNECT_TIMEOUT,
                reconnect_timeout=RECONNECT_TIMEOUT,
                kwargs={"autocommit": True, "connect_timeout": int(CONNECT_TIMEOUT)},
                configure=self._configure,
                check=self._check_idle,
                name="streamtree",
            )
            self._pool.open(wait=True, timeout=CONNECT_TIMEOUT)

    def _check_idle(self, conn: psycopg.Connection[Any]) -> None:
        """The pool's check of a connection it hands out: one idle for :data:`CHECK_IDLE_AFTER`
        (or never used) is tried with a round trip (raising if it is dead: the pool replaces it)."""
        if time.monotonic() - self._used.get(conn, -math.inf) > CHECK_IDLE_AFTER:
            ConnectionPool.check_connection(conn)

    def _configure(self, conn: psycopg.Connection[Any]) -> None:
        """Set up each new pooled connection: the commit durability, the store's name for
        pg_stat_activity, the timeouts that bound a stopped process's transaction."""
        ms = int(SESSION_TIMEOUT * 1000)
        conn.execute(f"SET synchronous_commit = {self._setting}")
        conn.execute(f"SET application_name = '{self.sessions}'")
        conn.execute(f"SET idle_in_transaction_session_timeout = {ms}")
        conn.execute(f"SET lock_timeout = {ms}")

    @classmethod
    def from_url(cls, url: str, sync: Sync = "full") -> Self:
        """Open ``postgresql://...`` (or ``postgres://...``)."""
        scheme, sep, rest = url.partition("://")
        if scheme not in ("postgresql", "postgres") or not sep or not rest:
            raise StorageError(f"A PostgreSQL URL is postgresql://user@host:port/dbname; got {redact(url)!r}")
        return cls(url, sync)

    @contextmanager
    def _conn(
        self, conflict: type[StorageError] = StorageError, write: bool = False
    ) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection; psycopg's exceptions leave as the store's.

        When the connection fails (e.g. ended by an instance that took the lease: it ends all
        of the previous holder's sessions), the pool's other connections are checked at once,
        so the next call does not meet a dead one; and a fenced write that failed so raises
        :class:`LeaseLost` if the lease has changed hands (nothing of it was committed: the
        server rolled it back, or it never began).
        """
        with _translated(conflict):
            try:
                with self._pool.connection() as conn:
                    try:
                        yield conn
                    finally:
                        self._used[conn] = time.monotonic()
            except psycopg.OperationalError:
                self._pool.check()
                if write and self._fenced and not self._holds_token():
                    raise LeaseLost("this instance does not hold the writer's lease any more") from None
                raise

    def _holds_token(self) -> bool:
        """Whether the lease's token is still this store's (True when that cannot be read)."""
        try:
            with self._pool.connection() as conn:
                row = conn.execute("SELECT token FROM streamtree_lease WHERE id = 1").fetchone()
        except psycopg.Error:
            return True
        return row is not None and self._token is not None and int(row[0]) == self._token

    def close(self) -> None:
        """Close every pooled connection."""
        with _translated():
            self._pool.close()

    def coordinator(self, holder: str, url: str, lease_s: float, poll_s: float) -> Coordinator:
        """The database's writer lease and log notices (:class:`~app.storage.postgres_lease.PostgresCoordinator`);
        from now on every write of this store needs the lease."""
        from .postgres_lease import PostgresCoordinator

        self._fenced = True
        return PostgresCoordinator(
            self._dsn, holder, url, lease_s, poll_s, on_token=self._set_token, sessions=self.sessions
        )

    def _set_token(self, token: int) -> None:
        """Called by the coordinator when it takes the lease, before it tells the service."""
        self._token = token

    def _check_fence(self, conn: psycopg.Connection[Any]) -> None:
        """Last in a transaction: hold the lease row until the commit, or raise :class:`LeaseLost`
        (then the transaction is rolled back: nothing of it is written)."""
        if not self._fenced:
            return
        if self._token is None or conn.execute(_FENCE, {"token": self._token}).fetchone() is None:
            raise LeaseLost("this instance does not hold the writer's lease")

    def claim_first_start(self, model: str, config: str) -> bool:
        """Return True exactly once per database, recording the first start's model with the claim."""
        with self._conn(write=True) as conn, conn.transaction():
            cur = conn.execute(
                "INSERT INTO streamtree_meta (key, value) VALUES ('initialised', now()::text) "
                "ON CONFLICT (key) DO NOTHING"
            )
            if cur.rowcount != 1:
                return False
            conn.execute(
                "INSERT INTO streamtree_models (name, config) VALUES (%s, %s) ON CONFLICT (name) DO NOTHING",
                (model, config),
            )
            self._check_fence(conn)
            return True

    def models(self) -> list[StoredModel]:
        """All models, by name (byte order, as SQLite), with their last logged sequence number."""
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT m.name, m.config, "
                f"{_LAST_SEQ.format('m.name')}, m.generation "
                'FROM streamtree_models m ORDER BY m.name COLLATE "C"'
            ).fetchall()
        return [StoredModel(name, config, int(last_seq), int(gen)) for name, config, last_seq, gen in rows]

    def create_model(self, name: str, config: str) -> None:
        """Record a new model; :class:`ModelExists` if the name is taken."""
        with self._conn(ModelExists, write=True) as conn, conn.transaction():
            conn.execute("INSERT INTO streamtree_models (name, config) VALUES (%s, %s)", (name, config))
            self._check_fence(conn)

    def delete_model(self, name: str) -> None:
        """Remove a model; its events and snapshots go with it (``ON DELETE CASCADE``), in one statement."""
        with self._conn(write=True) as conn, conn.transaction():
            conn.execute("DELETE FROM streamtree_models WHERE name = %s", (name,))
            self._check_fence(conn)

    def append(
        self,
        name: str,
        first_seq: int,
        events: Sequence[str],
        keys: Sequence[IdempotentAnswer] = (),
        window_s: float = 86_400.0,
    ) -> None:
        """Append events numbered ``first_seq, ...`` with the requests' idempotency keys, in one transaction.

        :class:`SeqConflict` on a gap or overlap, or a key recorded already within ``window_s``
        (the primary key ``(model, key)`` refuses it, also from another instance).
        """
        rows = records(first_seq, events)
        params = {
            "model": name,
            "first": first_seq,
            "seqs": [seq for seq, _, _ in rows],
            "ns": [n for _, n, _ in rows],
            "events": [text for _, _, text in rows],
            "token": self._token,
        }
        with self._conn(SeqConflict, write=True) as conn:
            if keys:
                with conn.transaction():
                    if conn.execute(_APPEND, params).rowcount != len(rows):
                        _check_follows(conn, name, first_seq)
                        raise SeqConflict(f"model {name!r}: append at seq {first_seq} refused")
                    # forget the model's keys past the window, so a key may be used again after it
                    conn.execute(
                        "DELETE FROM streamtree_idempotency WHERE model = %s "
                        "AND created_at <= now() - make_interval(secs => %s)",
                        (name, window_s),
                    )
                    conn.cursor().executemany(
                        "INSERT INTO streamtree_idempotency (model, key, body_hash, learned, seq) "
                        "VALUES (%s, %s, %s, %s, %s)",
                        [(name, k.key, k.body_hash, k.learned, k.seq) for k in keys],
                    )
                    self._check_fence(conn)
                return
            cur = conn.execute(_FENCED_APPEND if self._fenced else _APPEND, params)
            if cur.rowcount == len(rows):
                return
            with conn.transaction():  # refused by the fence or the numbering: say which
                self._check_fence(conn)
                _check_follows(conn, name, first_seq)
            raise SeqConflict(f"model {name!r}: append at seq {first_seq} refused")

    def find_idempotent(self, name: str, key: str, window_s: float) -> IdempotentAnswer | None:
        """The model's request logged with ``key`` less than ``window_s`` seconds ago, if any."""
        with self._conn() as conn:
            row = conn.execute(
                "SELECT body_hash, learned, seq FROM streamtree_idempotency WHERE model = %s AND key = %s "
                "AND created_at > now() - make_interval(secs => %s)",
                (name, key, window_s),
            ).fetchone()
        return None if row is None else IdempotentAnswer(key, row[0], int(row[1]), int(row[2]))

    def read_events(self, name: str, after: int, limit: int, max_bytes: int | None = None) -> list[tuple[int, str]]:
        """Up to ``limit`` events numbered above ``after``, in order: from the record that holds
        event ``after + 1`` to the one that holds event ``after + limit`` (or the last that
        starts within ``max_bytes``: the server sums the records' sizes, which it knows without
        reading them, and sends only those)."""
        first, last = seq_range(after, limit)
        # with max_bytes, each record's size and those before it summed (its text's bytes)
        upto = "" if max_bytes is None else ", SUM(octet_length(event)) OVER (ORDER BY seq) AS upto"
        query = (
            f"SELECT seq, n, event{upto} FROM streamtree_events WHERE model = %(model)s AND seq <= %(last)s "
            "AND seq >= COALESCE((SELECT seq FROM streamtree_events WHERE model = %(model)s "
            "AND seq <= %(first)s ORDER BY seq DESC LIMIT 1), 0)"
        )
        if max_bytes is not None:
            query = f"SELECT seq, n, event FROM ({query}) AS r WHERE upto - octet_length(event) < %(max_bytes)s"
        with self._conn() as conn:
            rows = conn.execute(
                query + " ORDER BY seq", {"model": name, "first": first, "last": last, "max_bytes": max_bytes}
            ).fetchall()
        return expand(name, rows, after, limit)

    def snapshot_seqs(self, name: str) -> list[int]:
        """The seqs of the model's snapshots, newest first."""
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT seq FROM streamtree_snapshots WHERE model = %s ORDER BY seq DESC", (name,)
            ).fetchall()
        return [int(seq) for (seq,) in rows]

    def read_snapshot(self, name: str, seq: int) -> Snapshot:
        """The snapshot at ``seq``, read in one repeatable-read transaction (a snapshot pruned
        meanwhile is still whole), a piece per round trip in binary, each piece checked."""
        with self._conn() as conn, conn.transaction():
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            row = conn.execute(
                "SELECT model_bytes, state, pieces, size FROM streamtree_snapshots WHERE model = %s AND seq = %s",
                (name, seq),
                binary=True,
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
                    lambda i: conn.execute(
                        "SELECT bytes, crc FROM streamtree_snapshot_pieces WHERE model = %s AND seq = %s AND piece = %s",
                        (name, seq, i),
                        binary=True,
                    ).fetchone(),
                ),
                state,
            )

    def save_snapshot(self, name: str, snapshot: Snapshot, keep: int) -> None:
        """Store a snapshot, its bytes in pieces, and keep only the newest ``keep`` of the
        model's, in one transaction (fenced: a writer that lost the lease writes none)."""
        parts = pieces(snapshot.model_bytes, self.piece_bytes)
        with self._conn(write=True) as conn, conn.transaction():
            conn.execute("DELETE FROM streamtree_snapshot_pieces WHERE model = %s AND seq = %s", (name, snapshot.seq))
            conn.execute(
                "INSERT INTO streamtree_snapshots (model, seq, model_bytes, state, pieces, size) "
                "VALUES (%s, %s, '', %s, %s, %s) ON CONFLICT (model, seq) DO UPDATE SET model_bytes = '', "
                "state = EXCLUDED.state, pieces = EXCLUDED.pieces, size = EXCLUDED.size, created_at = now()",
                (name, snapshot.seq, snapshot.state, len(parts), len(snapshot.model_bytes)),
            )
            for i, part in enumerate(parts):
                conn.execute(
                    "INSERT INTO streamtree_snapshot_pieces (model, seq, piece, bytes, crc) "
                    "VALUES (%s, %s, %s, %b, %s)",
                    (name, snapshot.seq, i, part, piece_crc(part)),
                )
            conn.execute(  # their pieces go with them (ON DELETE CASCADE)
                "DELETE FROM streamtree_snapshots WHERE model = %s AND seq NOT IN "
                "(SELECT seq FROM streamtree_snapshots WHERE model = %s ORDER BY seq DESC LIMIT %s)",
                (name, name, keep),
            )
            self._check_fence(conn)
