"""The storage interface: what the service needs from a durable store, whatever the engine.

A store holds, per model, its config, an append-only event log numbered 1, 2, 3, ... and
periodic snapshots (the library's own safe byte format, never pickle) with the service-side
state at the same sequence number. A snapshot and the events after it rebuild the model.

Every engine (one module each: :mod:`app.storage.sqlite`, :mod:`app.storage.postgres`) implements
:class:`EventStore` and raises only the exceptions defined here, so its driver's exception
types never reach the service's core.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Self

__all__ = ["EventStore", "IdempotentAnswer", "ModelExists", "SeqConflict", "Snapshot", "StorageError", "StoredModel",
           "Sync"]

#: Durability of a commit: ``"full"`` survives a power cut, ``"normal"`` a killed process only.
Sync = Literal["full", "normal"]


class StorageError(Exception):
    """The store could not do what was asked (I/O error, disk full, lost connection...)."""


class ModelExists(StorageError):
    """A model of that name is already stored."""


class SeqConflict(StorageError):
    """An append does not follow the model's last logged event: it would leave a gap or a duplicate."""


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


class EventStore(ABC):
    """A durable store of models, their event logs and snapshots.

    Every write is one transaction: an append of many events, a snapshot, a model's creation
    or deletion is all-or-nothing, even when the process is killed mid-write. A store is not
    thread-safe; the service calls it from one dedicated thread
    (:class:`app.storage.thread.StoreThread`).

    Every method raises :class:`StorageError` (or a subclass) when the engine fails, and no
    other exception type of the engine's driver.
    """

    @classmethod
    @abstractmethod
    def from_url(cls, url: str, sync: Sync = "full") -> Self:
        """Open the store at ``url`` (the engine's own scheme), creating its schema if missing."""

    @abstractmethod
    def close(self) -> None:
        """Release the store (the engine may compact or checkpoint first)."""

    @abstractmethod
    def claim_first_start(self) -> bool:
        """Return True exactly once per store: on the service's first start."""

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
    def append(self, name: str, first_seq: int, events: Sequence[str],
               keys: Sequence[IdempotentAnswer] = (), window_s: float = 86_400.0) -> None:
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
    def read_events(self, name: str, after: int, limit: int) -> list[tuple[int, str]]:
        """Up to ``limit`` of the model's events numbered above ``after``: ``(seq, event)`` in order."""

    @abstractmethod
    def snapshots(self, name: str) -> list[Snapshot]:
        """The model's snapshots, newest first."""

    @abstractmethod
    def save_snapshot(self, name: str, snapshot: Snapshot, keep: int) -> None:
        """Store a snapshot atomically and keep only the newest ``keep`` of the model's."""
