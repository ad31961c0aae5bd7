"""Batching writers: ``learn_one`` calls buffered and posted as batches.

A batch is posted when it holds ``batch_size`` events, when ``flush_seconds`` have passed
since its first event was buffered (a timer: a thread for :class:`Writer`, a task for
:class:`AsyncWriter`), on :meth:`~Writer.flush` and on leaving the ``with`` block. Batches
are posted one at a time, in the order their events were given, each with its own
``Idempotency-Key`` (kept over its retries), so the model learns the events in order, once.

A batch that fails (its error after the client's retries, or an interruption of its post:
Ctrl-C, a cancelled task) stops the writer: the error is raised by the next call (or on
leaving the block, or at once if that call posted it; an interruption goes on at once, and
the next call raises :class:`WriterStopped`). The events not acknowledged are in ``unsent``
as :class:`~streamtree.client.bodies.UnsentBatch` es: the failed batch, ``posted`` (the
service may have learned it: its answer may be what was lost), then the events buffered
after it, never sent. Each has its ``Idempotency-Key``: :meth:`Writer.resend` posts them
under those keys, so a batch the service did learn is not learned again.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Hashable, Mapping
from typing import Any, Protocol

from streamtree.client.bodies import UnsentBatch, check_batch_size, new_key
from streamtree.client.encoding import dumps, loads
from streamtree.client.retry import MAX_SECONDS, is_seconds

__all__ = ["AsyncWriter", "Writer"]


class BatchSink(Protocol):
    """What a writer posts through (a remote model)."""

    def encode_event(self, x: Mapping[str, Any], y: Hashable, id: str | int | None = None) -> bytes: ...

    def post_events(self, events: list[bytes], key: str | None = None) -> Any: ...


def _check_seconds(flush_seconds: Any) -> float:
    if not is_seconds(flush_seconds):
        raise ValueError(f"flush_seconds: seconds > 0 and at most {MAX_SECONDS:g}, got {flush_seconds!r}")
    return float(flush_seconds)


class WriterStopped(RuntimeError):
    """A call on a writer after its error was raised, or after it was closed."""


class _Buffered:
    """What both writers keep: the counts the service acknowledged, the buffer, and the first
    error, raised once and then answered with :class:`WriterStopped`."""

    def __init__(self, batch_size: int, flush_seconds: float) -> None:
        self.batch_size = check_batch_size(batch_size)
        self.flush_seconds = _check_seconds(flush_seconds)
        self.learned = 0
        self.seq = 0
        self.unsent: list[UnsentBatch] = []
        self._events: list[bytes] = []
        self._first = 0.0
        self._error: BaseException | None = None
        self._raised = False
        self._closed = False

    def _keep(self, batch: list[bytes], posted: bool, key: str | None = None) -> None:
        """Put ``batch`` at the end of ``unsent``."""
        if batch:
            self.unsent.append(UnsentBatch(key or new_key(), [loads(e) for e in batch], posted))

    def _stop(self, error: BaseException, batch: list[bytes], key: str) -> None:
        """Stop at ``error``, raised by the post of ``batch`` (under ``key``): the batch and
        the events buffered after it go to ``unsent``."""
        self._keep(batch, True, key)
        later, self._events = self._events, []
        self._keep(later, False)
        if isinstance(error, Exception):
            self._error = error
        else:  # Ctrl-C or a cancellation: it goes on now; the next call says what it left
            self._error = WriterStopped(
                f"the post of a batch of {len(batch)} events was interrupted ({type(error).__name__}): "
                "the service may have learned it; it is in unsent with its Idempotency-Key, "
                "and resend() posts it safely"
            )
            self._error.__cause__ = error

    def _count(self, out: Any) -> None:
        """Count a batch the service acknowledged."""
        self.learned, self.seq = self.learned + out["learned"], out["seq"]

    def _check(self) -> None:
        if self._closed:
            raise WriterStopped("this writer is closed")
        self._raise_pending()

    def _raise_pending(self) -> None:
        if self._error is None:
            return
        if self._raised:
            raise WriterStopped(f"this writer stopped at an earlier error: {self._error}") from self._error
        self._raised = True
        raise self._error


class Writer(_Buffered):
    """Buffers ``learn_one`` and posts batches (see the module's description).

    Attributes
    ----------
    learned
        Events the service acknowledged.
    seq
        The ``seq`` of the last batch acknowledged (0 before any).
    unsent
        After an error: the batches not acknowledged, in order, each an
        :class:`~streamtree.client.bodies.UnsentBatch` ``(key, events, posted)``; ``posted``
        ones may have been learned. :meth:`resend` posts them under their keys.
    """

    def __init__(self, model: BatchSink, batch_size: int = 1000, flush_seconds: float = 1.0) -> None:
        super().__init__(batch_size, flush_seconds)
        self._model = model
        self._encode = model.encode_event
        self._lock = threading.Lock()  # guards the buffer, _first, _error and _closed
        self._state = threading.Condition(self._lock)  # the timer waits on it
        self._posting = threading.Lock()  # one batch posted at a time, in order of taking
        self._timer = threading.Thread(target=self._run_timer, name="streamtree-writer", daemon=True)
        self._timer.start()

    def __enter__(self) -> Writer:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        self.close(raise_error=kind is None)

    def learn_one(self, x: Mapping[str, Any], y: Hashable, id: str | int | None = None) -> None:
        """Buffer one event; post the batch if it is full."""
        event = self._encode(x, y, id)
        with self._lock:
            if self._error is not None or self._closed:
                self._check()
            self._events.append(event)
            n = len(self._events)
            if n == 1:
                self._first = time.monotonic()
                self._state.notify()
        if n >= self.batch_size:
            self._post()
            self._raise_pending()

    def flush(self) -> None:
        """Post what is buffered now."""
        with self._state:
            self._check()
        self._post()
        self._raise_pending()

    def close(self, raise_error: bool = True) -> None:
        """Post what is buffered and stop the timer; raise a pending error if ``raise_error``."""
        with self._state:
            if self._closed:
                return
        self._post()
        with self._state:
            self._closed = True
            self._state.notify()
        self._timer.join()
        if raise_error:
            self._raise_pending()

    def resend(self) -> None:
        """Post the batches of ``unsent`` (after an error), in order, each under its
        ``Idempotency-Key``: one the service learned already is answered from its record and
        not learned again. Each acknowledged one leaves ``unsent`` and counts in ``learned``;
        an error stops it (raised; that batch and those after it stay). The writer stays
        stopped: buffer new events in a new writer."""
        with self._posting:
            while self.unsent:
                batch = self.unsent[0] = self.unsent[0]._replace(posted=True)
                out = self._model.post_events([dumps(e) for e in batch.events], batch.key)
                with self._state:
                    del self.unsent[0]
                    self._count(out)

    def _post(self) -> None:
        """Take the buffer and post it (or keep it in ``unsent`` after an error)."""
        with self._posting:
            with self._state:
                batch, self._events = self._events, []
                if self._error is not None:
                    self._keep(batch, False)
                    return
            if not batch:
                return
            key = new_key()
            try:
                out = self._model.post_events(batch, key)
            except BaseException as e:  # an interruption too: its batch is kept, not dropped
                with self._state:
                    self._stop(e, batch, key)
                if not isinstance(e, Exception):
                    raise
                return
            with self._state:
                self._count(out)

    def _run_timer(self) -> None:
        """Post a batch ``flush_seconds`` after its first event, unless it went out before."""
        while True:
            with self._state:
                while not self._events and not self._closed:
                    self._state.wait()
                if self._closed:
                    return
                due = self._first + self.flush_seconds
                first = self._first
                left = due - time.monotonic()
                if left > 0:
                    self._state.wait(left)
                    if self._first != first or not self._events or time.monotonic() < due:
                        continue  # posted (or closed) meanwhile, or woken early: look again
            self._post()


class AsyncBatchSink(Protocol):
    """What an async writer posts through (an async remote model)."""

    def encode_event(self, x: Mapping[str, Any], y: Hashable, id: str | int | None = None) -> bytes: ...

    def post_events(self, events: list[bytes], key: str | None = None) -> Awaitable[Any]: ...


class AsyncWriter(_Buffered):
    """:class:`Writer` for :class:`~streamtree.client.aio.AsyncRemoteModel`: ``await w.learn_one(x, y)``;
    the timer is a task of the running loop."""

    def __init__(self, model: AsyncBatchSink, batch_size: int = 1000, flush_seconds: float = 1.0) -> None:
        super().__init__(batch_size, flush_seconds)
        self._model = model
        self._posting = asyncio.Lock()
        self._timer: asyncio.Task[None] | None = None

    async def __aenter__(self) -> AsyncWriter:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        await self.close(raise_error=kind is None)

    async def learn_one(self, x: Mapping[str, Any], y: Hashable, id: str | int | None = None) -> None:
        """Buffer one event; post the batch if it is full."""
        event = self._model.encode_event(x, y, id)
        self._check()
        self._events.append(event)
        if len(self._events) == 1:
            self._first = time.monotonic()
            if self._timer is None or self._timer.done():
                self._timer = asyncio.get_running_loop().create_task(self._run_timer())
        if len(self._events) >= self.batch_size:
            await self._post()
            self._raise_pending()

    async def flush(self) -> None:
        """Post what is buffered now."""
        self._check()
        await self._post()
        self._raise_pending()

    async def close(self, raise_error: bool = True) -> None:
        """Post what is buffered and stop the timer; raise a pending error if ``raise_error``."""
        if self._closed:
            return
        await self._post()
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
            try:
                await self._timer
            except asyncio.CancelledError:
                pass
        if raise_error:
            self._raise_pending()

    async def resend(self) -> None:
        """:meth:`Writer.resend`, awaited."""
        async with self._posting:
            while self.unsent:
                batch = self.unsent[0] = self.unsent[0]._replace(posted=True)
                out = await self._model.post_events([dumps(e) for e in batch.events], batch.key)
                del self.unsent[0]
                self._count(out)

    async def _post(self) -> None:
        async with self._posting:
            batch, self._events = self._events, []
            if self._error is not None:
                self._keep(batch, False)
                return
            if not batch:
                return
            key = new_key()
            try:
                out = await self._model.post_events(batch, key)
            except BaseException as e:  # a cancellation too: its batch is kept, not dropped
                self._stop(e, batch, key)
                if not isinstance(e, Exception):
                    raise
                return
            self._count(out)

    async def _run_timer(self) -> None:
        while self._events and not self._closed:
            first = self._first
            left = first + self.flush_seconds - time.monotonic()
            if left > 0:
                await asyncio.sleep(left)
            if self._events and self._first == first:
                await self._post()
