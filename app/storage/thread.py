"""The store, used from one dedicated thread so that its blocking calls never stall the event loop."""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

from .base import EventStore

__all__ = ["StoreThread"]

T = TypeVar("T")

#: A call to make on the store's thread, and what to do with its result or exception.
_Job = tuple[Callable[..., Any], tuple[Any, ...], Callable[[Any, BaseException | None], None]]


def _resolve(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.cancelled():
        return
    if error is None:
        future.set_result(result)
    else:
        future.set_exception(error)


class StoreThread:
    """An :class:`~app.storage.base.EventStore` and the one thread that calls it.

    A plain thread fed by a queue rather than a ``ThreadPoolExecutor``: every group commit
    passes through here, and the executor's futures, locks and chained callbacks cost the
    event loop more than the handoff itself.

    Parameters
    ----------
    store
        The open store; from now on only this thread uses it.
    """

    def __init__(self, store: EventStore) -> None:
        self.store = store
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._serve, name="streamtree-db", daemon=True)
        self._thread.start()

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(*args)`` on the store's thread without blocking the event loop."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()

        def done(result: Any, error: BaseException | None) -> None:
            try:
                loop.call_soon_threadsafe(_resolve, future, result, error)
            except RuntimeError:  # the loop is closed: nobody is waiting any more
                pass

        self._jobs.put((fn, args, done))
        return await future

    def _serve(self) -> None:
        while (job := self._jobs.get()) is not None:
            fn, args, done = job
            try:
                result = fn(*args)
            except BaseException as exc:  # handed to the caller
                done(None, exc)
            else:
                done(result, None)

    def close(self) -> None:
        """Close the store on its thread, then stop the thread."""
        closed: Future[None] = Future()

        def done(result: Any, error: BaseException | None) -> None:
            if error is None:
                closed.set_result(None)
            else:
                closed.set_exception(error)

        self._jobs.put((self.store.close, (), done))
        self._jobs.put(None)
        try:
            closed.result()
        finally:
            self._thread.join()
