"""Delayed labels: features of recent ``predict_proba`` calls, kept by id until labelled."""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

__all__ = ["PendingIds"]


class PendingIds:
    """A bounded, expiring map from prediction id to the features that were predicted.

    Parameters
    ----------
    max_size
        Most ids kept; adding one more drops the oldest.
    ttl
        Seconds an id stays usable after its prediction.
    clock
        Monotonic time source (injectable for tests).

    Notes
    -----
    Ids live in memory only: a restart forgets them (they are not acknowledged events).
    Entries are kept in expiry order, since every entry has the same time to live and a
    re-used id moves to the end, so expiry is a scan from the front.
    """

    def __init__(self, max_size: int, ttl: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.max_size = max_size
        self.ttl = ttl
        self.clock = clock
        self._items: OrderedDict[str | int, tuple[float, dict[str, Any]]] = OrderedDict()

    def __len__(self) -> int:
        self._expire(self.clock())
        return len(self._items)

    def put(self, key: str | int, features: dict[str, Any]) -> None:
        """Remember ``features`` under ``key`` (replacing an earlier prediction with that id)."""
        if self.max_size == 0:
            return
        now = self.clock()
        self._expire(now)
        self._items.pop(key, None)
        self._items[key] = (now + self.ttl, features)
        while len(self._items) > self.max_size:
            self._items.popitem(last=False)

    def get(self, key: str | int) -> dict[str, Any] | None:
        """The features predicted under ``key``, or None if unknown or expired."""
        self._expire(self.clock())
        item = self._items.get(key)
        return None if item is None else item[1]

    def discard(self, key: str | int) -> None:
        """Forget ``key`` (its label arrived)."""
        self._items.pop(key, None)

    def _expire(self, now: float) -> None:
        items = self._items
        while items:
            key, (expires, _) = next(iter(items.items()))
            if expires > now:
                break
            del items[key]
