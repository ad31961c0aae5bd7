"""The writer's lease and the log's change notices on PostgreSQL (one writer, many replicas).

The lease is the one row of ``streamtree_lease``: its holder, the URL the holder serves at,
the database session (``holder_pid``) that renews it, the ``application_name`` of its store's
sessions (``holder_sessions``), its expiry and a fencing token that grows by one at each
change of holder. An instance takes the lease when it has expired, or at once when the
holder's session is gone (its process was killed: the server closed the session), so a
killed writer is replaced within one poll, and a stopped one (SIGSTOP keeps its session
open) once its lease expires. Every expiry is the database server's clock, so instances'
clocks do not matter.

Safety does not rest on the expiry: every write of a store whose coordinator is out checks
the token under a share lock on the lease row (:mod:`app.storage.postgres`), and taking the
lease updates that row, so it waits for such a write to commit, and every write of the
previous holder after it is refused.

Liveness does not rest on the previous holder: a holder stopped (or cut off) in the middle of
a write keeps its transaction open, and with it the share lock (and the rows it wrote, on
which the next writer's appends would wait), for as long as it stays stopped. So an instance
that finds the lease free first ends the previous holder's store sessions
(``pg_terminate_backend`` on those carrying ``holder_sessions``: the server rolls their
transactions back), then updates the row with a short ``lock_timeout``, and tries again at
its next poll if the row is still locked (a write still committing, or sessions it may not
end: then the store sessions' own timeouts end them, :data:`app.storage.postgres.SESSION_TIMEOUT`).

An instance that cannot serve every model (one could not be rebuilt from the store) is not
*eligible* (:meth:`PostgresCoordinator.set_eligible`): it takes the lease only once it has
been free for a further lease length, so that an instance that serves every model takes it
first, and it still takes it when no such instance is there.

Two threads, each with its own connection (never from the store's pool, so a busy pool
cannot delay a renewal): one renews the lease (every quarter of its length) or, without it,
tries to take it (every poll); one LISTENs for the notices the schema's triggers send and
re-reads the log without one every :data:`RESYNC_EVERY` seconds in case one was lost.
``psycopg`` stays in this module.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg import errors

from .base import Coordinator, Lease

__all__ = ["PostgresCoordinator", "RESYNC_EVERY"]

log = logging.getLogger("streamtree.app")

#: Seconds between two re-reads of the whole log on a replica when no notice came.
RESYNC_EVERY = 1.0

#: Seconds to wait for a connection.
CONNECT_TIMEOUT = 5

#: When the lease is free for an eligible instance: expired, or its holder's session is gone.
_FREE = """(l.expires_at < clock_timestamp() OR l.holder_pid IS NULL
        OR NOT EXISTS (SELECT 1 FROM pg_stat_activity s WHERE s.pid = l.holder_pid))"""

#: When it is free for an instance that is not eligible: expired a further ``grace`` seconds ago.
_FREE_DEFERRED = "l.expires_at < clock_timestamp() - make_interval(secs => %(grace)s)"

#: Takes the lease if free; the new token and the previous holder's sessions.
_ACQUIRE = """
WITH previous AS (SELECT holder_sessions FROM streamtree_lease WHERE id = 1)
UPDATE streamtree_lease l SET token = token + 1, holder = %(holder)s, url = %(url)s, holder_pid = pg_backend_pid(),
    holder_sessions = %(sessions)s, expires_at = clock_timestamp() + make_interval(secs => %(lease)s)
FROM previous
WHERE l.id = 1 AND {free}
RETURNING l.token, previous.holder_sessions
"""

#: Ends the store sessions of the lease's holder if the lease is free (and not this instance's):
#: before taking it, in case a transaction of theirs holds the row.
_END_HOLDER = """
SELECT count(*) FILTER (WHERE pg_terminate_backend(a.pid))
FROM streamtree_lease l JOIN pg_stat_activity a
    ON a.application_name = l.holder_sessions AND a.datname = current_database() AND a.pid <> pg_backend_pid()
