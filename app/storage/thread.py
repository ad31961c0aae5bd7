"""The store, used from one dedicated thread so that its blocking calls never stall the event loop."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from app.storage.base import EventStore

__all__ = ["StoreThread"]

T = TypeVar("T")


class StoreThread:
    """An :class:`~app.storage.base.EventStore` and the one thread that calls it.

    Parameters
    ----------
    store
        The open store; from now on only this thread uses it.
    """

    def __init__(self, store: EventStore) -> None:
        self.store = store
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="streamtree-db")

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(*args)`` on the store's thread without blocking the event loop."""
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)

    def close(self) -> None:
        """Close the store on its thread, then stop the thread."""
        try:
            self._pool.submit(self.store.close).result()
        finally:
            self._pool.shutdown()
