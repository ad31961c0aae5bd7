"""The storage interface: what the service needs from a durable store, whatever the engine.

A store holds, per model, its config, an append-only event log numbered 1, 2, 3, ... and
periodic snapshots (the library's own safe byte format, never pickle) with the service-side
state at the same sequence number. A snapshot and the events after it rebuild the model. A
snapshot's bytes are stored in pieces of bounded size (:data:`PIECE_BYTES`), each with a
checksum, so a model of any size can be stored and read back, and a damaged snapshot is
found out (:meth:`EventStore.read_snapshot` raises) rather than loaded.

Every engine (one module each: :mod:`app.storage.sqlite`, :mod:`app.storage.postgres`) implements
:class:`EventStore` and raises only the exceptions defined here, so its driver's exception
types never reach the service's core.
"""

from __future__ import annotations

import zlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, Self

__all__ = [
    "PIECE_BYTES",
    "Coordinator",
    "EventStore",
    "IdempotentAnswer",
    "Lease",
    "LeaseLost",
    "ModelExists",
    "SeqConflict",
    "Snapshot",
    "StorageError",
    "StoredModel",
    "Sync",
    "checked_piece",
    "join_pieces",
    "open_state",
    "read_pieces",
    "piece_crc",
    "pieces",
    "seal_state",
]

#: Most bytes of a snapshot stored in one value. A snapshot is stored as pieces of at most this
#: size, so no single value comes near an engine's limit (PostgreSQL's 1 GB per value, whose
#: text form doubles a ``bytea``; SQLite's 1 GB per blob), whatever the model's size.
PIECE_BYTES = 16 * 2**20

#: Durability of a commit: ``"full"`` survives a power cut, ``"normal"`` a killed process only.
Sync = Literal["full", "normal"]


class StorageError(Exception):
    """The store could not do what was asked (I/O error, disk full, lost connection...)."""


class ModelExists(StorageError):
    """A model of that name is already stored."""


class SeqConflict(StorageError):
    """An append does not follow the model's last logged event: it would leave a gap or a duplicate."""


class LeaseLost(StorageError):
    """A write was refused because this instance does not hold the writer's lease (any more).

    Nothing of the write happened: another instance is, or may become, the writer.
    """


@dataclass(frozen=True)
class StoredModel:
    """A model's durable identity: its name, its complete config (JSON text) and last seq.

    ``generation`` tells a model from an earlier one of the same name that was deleted (it
    grows with each creation; engines with a single instance may leave it 0).
    """

    name: str
    config: str
    last_seq: int
    generation: int = 0


@dataclass(frozen=True)
class Lease:
    """Who holds the writer's lease: an instance's id, the URL it serves at, the fencing token."""

    holder: str
    url: str
    token: int


@dataclass(frozen=True)
class Snapshot:
    """A model serialised after event ``seq``, with the service-side state (JSON text, sealed:
    :func:`seal_state`)."""

    seq: int
    model_bytes: bytes
    state: str


#: What a sealed state starts with: ``crc32:<8 hex digits>:`` then the JSON text.
_SEAL = "crc32:"


def _state_crc(seq: int, text: str) -> str:
    """CRC-32 of a snapshot's seq and state text, in 8 hex digits."""
    return f"{zlib.crc32(f'{seq}:{text}'.encode()):08x}"


def seal_state(seq: int, text: str) -> str:
    """The service-side state ``text`` of the snapshot at ``seq``, as stored: after a CRC-32 of
    the seq and the text, so that a flipped bit in either (a metric's count, the seq the
    replay resumes after) is found out as a damaged piece of the model's bytes is."""
    return f"{_SEAL}{_state_crc(seq, text)}:{text}"


def open_state(name: str, seq: int, stored: str) -> str:
    """The JSON text of a state stored by :func:`seal_state` for the snapshot at ``seq`` (a
    state stored before the seal, JSON text, as it is).

    Raises
    ------
    StorageError
        Its checksum does not match: the row was damaged.
    """
    if not stored.startswith(_SEAL):
        return stored
    crc, text = stored[len(_SEAL) : len(_SEAL) + 8], stored[len(_SEAL) + 9 :]
    if _state_crc(seq, text) != crc:
        raise StorageError(f"model {name!r}: the state of the snapshot at seq {seq} is damaged (checksum mismatch)")
    return text


def pieces(data: bytes, size: int) -> list[memoryview]:
    """``data`` cut into consecutive pieces of ``size`` bytes (the last one shorter; none for no
    bytes), as views: no piece is copied."""
    if size < 1:
        raise ValueError(f"size is the most bytes a piece holds, at least 1; got {size!r}")
    view = memoryview(data)
    return [view[i : i + size] for i in range(0, len(view), size)]


def piece_crc(data: bytes | memoryview) -> int:
    """The checksum stored with each piece: CRC-32 (``zlib.crc32``, an unsigned 32-bit integer)."""
    return zlib.crc32(data)


