"""Service settings, read from ``STREAMTREE_*`` environment variables and the command line."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from .http_client import parse_url
from .storage import check_url, redact

__all__ = ["Settings"]

KiB = 1024
MiB = 1024 * KiB


class Settings(BaseSettings):
    """Every tunable of the service, with safe defaults.

    Each field is read from the environment variable ``STREAMTREE_<FIELD>`` (case-insensitive),
    e.g. ``STREAMTREE_DATA_DIR=/data``; ``streamtree serve`` flags override the environment.

    Parameters
    ----------
    data_dir
        Directory holding the SQLite database (event log and snapshots); created if missing.
        Accepted but unused when ``database_url`` names a PostgreSQL database.
    database_url
        Where the event log and snapshots are, as a URL whose scheme picks the engine:
        ``postgresql://user:password@host:port/dbname`` (everything in that database: a new
        instance needs only the URL) or ``sqlite:///path/to/file``. Empty: the SQLite
        database under ``data_dir``.
    host, port
        Address uvicorn binds to.
    api_keys
        Comma-separated bearer keys (or a JSON list of them). Empty: no authentication. Set:
        every write (learn, model create/delete) needs ``Authorization: Bearer <key>``.
    protect_reads
        Also require a key for reads (predictions, model data, metrics); needs ``api_keys``.
    forwarded_allow_ips
        The addresses of the reverse proxies whose ``X-Forwarded-For`` and
        ``X-Forwarded-Proto`` are believed (comma-separated, ``*`` for any): the client's
        address (the dashboard's sign-in throttle) and ``https`` (its cookie's ``Secure``)
        are then theirs. Empty (the default): no proxy is believed, so a client cannot name
        another address.
    max_body_bytes
        Largest accepted request body; larger ones get 413 before they are parsed.
    max_held_body_bytes
        Most bytes of request bodies the server holds at once, summed over the requests being
        read, parsed or waiting their turn (each until it is answered): a request that would
        take the sum past it gets 503 with ``Retry-After`` (JSON naming the setting), unread.
        At least ``max_body_bytes``.
    max_header_bytes, max_head_bytes, max_headers
        Request heads (:mod:`app.http_protocol`): the longest header (name and value) or
        request target, the longest head (request line and every header) and the most
        headers. Beyond one: 431 (414 for the target), JSON naming the setting; an unfinished
        head is never held beyond ``max_head_bytes``.
    request_read_seconds
        A request's head and body must arrive within this time of its first byte (of the
        connection, for its first request); else 408 and the connection is closed.
    max_connections
        Most connections open at once; a request on one past it gets 503 (JSON naming the
        setting) and its connection is closed.
    send_stall_seconds
        A connection whose client takes none of an answer for this long (the server's send
        buffer full all that time) is cut off, its unsent bytes dropped: an answer a client
        does not read is not held for as long as the client likes.
    max_batch
        Most events (learn) or instances (predict) in one request.
    max_answer_values
        Most values in one answer of a batch: instances x labels for a prediction, instances
        x (labels + decisions) for a decision, nodes x (classes + 6) for a model's tree; a
        batch over it gets 422 at ``["body", "instances"]`` naming how many instances fit, a
        tree at ``["query", "member"]``.
    max_features
        Most features in one event or instance.
    max_string_length
        Longest feature name, string feature value, string label or id.
    max_labels
        Most distinct labels one model may learn; a new label beyond it is refused with 422.
    max_models
        Most models the service holds.
    max_trees, max_tree_nodes, max_model_features, max_model_categories, max_tree_bytes
        Bounds on the models a write key may create (:mod:`app.model_limits`): a forest's
        ``n_trees``, each tree's ``max_nodes``, a model's ``max_features`` and
        ``max_categories``, and each tree's memory budget ``max_bytes``. A config over one
        (the library's defaults included) is refused with 422 naming the parameter.
    max_exports, export_stall_seconds
        Event log exports (``GET /models/{name}/events``, :mod:`app.export`): how many may
        stream at once (one more is answered 429 with ``Retry-After``), and how long one
        whose client reads nothing is kept before it is cut off.
    pending_max, pending_max_bytes, pending_ttl_seconds
        Delayed labels, per model: how many ``predict_proba`` ids are remembered, how many
        bytes their features may take (each id is charged :func:`app.pending.entry_bytes`,
        at least what it holds: ``docs/decisions/pending-ids-memory.md``), and for how long. Ids of callers without an API key never push out those of callers with one.
    snapshot_every
        Write a snapshot after this many events since the last one (also on SIGTERM).
    snapshot_pace
        And no sooner than this many times the last snapshot's duration after it ended, so that
        snapshots (each a whole copy of the model) take at most ``1 / (1 + snapshot_pace)`` of
        the time however fast events come (0: after every ``snapshot_every`` events).
    snapshots_kept
        Snapshots kept per model; older ones are deleted (the event log is never truncated).
    sync
        Durability of each commit. ``full`` (SQLite ``synchronous=FULL``, PostgreSQL
        ``synchronous_commit=on``) has the log on disk before acknowledging (survives power
        loss); ``normal`` (``NORMAL``, ``off``) survives a killed service process but not a
        power cut (nor, on PostgreSQL, a database crash).
    metrics_window
        Number of most recent labelled events in the "recent" prequential metrics.
    metrics_bins
        Number of equal-width confidence bins in the reliability diagram and ECE.
    history_every, history_seconds
        The metrics history takes a point every ``history_every`` events, and at the first
        event ``history_seconds`` after the previous point (slow streams).
    history_points
        Most points (and most drift events) a model's metrics history keeps; oldest dropped.
    group_max_events
        Most events one group commit applies and logs in one transaction.
    idempotency_window_seconds
        How long, per model, the answer to a learn request made with an ``Idempotency-Key`` is
        kept (in the store, with its events): a retry with that key within the window gets the
        first answer and learns nothing; after it the key may be forgotten (used afresh).
    advertise_url
        Where the other instances of a deployment reach this one (``http://host:port``), to
        forward writes to it while it is the writer. Empty: ``http://<host>:<port>``, with
        the machine's host name when ``host`` binds every address.
    lease_seconds
        PostgreSQL deployments: how long the writer's lease lasts unrenewed (it is renewed
        every quarter of that). A writer that stops (SIGSTOP, a hung machine) is replaced
        after about this long; one whose process dies, within ``lease_poll_seconds``.
    lease_poll_seconds
        How often an instance that is not the writer tries to take the lease.
    min_seq_timeout_seconds
        Longest a prediction with ``min_seq`` waits for this instance to apply that event
        (503 past it).
    forward_wait_seconds
        Longest a replica looks for a writer to forward a write to, through a failover
        (503 past it); and the time limit of the forwarded request itself.
    log_level
        uvicorn log level.
    """

    # allow_inf_nan: "inf" seconds passed "gt=0"; a snapshot stored it as null and was never read back
    model_config = SettingsConfigDict(env_prefix="STREAMTREE_", extra="ignore", allow_inf_nan=False)

    data_dir: Path = Path("./data")
    database_url: str | None = None
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=0, le=65535)
    api_keys: Annotated[list[str], NoDecode] = Field(default_factory=list)
    protect_reads: bool = False
    forwarded_allow_ips: str = ""
    max_body_bytes: int = Field(default=4 * MiB, ge=1024)
    max_header_bytes: int = Field(default=8 * KiB, ge=1 * KiB, le=1 * MiB)
    max_head_bytes: int = Field(default=64 * KiB, ge=4 * KiB, le=16 * MiB)
    max_headers: int = Field(default=100, ge=10, le=10_000)
    request_read_seconds: float = Field(default=60.0, gt=0, le=3600)
    max_connections: int = Field(default=1_000, ge=10, le=1_000_000)
    max_held_body_bytes: int = Field(default=16 * MiB, ge=1024)
    send_stall_seconds: float = Field(default=60.0, gt=0, le=3_600)
    max_batch: int = Field(default=10_000, ge=1)
    max_answer_values: int = Field(default=2_000_000, ge=1_000)
    max_features: int = Field(default=1_000, ge=1)
    max_string_length: int = Field(default=256, ge=1)
    max_labels: int = Field(default=1_000, ge=2)
    max_models: int = Field(default=100, ge=1)
    max_trees: int = Field(default=100, ge=1, le=1_000)
    max_tree_nodes: int = Field(default=1_000_000, ge=1)
    max_model_features: int = Field(default=10_000, ge=1)
    max_model_categories: int = Field(default=10_000, ge=1)
    max_tree_bytes: int = Field(default=256 * MiB, ge=MiB)
    max_exports: int = Field(default=4, ge=1, le=1_000)
    export_stall_seconds: float = Field(default=30.0, gt=0, le=3_600)
    pending_max: int = Field(default=10_000, ge=0)
    pending_max_bytes: int = Field(default=20 * MiB, ge=64 * 1024)
    pending_ttl_seconds: float = Field(default=3600.0, gt=0)
    snapshot_every: int = Field(default=10_000, ge=1)
    snapshot_pace: float = Field(default=10.0, ge=0, le=1_000)
    snapshots_kept: int = Field(default=2, ge=1, le=1_000)
    sync: Literal["full", "normal"] = "full"
    metrics_window: int = Field(default=1_000, ge=1, le=1_000_000)  # allocated per model at start
    metrics_bins: int = Field(default=10, ge=1, le=100)
    history_every: int = Field(default=100, ge=1)
    history_seconds: float = Field(default=30.0, gt=0)
    history_points: int = Field(default=1_000, ge=2, le=100_000)
    group_max_events: int = Field(default=20_000, ge=1)
    idempotency_window_seconds: float = Field(default=86_400.0, gt=0, le=366 * 86_400)
    advertise_url: str | None = None
    lease_seconds: float = Field(default=3.0, ge=0.5, le=600)
    lease_poll_seconds: float = Field(default=0.25, ge=0.01, le=60)
    min_seq_timeout_seconds: float = Field(default=5.0, ge=0, le=300)
    forward_wait_seconds: float = Field(default=15.0, gt=0, le=600)
    log_level: Literal["critical", "error", "warning", "info", "debug"] = "info"

    @field_validator("api_keys", mode="before")
    @classmethod
    def _split_keys(cls, value: object) -> object:
        """Accept ``"k1,k2"`` (environment form), ``'["k1", "k2"]'`` (JSON, as pydantic reads
        other lists from the environment) and a list; drop blanks."""
        if isinstance(value, str) and value.lstrip().startswith("["):
            try:
                value = json.loads(value)
            except ValueError:
                raise ValueError('a JSON list of keys, as ["key1", "key2"], or keys separated by commas') from None
            if not isinstance(value, list) or not all(isinstance(k, str) for k in value):
                raise ValueError('a JSON list of keys is a list of strings, as ["key1", "key2"]')
        elif isinstance(value, str):
            value = value.split(",")
        if isinstance(value, (list, tuple)):
            keys = [str(k).strip() for k in value]
            return [k for k in keys if k]
        return value

    @field_validator("api_keys")
    @classmethod
    def _check_keys(cls, keys: list[str]) -> list[str]:
        """Refuse keys that are too short to be secret or contain whitespace."""
        for key in keys:
            if len(key) < 16:
                raise ValueError("each API key must be at least 16 characters long")
            if any(c.isspace() for c in key):
                raise ValueError("API keys must not contain whitespace")
            if not all("!" <= c <= "~" for c in key):  # no HTTP client could send it in a header
                raise ValueError("API keys are printable ASCII characters")
        return keys

    @model_validator(mode="after")
    def _reads_need_keys(self) -> Settings:
        """Refuse ``protect_reads`` without ``api_keys``: reads would be open while the
        operator believes them protected."""
        if self.protect_reads and not self.api_keys:
            raise ValueError("protect_reads needs api_keys: without a key every read would stay open")
        return self

    @model_validator(mode="after")
    def _held_fits_a_body(self) -> Settings:
        """Refuse ``max_held_body_bytes`` under ``max_body_bytes``: a body allowed in size
        could never be held."""
        if self.max_held_body_bytes < self.max_body_bytes:
            raise ValueError(
                f"max_held_body_bytes ({self.max_held_body_bytes}) must be at least max_body_bytes "
                f"({self.max_body_bytes}), or a body of that size could never be accepted"
            )
        return self

    @field_validator("database_url")
    @classmethod
    def _check_database_url(cls, url: str | None) -> str | None:
        """Refuse a URL whose scheme names no storage engine."""
        return check_url(url) if url else None

    @field_validator("advertise_url")
    @classmethod
    def _check_advertise_url(cls, url: str | None) -> str | None:
        """Refuse an advertised URL that is not ``http://host[:port]`` (instances talk plain HTTP
        on their private network)."""
        if not url:
            return None
        try:
            parse_url(url)
        except ValueError:
            raise ValueError("the advertised URL is http://host:port") from None
        return url.rstrip("/")

    def store_shown(self) -> str:
        """Where the store is, for messages and logs: the database URL without its password,
        or the data directory."""
        return redact(self.database_url) if self.database_url else str(self.data_dir)

    def own_url(self) -> str:
        """:attr:`advertise_url`, or ``http://<host>:<port>`` (the host name if ``host`` binds every address)."""
        if self.advertise_url:
            return self.advertise_url
        host = socket.gethostname() if self.host in ("0.0.0.0", "::", "") else self.host
        return f"http://[{host}]:{self.port}" if ":" in host else f"http://{host}:{self.port}"

    @field_validator("data_dir", mode="before")
    @classmethod
    def _not_empty(cls, path: object) -> object:
        """Refuse an empty path: it would silently be the working directory (``.`` says so)."""
        if isinstance(path, str) and not path.strip():
            raise ValueError("an empty data directory would be the working directory; give a path (. for it)")
        return path

    @field_validator("data_dir")
    @classmethod
    def _check_data_dir(cls, path: Path) -> Path:
        """Refuse a data directory path that exists but is not a directory."""
        if path.exists() and not path.is_dir():
            raise ValueError(f"{path} exists and is not a directory")
        return path