WHERE l.id = 1 AND l.holder_sessions IS DISTINCT FROM %(sessions)s AND {free}
"""

#: Ends the sessions named ``%(previous)s`` (the previous holder's): once the lease is taken, in case
#: the lease expired between :data:`_END_HOLDER` and the taking, so that no transaction of
#: theirs holds rows the new writer's first appends would wait for.
_END_SESSIONS = """
SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity
WHERE application_name = %(previous)s AND datname = current_database() AND pid <> pg_backend_pid()
"""

# The token alone decides: a holder whose lease expired may renew it as long as nobody took it
# (nobody else can have written in between).
_RENEW = """
UPDATE streamtree_lease SET expires_at = clock_timestamp() + make_interval(secs => %(lease)s),
    holder_pid = pg_backend_pid()
WHERE id = 1 AND token = %(token)s
RETURNING token
"""

# expired now (not '-infinity': an instance that is not eligible still waits its grace after it);
# no sessions to end: a holder that releases the lease is running, its last writes end by themselves
_RELEASE = """UPDATE streamtree_lease SET expires_at = clock_timestamp(), holder_pid = NULL, holder_sessions = NULL
WHERE id = 1 AND token = %s"""

_HOLDER = "SELECT holder, url, token FROM streamtree_lease WHERE id = 1 AND expires_at > clock_timestamp()"

_CHANNELS = ("streamtree_events", "streamtree_models", "streamtree_lease")


def _lock_wait_ms(lease_s: float) -> int:
    """How long the lease's statements wait for the row lock: a quarter of the lease (at least
    50 ms), so a blocked attempt is retried well within a lease."""
    return max(50, int(lease_s * 250))


def _connect(dsn: str, name: str) -> psycopg.Connection[Any]:
    conn = psycopg.connect(dsn, autocommit=True, connect_timeout=CONNECT_TIMEOUT)
    conn.execute(f"SET application_name = '{name}'")
    return conn


class PostgresCoordinator(Coordinator):
    """The lease and notices of one PostgreSQL database (:class:`~app.storage.base.Coordinator`).

    Parameters
    ----------
    dsn
        The database's URL.
    holder, url
        This instance's id and the URL other instances reach it at.
    lease_s, poll_s
        Lease length and poll period, in seconds.
    on_token
        Called with the fencing token when the lease is taken, before anything else is told
        (the store fences its writes with it).
    sessions
        The ``application_name`` of the store's sessions, recorded with the lease: whoever
        takes it next ends them (a random one by default).
    """

    def __init__(
        self,
        dsn: str,
        holder: str,
        url: str,
        lease_s: float,
        poll_s: float,
        on_token: Callable[[int], None],
        sessions: str | None = None,
    ) -> None:
        self._dsn, self._me, self._url = dsn, holder, url
        self._sessions = sessions or f"streamtree-{uuid.uuid4().hex[:12]}"
        self._eligible = True
        self._lease_s, self._poll_s = lease_s, poll_s
        self._on_token = on_token
        self._on_lease: Callable[[Lease | None], None] = lambda lease: None
        self._on_log: Callable[[str | None, int], None] = lambda model, seq: None
        self._lock = threading.Lock()  # the lease connection and state, between the thread and try_acquire
        self._conn: psycopg.Connection[Any] | None = None
        self._held: Lease | None = None
        self._valid_until = 0.0  # monotonic: past it, this instance cannot tell that it still holds the lease
        self._holder: Lease | None = None
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._threads: list[threading.Thread] = []

    # ------------------------------------------------------------------ interface
    def start(self, on_lease: Callable[[Lease | None], None], on_log: Callable[[str | None, int], None]) -> None:
        """Start the lease and notice threads (see :class:`~app.storage.base.Coordinator`)."""
        self._on_lease, self._on_log = on_lease, on_log
        for target, name in (
            (self._lease_loop, "streamtree-lease"),
            (self._listen_loop, "streamtree-listen"),
            (self._watch_loop, "streamtree-lease-watch"),
        ):
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)

    def try_acquire(self) -> Lease | None:
        """Take the lease now if it is free; the lease (held already or just taken) or None."""
        with self._lock:
            if self._held is None:
                try:
                    self._acquire()
                except psycopg.Error as exc:
                    log.warning("taking the writer's lease failed: %s", str(exc).strip())
                    self._drop_conn()
            return self._held

    def holder(self) -> Lease | None:
        """The live lease as last read (every poll, and at once on a change of holder)."""
        return self._held or self._holder

    def set_eligible(self, eligible: bool) -> None:
        """Take the lease as soon as it is free (True), or only once it has been free for a
        further lease length (False: this instance cannot serve every model)."""
        self._eligible = eligible

    def release(self) -> None:
        """Give the lease up now if held (the others are told at once); keep competing for it."""
        with self._lock:
            if self._held is None:
                return
            try:
                self._connection().execute(_RELEASE, (self._held.token,))
                self._connection().execute("NOTIFY streamtree_lease")
            except psycopg.Error as exc:
                log.warning("releasing the writer's lease failed (it expires by itself): %s", str(exc).strip())
                self._drop_conn()
            self._lose("released by this instance")

    def close(self) -> None:
        """Stop the threads; release the lease if held, so that a replica takes it at once."""
        self._stop.set()
        self._wake.set()
        for thread in self._threads:
            thread.join(timeout=RESYNC_EVERY + CONNECT_TIMEOUT)
        with self._lock:
            if self._held is not None:
                try:
                    self._connection().execute(_RELEASE, (self._held.token,))
                    self._connection().execute("NOTIFY streamtree_lease")  # the others try at once
                except psycopg.Error as exc:
                    log.warning("releasing the writer's lease failed (it expires by itself): %s", str(exc).strip())
                self._held = None
            self._drop_conn()

    # ------------------------------------------------------------------ lease thread
    def _connection(self) -> psycopg.Connection[Any]:
        if self._conn is None or self._conn.closed:
            self._conn = _connect(self._dsn, "streamtree-lease")
            # a hung database must not hold the lease thread past the lease, nor a locked row
            # (a write still committing) past a quarter of it: the next attempt comes soon
            self._conn.execute(f"SET statement_timeout = {max(1, int(self._lease_s * 1000))}")
            self._conn.execute(f"SET lock_timeout = {_lock_wait_ms(self._lease_s)}")
        return self._conn

    def _drop_conn(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except psycopg.Error:
                pass
            self._conn = None

    def _acquire(self) -> None:
        """With the lock: take the lease if free (first ending the previous holder's sessions);
        tell the store and the service."""
        free = _FREE if self._eligible else _FREE_DEFERRED
        params = {
            "holder": self._me,
            "url": self._url,
            "lease": self._lease_s,
            "sessions": self._sessions,
            "grace": self._lease_s,
        }
        conn = self._connection()
        self._end_sessions(conn, _END_HOLDER.format(free=free), params)
        sent = time.monotonic()
        try:
            row = conn.execute(_ACQUIRE.format(free=free), params).fetchone()
        except errors.LockNotAvailable:  # a write of the holder's is still committing: next poll
            log.info("the writer's lease row is locked; trying again")
            return
        if row is None:
            found = self._connection().execute(_HOLDER).fetchone()
            self._holder = None if found is None else Lease(str(found[0]), str(found[1]), int(found[2]))
            return
        if row[1] is not None and row[1] != self._sessions:
            self._end_sessions(conn, _END_SESSIONS, {"previous": row[1]})
        self._held = self._holder = Lease(self._me, self._url, int(row[0]))
        self._valid_until = sent + self._lease_s
        self._on_token(self._held.token)
        log.warning("this instance took the writer's lease (token %d)", self._held.token)
        self._on_lease(self._held)

    def _end_sessions(self, conn: psycopg.Connection[Any], sql: str, params: dict[str, Any]) -> None:
        """End the previous holder's store sessions that ``sql`` selects (their open transactions
        are rolled back by the server)."""
        try:
            ended = conn.execute(sql, params).fetchone()
        except errors.InsufficientPrivilege as exc:  # another role's: their own timeouts end them
            log.warning("cannot end the previous writer's sessions (%s); waiting for them", str(exc).strip())
            return
        if ended and ended[0]:
            log.warning("the writer's lease is free: ended %d session(s) of its previous holder", ended[0])

    def _renew(self) -> None:
        """With the lock, holding the lease: extend it, or give it up if it was lost."""
        held = self._held
        assert held is not None
        if time.monotonic() > self._valid_until:  # e.g. resumed after SIGSTOP: another may hold it now
            self._lose("not renewed in time")
            return
        sent = time.monotonic()
        row = self._connection().execute(_RENEW, {"token": held.token, "lease": self._lease_s}).fetchone()
        if self._held is not held:  # given up meanwhile by the watch: the database did not answer in time
            return
        if row is None:
            self._lose("another instance took it")
        else:
            self._valid_until = sent + self._lease_s

    def _watch_loop(self) -> None:
        """Give the lease up once it is past its validity while the lease thread still waits on
        the database: a hung server (stopped, or its storage stalled) keeps its connections
        open, so neither its timeouts nor the kernel's end the renewal, and meanwhile another
        instance may take the lease."""
        while not self._stop.wait(self._lease_s / 4):
            held = self._held
            if held is not None and time.monotonic() > self._valid_until and self._lock.locked():
                self._held = self._holder = None  # the lease thread, once answered, sees it (_renew)
                log.warning("this instance lost the writer's lease (not renewed in time: the database does not answer)")
                self._on_lease(None)

    def _lose(self, why: str) -> None:
        log.warning("this instance lost the writer's lease (%s)", why)
        self._held = self._holder = None  # who holds it now is read at the next poll
        self._on_lease(None)

    def _lease_loop(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                try:
                    if self._held is not None:
                        self._renew()
                    else:
                        self._acquire()
                except (errors.LockNotAvailable, errors.QueryCanceled) as exc:  # the connection is fine
                    log.warning("writer's lease: %s", str(exc).strip())
                    if self._held is not None and time.monotonic() > self._valid_until:
                        self._lose("not renewed in time")
                except psycopg.Error as exc:
                    log.warning("writer's lease: %s", str(exc).strip())
                    self._drop_conn()
                    if self._held is not None and time.monotonic() > self._valid_until:
                        self._lose("the database could not be reached")
                except Exception:  # a callback failed: keep the lease thread alive
                    log.exception("writer's lease: unexpected error")
                wait = self._lease_s / 4 if self._held is not None else self._poll_s
            self._wake.wait(wait)
            self._wake.clear()

    # ------------------------------------------------------------------ notice thread
    def _listen_loop(self) -> None:
        while not self._stop.is_set():
            try:
                with _connect(self._dsn, "streamtree-listen") as conn:
                    for channel in _CHANNELS:
                        conn.execute(f"LISTEN {channel}")
                    while not self._stop.is_set():
                        self._on_log(None, 0)  # at (re)connection, then as the fallback for lost notices
                        for notice in conn.notifies(timeout=RESYNC_EVERY):
                            self._dispatch(notice.channel, notice.payload)
                            if self._stop.is_set():
                                break
            except psycopg.Error as exc:
                log.warning("log notices: %s; reconnecting", str(exc).strip())
                self._stop.wait(self._poll_s)
            except Exception:
                log.exception("log notices: unexpected error")
                self._stop.wait(self._poll_s)

    def _dispatch(self, channel: str, payload: str) -> None:
        if channel == "streamtree_events":
            seq, _, model = payload.partition(" ")
            self._on_log(model, int(seq))
        elif channel == "streamtree_models":
            self._on_log(None, 0)
        else:  # the lease changed hands: read the new holder now rather than at the next poll
            self._wake.set()