def checked_piece(name: str, seq: int, i: int, row: tuple[bytes, int] | None) -> bytes:
    """Piece ``i`` of a snapshot as read (``(bytes, crc)``, or None if missing), once it is there
    and its checksum matches.

    Raises
    ------
    StorageError
        The piece is missing, or its bytes differ from those written.
    """
    if row is None:
        raise StorageError(f"model {name!r}: snapshot at seq {seq} lacks its piece {i}")
    data, crc = bytes(row[0]), int(row[1])
    if piece_crc(data) != crc:
        raise StorageError(f"model {name!r}: snapshot at seq {seq} is corrupt (piece {i} fails its checksum)")
    return data


def join_pieces(name: str, seq: int, parts: list[bytes], size: int | None) -> bytes:
    """A snapshot's checked pieces as one value (``parts`` is emptied, so the pieces are freed
    before the caller decodes the whole: at most twice the snapshot's size is held meanwhile).

    Raises
    ------
    StorageError
        Their total is not the ``size`` written.
    """
    data = b"".join(parts)
    parts.clear()
    if size is not None and len(data) != size:
        raise StorageError(f"model {name!r}: snapshot at seq {seq} holds {len(data)} bytes, not {size}")
    return data


def read_pieces(
    name: str, seq: int, count: int, size: int | None, fetch: Callable[[int], tuple[bytes, int] | None]
) -> bytes:
    """A snapshot's bytes from its ``count`` pieces, each read with ``fetch(i)`` (the engine's
    ``(bytes, crc)`` row, or None), checked (:func:`checked_piece`) and joined (:func:`join_pieces`)."""
    return join_pieces(name, seq, [checked_piece(name, seq, i, fetch(i)) for i in range(count)], size)


@dataclass(frozen=True)
class IdempotentAnswer:
    """A learn request made with an ``Idempotency-Key``: what it was and what it was answered.

    Logged in the same transaction as the request's events, so a retry of the request (same
    key) is recognised even after a restart, or by another instance on the same database.
    """

    key: str
    """The client's ``Idempotency-Key``."""
    body_hash: str
    """A digest of the request's events (hex sha256), to tell a retry from another request."""
    learned: int
    """How many events the request learned."""
    seq: int
    """The sequence number of its last event."""


class Coordinator(ABC):
    """The writer's lease and the log's change notices of a store shared by several instances.

    One instance at a time holds the lease; its store's appends carry the lease's fencing
    token and are refused (:class:`LeaseLost`) once another instance took the lease, in the
    same transaction as the append, so a writer paused past its lease cannot append after it
    resumes. The coordinator runs its own threads (renewal must not wait on the service's
    event loop) and reports through the callbacks given to :meth:`start`, from those threads.
    """

    @abstractmethod
    def start(self, on_lease: Callable[[Lease | None], None], on_log: Callable[[str | None, int], None]) -> None:
        """Start competing for the lease and watching the log.

        Parameters
        ----------
        on_lease
            Called with the lease when this instance takes it, and with None when it loses it
            (or can no longer tell that it holds it).
        on_log
            Called with ``(model, seq)`` when events up to ``seq`` of ``model`` are committed,
            with ``(None, 0)`` when models were created or deleted, and periodically (a
            fallback for lost notices) also with ``(None, 0)``.
        """

    @abstractmethod
    def try_acquire(self) -> Lease | None:
        """Take the lease now if it is free (expired, or its holder's session is gone); the lease or None."""

    @abstractmethod
    def holder(self) -> Lease | None:
        """The lease as last read from the store (None: nobody holds a live one)."""

    @abstractmethod
    def set_eligible(self, eligible: bool) -> None:
        """Whether this instance takes the lease as soon as it is free (True, at first) or only
        once it has been free for a further lease length (False), so that an instance that
        serves every model takes it first; one that cannot (a model it could not rebuild)
        still takes it when no other does."""

    @abstractmethod
    def release(self) -> None:
        """Give the lease up now if held (``on_lease(None)`` follows), and keep competing for it."""

    @abstractmethod
    def close(self) -> None:
        """Stop the threads and release the lease if held (a clean stop hands over at once)."""


