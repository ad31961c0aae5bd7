"""Delayed labels: features of recent ``predict_proba`` calls, kept by id until labelled."""

from __future__ import annotations

import sys
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from .exceptions import PendingFull, PendingIdTaken

__all__ = ["ENTRY_OVERHEAD", "IdTaken", "NoRoom", "PendingIds", "Taken", "entry_bytes"]

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


class IdTaken(PendingIdTaken):
    """Entry ``index`` of a :meth:`PendingIds.put_many` names an id that is pending already."""

    def __init__(self, index: int) -> None:
        super().__init__(index)
        self.index = index


class NoRoom(PendingFull):
    """Entry ``index`` of a :meth:`PendingIds.put_many` is the first that does not fit."""

    def __init__(self, index: int) -> None:
        super().__init__(index)
        self.index = index


class _Entry(NamedTuple):
    expires: float
    features: dict[str, Any]
    size: int


class Taken(NamedTuple):
    """An id :meth:`PendingIds.take` removed, as it was: given back by :meth:`PendingIds.restore`
    when the label that took it is not stored after all."""

    key: Key
    entry: _Entry
    trusted: bool


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
    :class:`IdTaken` (its label must train on the features first sent), but for a trusted
    caller's id pending from an untrusted one, which it replaces: otherwise a caller without a
    key could take, ahead of a key holder, an id it will predict under (an order number, say),
    and make the key holder's label train on features it chose.
    Ids of *trusted* callers (those who showed an API key) and of the others are kept apart:
    when there is no room, a new id first pushes out the oldest untrusted id; a trusted id may
    then push out the oldest trusted one, while an untrusted id is refused (:class:`NoRoom`). So a flood from clients without a key never evicts
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
        """Remember ``features`` under ``key``, making room by the rules above
        (:meth:`put_many` of one entry).

        Raises
        ------
        IdTaken
            ``key`` is pending already; nothing changed.
        NoRoom
            There is no room that this caller may make; nothing changed.
        """
        self.put_many(((key, features),), trusted)

    def put_many(self, entries: Sequence[tuple[Key, dict[str, Any]]], trusted: bool = True) -> None:
        """Remember each ``(key, features)`` of ``entries``, all or none, making room by the
        rules above: the oldest ids are pushed out until the whole batch fits.

        With ``n`` entries of ``s_0 + ... + s_{n-1}`` bytes, entry ``j`` is refused when an id
        is pending under its key (but an untrusted id, for a trusted caller: replaced) or an
        earlier entry has it, or when the entries up to ``j``
        cannot fit: ``j + 1 > max_size`` or ``s_0 + ... + s_j > max_bytes``, or, for a caller
        that is not trusted, ``pending + j + 1 - max_size`` ids (or ``bytes + s_0 + ... + s_j
        - max_bytes`` bytes) more than the untrusted ids hold. Every check is made before
        anything is pushed out, and the entries get one expiry time (their order is kept).

        Raises
        ------
        IdTaken
            An entry's key is pending already (or repeated); ``index`` is the first; nothing changed.
        NoRoom
            The batch does not fit in the room this caller may make; ``index`` is the first
            entry past it; nothing changed.
        """
        now = self.clock()
        self._expire(now)
        trusted_ids, untrusted_ids = self._trusted, self._untrusted
        seen: set[Key] = set()
        sizes: list[int] = []
        held = len(trusted_ids) + len(untrusted_ids)
        total = 0
        for j, (key, features) in enumerate(entries):
            if key in trusted_ids or key in seen or (key in untrusted_ids and not trusted):
                raise IdTaken(j)
            seen.add(key)
            size = entry_bytes(key, features)
            total += size
            if j + 1 > self.max_size or total > self.max_bytes:
                raise NoRoom(j)
            if not trusted and (
                held + j + 1 - self.max_size > len(untrusted_ids)
                or self.bytes + total - self.max_bytes > self._untrusted_bytes
            ):
                raise NoRoom(j)  # checked before evicting anything: a refusal changes nothing
            sizes.append(size)
        n = len(sizes)
        if trusted:
            for key, _ in entries:
                if key in untrusted_ids:
                    self._pop(untrusted_ids, key)
        while len(trusted_ids) + len(untrusted_ids) + n > self.max_size or self.bytes + total > self.max_bytes:
            self._pop_oldest(untrusted_ids or trusted_ids)
        target = trusted_ids if trusted else untrusted_ids
        expires = now + self.ttl
        for (key, features), size in zip(entries, sizes, strict=True):
            target[key] = _Entry(expires, features, size)
        self.bytes += total
        if not trusted:
            self._untrusted_bytes += total

    def get(self, key: Key) -> dict[str, Any] | None:
        """The features predicted under ``key``, or None if unknown or expired."""
        self._expire(self.clock())
        entry = self._trusted.get(key) or self._untrusted.get(key)
        return None if entry is None else entry.features

    def take(self, key: Key, features: dict[str, Any] | None = None) -> Taken | None:
        """Forget ``key`` (its label was learned) and return it as it was, for :meth:`restore`
        should that label not be stored; None if it is not pending. With ``features`` (those
        the label was admitted with), only the prediction that holds them: one made under the
        id while the label was learned stays pending."""
        if features is not None:
            held = self._trusted.get(key) or self._untrusted.get(key)
            if held is None or held.features is not features:
                return None
        entry = self._trusted.pop(key, None)
        if entry is not None:
            self.bytes -= entry.size
            return Taken(key, entry, True)
        entry = self._untrusted.pop(key, None)
        if entry is not None:
            self.bytes -= entry.size
            self._untrusted_bytes -= entry.size
            return Taken(key, entry, False)
        return None

    def restore(self, taken: Sequence[Taken]) -> None:
        """Give back ids :meth:`take` removed, with their features and expiry, unless expired
        since or pending again (predicted anew meanwhile: the newer prediction stays). The
        bounds then hold as for :meth:`put_many`: the oldest ids are pushed out, untrusted
        first, so an untrusted id never pushes out a trusted one."""
        now = self.clock()
        self._expire(now)
        touched: list[OrderedDict[Key, _Entry]] = []
        for key, entry, trusted in taken:
            if entry.expires <= now or key in self._trusted or key in self._untrusted:
                continue
            items = self._trusted if trusted else self._untrusted
            items[key] = entry
            self.bytes += entry.size
            if not trusted:
                self._untrusted_bytes += entry.size
            if not any(items is t for t in touched):
                touched.append(items)
        for items in touched:  # back to expiry order (a stable sort: equal expiries keep theirs)
            for key, _ in sorted(items.items(), key=lambda item: item[1].expires):
                items.move_to_end(key)
        while len(self._trusted) + len(self._untrusted) > self.max_size or self.bytes > self.max_bytes:
            self._pop_oldest(self._untrusted or self._trusted)

    def _pop_oldest(self, items: OrderedDict[Key, _Entry]) -> None:
        self._pop(items, next(iter(items)))

    def _pop(self, items: OrderedDict[Key, _Entry], key: Key) -> None:
        entry = items.pop(key)
        self.bytes -= entry.size
        if items is self._untrusted:
            self._untrusted_bytes -= entry.size

    def _expire(self, now: float) -> None:
        for items in (self._trusted, self._untrusted):
            while items and next(iter(items.values())).expires <= now:
                self._pop_oldest(items)
