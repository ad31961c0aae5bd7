"""The PostgreSQL engine's schema: an ordered list of migrations and the function that applies them.

The database records its schema version in ``streamtree_schema_version`` (one row). At every
start the service applies, in one transaction, each migration above that version, then
records the new version; a database newer than this code is refused rather than written to.
Migrations are only ever appended: migration ``n`` brings a database from version ``n - 1``
to ``n``, so a database of any older version is brought up to date the same way.

Concurrent starts (several instances on one database) are serialised by a transaction-level
advisory lock, so each migration runs exactly once.

Every table's name starts with ``streamtree_``, so the schema can live in a database that
holds other things.
"""

from __future__ import annotations

from typing import Any

from .base import StorageError

__all__ = ["LOCK_KEY", "MIGRATIONS", "migrate", "schema_version"]

#: The advisory lock taken while migrating (an arbitrary constant: "stree" in ASCII).
LOCK_KEY = 0x7374726565

#: Migration ``i + 1`` is ``MIGRATIONS[i]``; append, never edit a released one.
MIGRATIONS: tuple[str, ...] = (
    # 1: models, their append-only event logs and snapshots.
    """
    CREATE TABLE streamtree_meta (
        key text PRIMARY KEY,
        value text NOT NULL
    );
    CREATE TABLE streamtree_models (
        name text PRIMARY KEY,
        config text NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now()
    );
    CREATE TABLE streamtree_events (
        model text NOT NULL REFERENCES streamtree_models (name) ON DELETE CASCADE,
        seq bigint NOT NULL,
        event text NOT NULL,
        logged_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (model, seq)
    );
    CREATE TABLE streamtree_snapshots (
        model text NOT NULL REFERENCES streamtree_models (name) ON DELETE CASCADE,
        seq bigint NOT NULL,
        model_bytes bytea NOT NULL,
        state text NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (model, seq)
    );
    """,
    # 2: a client's idempotency key per event (nullable: events logged without one keep NULL).
    """
    ALTER TABLE streamtree_events ADD COLUMN idempotency_key text;
    """,
    # 3: the answer to each learn request made with an Idempotency-Key, written with its events.
    """
    CREATE TABLE streamtree_idempotency (
        model text NOT NULL REFERENCES streamtree_models (name) ON DELETE CASCADE,
        key text NOT NULL,
        body_hash text NOT NULL,
        learned integer NOT NULL,
        seq bigint NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (model, key)
    );
    CREATE INDEX streamtree_idempotency_age ON streamtree_idempotency (model, created_at);
    """,
    # 4: one writer per database. The lease row (its fencing token is checked by every append,
    # in the append's transaction), a generation per model (a model deleted and created again
    # is another model to a replica), and notices to replicas: each committed append sends
    # "<last seq> <model>" on streamtree_events, each creation or deletion a notice on
    # streamtree_models.
    """
    CREATE TABLE streamtree_lease (
        id integer PRIMARY KEY CHECK (id = 1),
        token bigint NOT NULL,
        holder text,
        url text,
        holder_pid integer,
        expires_at timestamptz NOT NULL
    );
    INSERT INTO streamtree_lease (id, token, expires_at) VALUES (1, 0, '-infinity');
    ALTER TABLE streamtree_models ADD COLUMN generation bigint GENERATED ALWAYS AS IDENTITY;
    CREATE FUNCTION streamtree_notify_events() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE r record;
    BEGIN
        FOR r IN SELECT model, max(seq) AS seq FROM new_events GROUP BY model LOOP
            PERFORM pg_notify('streamtree_events', r.seq || ' ' || r.model);
        END LOOP;
        RETURN NULL;
    END $$;
    CREATE TRIGGER streamtree_events_notify AFTER INSERT ON streamtree_events
        REFERENCING NEW TABLE AS new_events FOR EACH STATEMENT EXECUTE FUNCTION streamtree_notify_events();
    CREATE FUNCTION streamtree_notify() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM pg_notify(TG_ARGV[0], '');
        RETURN NULL;
    END $$;
    CREATE TRIGGER streamtree_models_notify AFTER INSERT OR DELETE ON streamtree_models
        FOR EACH STATEMENT EXECUTE FUNCTION streamtree_notify('streamtree_models');
    CREATE TRIGGER streamtree_lease_notify AFTER UPDATE OF token ON streamtree_lease
        FOR EACH STATEMENT EXECUTE FUNCTION streamtree_notify('streamtree_lease');
    """,
    # 5: a snapshot's bytes in pieces with a CRC-32 each, so no value comes near PostgreSQL's
    # 1 GB limit (a bytea's text form is twice its size: docs/decisions/background-snapshots.md);
    # rows written before keep their bytes in model_bytes (pieces NULL) and read as before. The
    # lease records the application_name its holder's store sessions carry, so an instance
    # taking an expired lease can end them: a stopped holder's open transaction would
    # otherwise keep its locks for as long as it stays stopped. The lease's notice is sent only
    # when the token changes: sent for each attempt to take the lease (a statement-level trigger
    # fires on zero rows too), it woke the attempting instance itself at once, which tried again:
    # a replica tried about 100 times a second, and the writer, woken too, renewed as often.
    """
    ALTER TABLE streamtree_snapshots ADD COLUMN pieces integer, ADD COLUMN size bigint;
    CREATE TABLE streamtree_snapshot_pieces (
        model text NOT NULL,
        seq bigint NOT NULL,
        piece integer NOT NULL,
        bytes bytea NOT NULL,
        crc bigint NOT NULL,
        PRIMARY KEY (model, seq, piece),
        FOREIGN KEY (model, seq) REFERENCES streamtree_snapshots (model, seq) ON DELETE CASCADE
    );
    ALTER TABLE streamtree_lease ADD COLUMN holder_sessions text;
    DROP TRIGGER streamtree_lease_notify ON streamtree_lease;
    CREATE TRIGGER streamtree_lease_notify AFTER UPDATE OF token ON streamtree_lease
        FOR EACH ROW WHEN (OLD.token IS DISTINCT FROM NEW.token) EXECUTE FUNCTION streamtree_notify('streamtree_lease');
    """,
    # 6: a row of the log is a record of n consecutive events from its seq, their texts joined
    # by newlines (app.storage.records): a batch is one row, not one per event. Rows written
    # before hold one event each. The notice names the last event of the statement's records.
    # A record is compressed with lz4 where the server has it (PostgreSQL 14 on, built with
    # lz4): it costs the server's CPU less than pglz (docs/decisions/batch-ingestion.md).
    """
    ALTER TABLE streamtree_events ADD COLUMN n integer NOT NULL DEFAULT 1;
    DO $$ BEGIN
        ALTER TABLE streamtree_events ALTER COLUMN event SET COMPRESSION lz4;
    EXCEPTION WHEN OTHERS THEN NULL;  -- an older server, or one without lz4: pglz, as before
    END $$;
    CREATE OR REPLACE FUNCTION streamtree_notify_events() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE r record;
    BEGIN
        FOR r IN SELECT model, max(seq + n - 1) AS seq FROM new_events GROUP BY model LOOP
            PERFORM pg_notify('streamtree_events', r.seq || ' ' || r.model);
        END LOOP;
        RETURN NULL;
    END $$;
    """,
)