class EventStore(ABC):
    """A durable store of models, their event logs and snapshots.

    Every write is one transaction: an append of many events, a snapshot, a model's creation
    or deletion is all-or-nothing, even when the process is killed mid-write. A store is not
    thread-safe; the service calls it from one dedicated thread
    (:class:`app.storage.thread.StoreThread`).

    Every method raises :class:`StorageError` (or a subclass) when the engine fails, and no
    other exception type of the engine's driver.
    """

    #: Most bytes of a snapshot stored in one value (engines take it at construction too;
    #: tests set a small one to see snapshots of many pieces).
    piece_bytes: int = PIECE_BYTES

    @classmethod
    @abstractmethod
    def from_url(cls, url: str, sync: Sync = "full") -> Self:
        """Open the store at ``url`` (the engine's own scheme), creating its schema if missing."""

    @abstractmethod
    def close(self) -> None:
        """Release the store (the engine may compact or checkpoint first)."""

    def own(self) -> None:
        """Claim a store that one instance owns (no :meth:`coordinator`) for this process until
        :meth:`close`; :class:`StorageError` naming it if another process holds it. The
        default, for a shared store, claims nothing (its writer holds the lease)."""
        return None

    def coordinator(self, holder: str, url: str, lease_s: float, poll_s: float) -> Coordinator | None:
        """The lease and change notices of a store that several instances share; None (the
        default) for a store that one instance owns, whose instance is always the writer.

        Once a store has handed out its coordinator, its writes are fenced: they need the
        lease (:class:`LeaseLost` otherwise).

        Parameters
        ----------
        holder
            This instance's id (unique per process).
        url
            Where other instances reach this one (to forward writes to it when it is the writer).
        lease_s
            How long the lease lasts without renewal: a writer that stops renewing loses it
            after this long (or at once if its database session ends).
        poll_s
            How often a non-writer tries to take the lease and re-reads the log without a notice.
        """
        return None

    @abstractmethod
    def claim_first_start(self, model: str, config: str) -> bool:
        """Return True exactly once per store: on the service's first start; that start's model
        ``model`` (``config``, unless a model of that name exists) is recorded in the same
        transaction, so a start that fails after the claim still leaves it in the store."""

    @abstractmethod
    def models(self) -> list[StoredModel]:
        """All models, by name, with their last logged sequence number."""

    @abstractmethod
    def create_model(self, name: str, config: str) -> None:
        """Record a new model.

        Raises
        ------
        ModelExists
            The name is taken (also by a model whose deletion did not finish).
        """

    @abstractmethod
    def delete_model(self, name: str) -> None:
        """Remove a model with its event log and snapshots, in one transaction (no-op if absent)."""

    @abstractmethod
    def append(
        self,
        name: str,
        first_seq: int,
        events: Sequence[str],
        keys: Sequence[IdempotentAnswer] = (),
        window_s: float = 86_400.0,
    ) -> None:
        """Append events numbered ``first_seq, first_seq + 1, ...`` in one transaction.

        Returns only once the transaction is committed (with ``sync="full"``: on disk).

        Parameters
        ----------
        name, first_seq, events
            The model, the number of the first event, the events' texts.
        keys
            The idempotency keys of the requests whose events these are, recorded in the same
            transaction (a key older than ``window_s`` seconds may be replaced or forgotten).
        window_s
            How long a key is kept, in seconds.

        Raises
        ------
        SeqConflict
            ``first_seq`` does not follow the last logged event, or a key is recorded already
            (within the window); nothing is written, so the log never has a gap or a duplicate.
        """

    @abstractmethod
    def find_idempotent(self, name: str, key: str, window_s: float) -> IdempotentAnswer | None:
        """The model's request logged with ``key`` less than ``window_s`` seconds ago, if any."""

    @abstractmethod
    def read_events(self, name: str, after: int, limit: int, max_bytes: int | None = None) -> list[tuple[int, str]]:
        """Up to ``limit`` of the model's events numbered above ``after``: ``(seq, event)`` in order;
        with ``max_bytes``, only those of the records that start within ``max_bytes`` of text
        (at least one record: :func:`app.storage.records.within`), so a page of events whose
        size is not known beforehand is bounded (fewer than ``limit`` then does not mean the
        log ends there)."""

    @abstractmethod
    def snapshot_seqs(self, name: str) -> list[int]:
        """The seqs of the model's snapshots, newest first (their bytes are not read)."""

    @abstractmethod
    def read_snapshot(self, name: str, seq: int) -> Snapshot:
        """The model's snapshot at ``seq``, read piece by piece.

        Raises
        ------
        StorageError
            There is none at ``seq`` (any more), it cannot be read, or a piece differs from
            what was written (its checksum does not match): the caller may try an older one,
            or rebuild the model from its log.
        """

    def snapshots(self, name: str) -> list[Snapshot]:
        """The model's snapshots, newest first, all read (each held in memory: tests and tools;
        the service reads one at a time with :meth:`read_snapshot`)."""
        return [self.read_snapshot(name, seq) for seq in self.snapshot_seqs(name)]

    @abstractmethod
    def save_snapshot(self, name: str, snapshot: Snapshot, keep: int) -> None:
        """Store a snapshot atomically and keep only the newest ``keep`` of the model's.

        The model's bytes are stored as pieces of at most the store's ``piece_bytes``
        (:data:`PIECE_BYTES` by default) in the same transaction, each with a checksum
        (CRC-32) that :meth:`read_snapshot` checks.
        """
