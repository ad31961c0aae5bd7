"""The event log's export (``GET /models/{name}/events``), streamed with back-pressure.

Built whole, an answer of 10,000 events was read in one call on the store's thread (where
every learn's commit waits its turn), encoded on the event loop in one stretch and handed to
the connection at once: clients that asked and never read held the service's memory, and
clients reading as fast as they could held up single learns (measured:
``docs/decisions/bounded-clients.md``). Here:

- an answer is read and sent a *page* at a time (the log's records that start within
  :data:`PAGE_BYTES`, at most :data:`PAGE_EVENTS` events), and the next page is read only
  once the connection has taken the previous one: a client that does not read holds one page
  and the connection's buffer, not its whole answer;
- each page is its own short call on the store's thread, so the commits of learns take their
  turns between two pages instead of waiting behind a whole answer;
- at most ``max_exports`` answers stream at once (a setting); one more is answered 429 with
  ``Retry-After``; an answer whose client takes nothing for ``export_stall_seconds`` is cut
  off (the connection is closed) and its place freed.

The body is the same JSON document as before, ``{"events": [...]}``; an answer cut off (a
stalled client, or a page the store could not read once the answer had begun) ends without
the terminating chunk, so no client takes a part for the whole.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

import orjson
from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from .exceptions import DamagedRecord, LogUnavailable, NotAvailable
from .hosting import ModelHost

__all__ = ["EXPORTS_BUSY", "ExportSlots", "EventExport", "PAGE_BYTES", "PAGE_EVENTS"]

log = logging.getLogger("streamtree.app")

EXPORTS_BUSY = "Too many event log exports are streaming; retry shortly."
#: Characters of the log's text one page reads (its records that start within them: a page
#: holds at most this plus one record, :data:`app.storage.records.RECORD_BYTES`).
PAGE_BYTES = 128 * 1024
#: Most events one page reads.
PAGE_EVENTS = 1_000


class ExportSlots:
    """At most ``n`` exports streaming at once."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.active = 0

    def take(self) -> bool:
        """Take a place; False if all ``n`` are taken."""
        if self.active >= self.n:
            return False
        self.active += 1
        return True

    def release(self) -> None:
        """Give a place back."""
        self.active -= 1


def encode_page(events: list[dict[str, Any]]) -> bytes:
    """A page's events as the items of a JSON array (no brackets)."""
    return orjson.dumps(events)[1:-1]


class EventExport(Response):
    """The answer to an export: events with ``seq > after``, at most ``limit``, streamed a page
    at a time (module docstring). The first page is read before the answer starts, so a log
    that cannot be read is still a 503 JSON answer.

    Parameters
    ----------
    host
        The model.
    after, limit
        The request's window.
    slots
        The place this export holds (taken by the caller), given back when the answer ends.
    stall_s
        Longest the client may take nothing before the answer is cut off.
    """

    media_type = "application/json"

    def __init__(self, host: ModelHost, after: int, limit: int, slots: ExportSlots, stall_s: float) -> None:
        super().__init__(media_type=self.media_type)
        del self.headers["content-length"]  # streamed: chunked
        self.host, self.after, self.limit = host, after, limit
        self.slots, self.stall_s = slots, stall_s
        self.first: list[dict[str, Any]] = []

    async def read_first(self) -> None:
        """Read the first page (:class:`NotAvailable`, :class:`LogUnavailable` as ``host.events``);
        on any error the slot is given back."""
        try:
            self.first = await self.host.events(self.after, min(PAGE_EVENTS, self.limit), PAGE_BYTES)
        except BaseException:
            self.slots.release()
            raise

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            stream = asyncio.ensure_future(self._stream(send))
            gone = asyncio.ensure_future(_disconnected(receive))
            await asyncio.wait({stream, gone}, return_when=asyncio.FIRST_COMPLETED)
            for task in (stream, gone):
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        finally:
            self.slots.release()

    async def _stream(self, send: Send) -> None:
        """Send the pages; return early (the answer unfinished) on a stall or an unreadable page."""
        if not await self._send(
            send, {"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers}
        ):
            return
        page, sent = self.first, 0
        self.first = []
        while True:
            # the log ends at an empty page (a page may be short of PAGE_EVENTS by its size)
            end = not page or sent + len(page) >= self.limit
            body = (b'{"events":[' if not sent else b"," if page else b"") + encode_page(page) + (b"]}" if end else b"")
            n, last = len(page), page[-1]["seq"] if page else self.after
            del page  # while the client takes the body, only its bytes are held
            sent += n
            if not await self._send(send, {"type": "http.response.body", "body": body, "more_body": not end}):
                return
            if end:
                return
            del body
            try:
                page = await self.host.events(last, min(PAGE_EVENTS, self.limit - sent), PAGE_BYTES)
            except DamagedRecord as exc:
                # the answer ends, whole, before it: the client's next page (after=last) names it
                log.warning("model %r: export ends at seq %d: %s", self.host.name, last, exc)
                await self._send(send, {"type": "http.response.body", "body": b"]}", "more_body": False})
                return
            except (NotAvailable, LogUnavailable) as exc:
                why = "the log could not be read" if isinstance(exc, LogUnavailable) else "the model is going away"
                log.warning("model %r: export cut off after %d events: %s", self.host.name, sent, why)
                return

    async def _send(self, send: Send, message: Message) -> bool:
        """Send, waiting at most ``stall_s`` for the client to take the previous pieces."""
        try:
            await asyncio.wait_for(send(message), self.stall_s)
        except TimeoutError:
            log.warning("model %r: export cut off: the client took nothing for %.0f s", self.host.name, self.stall_s)
            return False
        return True


async def _disconnected(receive: Receive) -> None:
    """Return once the client has gone away."""
    while (await receive())["type"] != "http.disconnect":
        pass
