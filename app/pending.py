"""Delayed labels: features of recent ``predict_proba`` calls, kept by id until labelled."""

from __future__ import annotations

import sys
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, NamedTuple

from .exceptions import PendingFull, PendingIdTaken

__all__ = ["ENTRY_OVERHEAD", "PendingIds", "entry_bytes"]

Key = str | int

#: Bytes an id costs beyond its key and features: the ordered dict's slot and link, the entry
#: tuple, its expiry time and size (how it was measured: ``docs/decisions/pending-ids-memory.md``).
ENTRY_OVERHEAD = 240


def entry_bytes(key: Key, features: dict[str, Any]) -> int:
    """What one pending id is charged: its key, its features' dict, names and values, and
    :data:`ENTRY_OVERHEAD`. Names and values shared with other objects (interned strings,
    small integers, ``True``) are charged anyway, so the charge is at least the real cost.

    Examples
    --------
    >>> entry_bytes("a", {}) < entry_bytes("a", {"x": 1.0}) < entry_bytes("a", {"x": "a longer string"})
    True
    """
    size = ENTRY_OVERHEAD + sys.getsizeof(key) + sys.getsizeof(features)
    for name, value in features.items():
        size += sys.getsizeof(name) + sys.getsizeof(value)
    return size


class _Entry(NamedTuple):
    expires: float
    features: dict[str, Any]
    size: int


class PendingIds:
    """A bounded, expiring, write-once map from prediction id to the features predicted.

    Parameters
    ----------
    max_size
        Most ids kept.
    max_bytes
        Most bytes the kept ids are charged (:func:`entry_bytes`).
    ttl
        Seconds an id stays usable after its prediction.
    clock
        Monotonic time source (injectable for tests).

    Notes
    -----
    An id is written once: predicting again with an id that is pending raises
    :class:`~app.exceptions.PendingIdTaken` (its label must train on the features first sent).
    Ids of *trusted* callers (those who showed an API key) and of the others are kept apart:
    when there is no room, a new id first pushes out the oldest untrusted id; a trusted id may
    then push out the oldest trusted one, while an untrusted id is refused
    (:class:`~app.exceptions.PendingFull`). So a flood from clients without a key never evicts
    the ids of clients with one. Ids live in memory only: a restart forgets them.
    Each kind is kept in expiry order (every id has the same time to live), so expiry is a
    scan from the front.
    """

    def __init__(self, max_size: int, max_bytes: int, ttl: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.max_size = max_size
        self.max_bytes = max_bytes
        self.ttl = ttl
        self.clock = clock
        self.bytes = 0
        self._untrusted_bytes = 0
        self._trusted: OrderedDict[Key, _Entry] = OrderedDict()
        self._untrusted: OrderedDict[Key, _Entry] = OrderedDict()

    def __len__(self) -> int:
        self._expire(self.clock())
        return len(self._trusted) + len(self._untrusted)

    def __contains__(self, key: Key) -> bool:
        return self.get(key) is not None

    def put(self, key: Key, features: dict[str, Any], trusted: bool = True) -> None:
        """Remember ``features`` under ``key``, making room by the rules above.

        Raises
        ------
        PendingIdTaken
            ``key`` is pending already; nothing changed.
        PendingFull
            There is no room that this caller may make; nothing changed.
        """
        now = self.clock()
        self._expire(now)
        if key in self._trusted or key in self._untrusted:
            raise PendingIdTaken()
        size = entry_bytes(key, features)
        if self.max_size == 0 or size > self.max_bytes:
            raise PendingFull()
        extra_ids = len(self._trusted) + len(self._untrusted) + 1 - self.max_size
        extra_bytes = self.bytes + size - self.max_bytes
        if not trusted and (extra_ids > len(self._untrusted) or extra_bytes > self._untrusted_bytes):
            raise PendingFull()  # checked before evicting anything: a refusal changes nothing
        while len(self._trusted) + len(self._untrusted) >= self.max_size or self.bytes + size > self.max_bytes:
            self._pop_oldest(self._untrusted or self._trusted)
        (self._trusted if trusted else self._untrusted)[key] = _Entry(now + self.ttl, features, size)
        self.bytes += size
        if not trusted:
            self._untrusted_bytes += size

    def get(self, key: Key) -> dict[str, Any] | None:
        """The features predicted under ``key``, or None if unknown or expired."""
        self._expire(self.clock())
        entry = self._trusted.get(key) or self._untrusted.get(key)
        return None if entry is None else entry.features

    def discard(self, key: Key) -> None:
        """Forget ``key`` (its label arrived)."""
        entry = self._trusted.pop(key, None)
        if entry is not None:
            self.bytes -= entry.size
            return
        entry = self._untrusted.pop(key, None)
        if entry is not None:
            self.bytes -= entry.size
            self._untrusted_bytes -= entry.size

    def _pop_oldest(self, items: OrderedDict[Key, _Entry]) -> None:
        _, entry = items.popitem(last=False)
        self.bytes -= entry.size
        if items is self._untrusted:
            self._untrusted_bytes -= entry.size

    def _expire(self, now: float) -> None:
        for items in (self._trusted, self._untrusted):
            while items and next(iter(items.values())).expires <= now:
                self._pop_oldest(items)