def schema_version(conn: Any) -> int:
    """The version recorded in the database (0 if it has no streamtree schema yet)."""
    exists = conn.execute("SELECT to_regclass('streamtree_schema_version') IS NOT NULL").fetchone()[0]
    if not exists:
        return 0
    row = conn.execute("SELECT version FROM streamtree_schema_version").fetchone()
    return int(row[0]) if row else 0


def migrate(conn: Any, target: int | None = None) -> tuple[int, int]:
    """Bring the database's schema up to ``target`` (default: the newest) in one transaction.

    Parameters
    ----------
    conn
        An open ``psycopg.Connection`` in autocommit mode (the migration opens its own
        transaction).
    target
        The version to reach; ``None`` for ``len(MIGRATIONS)``. Tests pass a smaller one to
        make an old database.

    Returns
    -------
    tuple of int
        The versions before and after.

    Raises
    ------
    StorageError
        The database's schema is newer than this code knows (written by a later streamtree).
    """
    newest = len(MIGRATIONS) if target is None else target
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_KEY,))
        conn.execute("CREATE TABLE IF NOT EXISTS streamtree_schema_version (version integer NOT NULL)")
        row = conn.execute("SELECT version FROM streamtree_schema_version").fetchone()
        before = int(row[0]) if row else 0
        if before > len(MIGRATIONS):
            raise StorageError(
                f"the database's streamtree schema is version {before}, newer than this "
                f"streamtree's ({len(MIGRATIONS)}): upgrade streamtree to use it"
            )
        for version in range(before + 1, newest + 1):
            conn.execute(MIGRATIONS[version - 1])
        after = max(before, newest)
        if row is None:
            conn.execute("INSERT INTO streamtree_schema_version (version) VALUES (%s)", (after,))
        elif after != before:
            conn.execute("UPDATE streamtree_schema_version SET version = %s", (after,))
    return before, after
