"""The HTTP/1.1 protocol ``streamtree serve`` runs: uvicorn's httptools protocol with bounded
request heads, and JSON answers to the requests it refuses before the application sees them.

uvicorn's httptools protocol sets no limit on a request's head: the parser gathers a header's
value piece by piece until the line ends, so a client sending an unfinished header made the
process hold all of it, and any number of headers was accepted (what that cost, measured:
``docs/decisions/bounded-clients.md``). Here the head is bounded three ways, each an operator
setting:

- the whole head (request line and headers, ``max_head_bytes``): counted as the bytes arrive,
  before the parser gathers them, so an unfinished head costs at most about that much memory
  (plus one read of the socket) however long it grows;
- one header, name and value (``max_header_bytes``), and the request target (the same limit);
- the number of headers (``max_headers``).

A request must also arrive whole, head and body, within ``request_read_seconds`` of its first
byte (for a new connection: of the connection), else it is answered ``408 Request Timeout``
(JSON naming the setting) and the connection is closed: a client that stops half-way through
its body, or opens a connection and sends nothing, no longer holds memory and a socket for as
long as it likes. Between requests, uvicorn's keep-alive timeout closes an idle connection.
A request on a connection past the first ``max_connections`` open is answered ``503`` (JSON
naming the setting) and its connection closed.

An answer is written whole to the connection's send buffer, and the transport keeps what the
client has not taken: a client that asks for a large answer and reads none of it held it in
the server's memory until its connection closed, which it need never do. While the send
buffer is over its high-water mark (from the transport's ``pause_writing`` to its
``resume_writing``), a client that takes none of it for ``send_stall_seconds`` is cut off:
the connection aborted, its unsent bytes dropped, with a warning naming the setting. A slow
client that takes some within each such period is served to the end.

A head over a limit is answered ``431 Request Header Fields Too Large`` (``414 URI Too Long``
for the target) with a JSON body naming the limit, and the connection is closed. A request the
parser cannot read (a malformed request line or header) is answered 400 with a JSON body too,
where uvicorn answers plain text. Either answer is written unless a response is being
written on the connection already (a client that pipelines requests): then the connection
is closed without one.
"""

from __future__ import annotations

import asyncio
import fcntl
import logging
import sys
import termios
from typing import Any

import orjson
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

__all__ = ["MALFORMED", "LimitedHttpToolsProtocol", "limited_protocol"]

log = logging.getLogger("streamtree.app")

#: The ioctl that reads a socket's unsent bytes (``SIOCOUTQ``, equal to ``TIOCOUTQ``): Linux only.
_SIOCOUTQ: int | None = termios.TIOCOUTQ if sys.platform.startswith("linux") else None

MALFORMED = "Malformed HTTP request: the request line or a header could not be parsed."


class _Refused(Exception):
    """Raised from a parser callback to stop parsing a head over a limit."""


class LimitedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with bounded request heads (module docstring).

    The limits are class attributes: :func:`limited_protocol` makes a subclass with an
    operator's values, which uvicorn instantiates once per connection.
    """

    max_header_bytes: int = 8 * 1024
    max_head_bytes: int = 64 * 1024
    max_headers: int = 100
    request_read_seconds: float = 60.0
    max_connections: int = 1_000
    send_stall_seconds: float = 60.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._in_head = True  # between two requests, or in a head: bytes received count against its limit
        self._head_bytes = 0
        self._refusal: tuple[int, str] | None = None
        self._deadline: asyncio.TimerHandle | None = None  # the request being read must be in by then
        self._stall: asyncio.TimerHandle | None = None  # the client must take some of the answer by then

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()  # a connection that sends nothing is a request that never arrives

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        self._unstall()
        super().connection_lost(exc)

    # the send-side stall
    def pause_writing(self) -> None:
        super().pause_writing()
        self._watch_send(self._unsent())

    def resume_writing(self) -> None:
        self._unstall()
        super().resume_writing()

    def _watch_send(self, unsent: int) -> None:
        """Check in ``send_stall_seconds`` that the client took some of the ``unsent`` bytes
        (while writing is paused the application adds none: uvicorn's ``send`` waits)."""
        self._unstall()
        self._stall = self.loop.call_later(self.send_stall_seconds, self._check_send, unsent)

    def _unsent(self) -> int:
        """Bytes written and not yet taken by the client: the transport's buffer, and the
        kernel's send queue where it tells (Linux ``SIOCOUTQ``). The transport refills the
        kernel's queue only once a third of it is free (about 1 MiB on loopback), so its own
        buffer alone stands still while a slow client reads."""
        unsent = self.transport.get_write_buffer_size()
        sock = self.transport.get_extra_info("socket")
        if sock is not None and _SIOCOUTQ is not None:
            try:
                queued = fcntl.ioctl(sock.fileno(), _SIOCOUTQ, b"\0\0\0\0")
                unsent += int.from_bytes(queued, sys.byteorder, signed=True)
            except OSError:
                pass
        return unsent

    def _unstall(self) -> None:
        if self._stall is not None:
            self._stall.cancel()
            self._stall = None

    def _check_send(self, unsent: int) -> None:
        self._stall = None
        now = self._unsent()
        if now < unsent:  # a slow client, but one that reads: watch on
            self._watch_send(now)
            return
        log.warning(
            "connection cut off: the client took nothing of its answer for %g s (send_stall_seconds); "
            "%d bytes unsent dropped",
            self.send_stall_seconds,
            now,
        )
        self.transport.abort()

    def data_received(self, data: bytes) -> None:
        if not self._in_head:
            super().data_received(data)
            return
        room = self.max_head_bytes - self._head_bytes
        if len(data) <= room:
            self._head_bytes += len(data)
            super().data_received(data)
            return
        # Only the head's allowance is parsed: if the head is still unfinished after it, it is
        # over the limit, and the rest is never gathered.
        if room > 0:
            self._head_bytes += room
            super().data_received(data[:room])
        if self.transport.is_closing():
            return
        if self._in_head:
            self._refuse(
                431,
                f"The request head (request line and headers) is over {self.max_head_bytes} bytes (max_head_bytes).",
            )
            return
        super().data_received(data[room:])  # the head ended within its allowance: the body follows

    # parser callbacks
    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._in_head = True
        self._arm()

    def on_url(self, url: bytes) -> None:
        super().on_url(url)
        if len(self.url) > self.max_header_bytes:
            self._stop(414, f"The request target is over {self.max_header_bytes} bytes (max_header_bytes).")

    def on_header(self, name: bytes, value: bytes) -> None:
        if len(name) + len(value) > self.max_header_bytes:
            self._stop(
                431, f"A request header (name and value) is over {self.max_header_bytes} bytes (max_header_bytes)."
            )
        if len(self.headers) >= self.max_headers:
            self._stop(431, f"The request has more than {self.max_headers} headers (max_headers).")
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._in_head = False
        self._head_bytes = 0
        if len(self.connections) > self.max_connections:  # this one's included
            self._stop(503, f"The server has {self.max_connections} connections open (max_connections); retry shortly.")
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._in_head = True
        self._disarm()

    # the read deadline
    def _arm(self) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(self.request_read_seconds, self._too_slow)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _too_slow(self) -> None:
        self._deadline = None
        if not self.transport.is_closing():
            self._refuse(
                408,
                f"The request did not arrive whole within {self.request_read_seconds:g} s (request_read_seconds).",
            )

    # refusals
    def _stop(self, status: int, detail: str) -> None:
        """Refuse the request from a parser callback: the parser stops, and uvicorn answers
        the parse error with :meth:`send_400_response`, which sends this refusal instead."""
        self._refusal = (status, detail)
        raise _Refused(detail)

    def send_400_response(self, msg: str) -> None:
        """uvicorn's answer to a request it cannot parse: 400 JSON, or the limit's refusal."""
        self._answer(*(self._refusal or (400, MALFORMED)))  # uvicorn logged a warning already

    def _refuse(self, status: int, detail: str) -> None:
        log.warning("request refused before the application (%d): %s", status, detail)
        self._answer(status, detail)

    def _answer(self, status: int, detail: str) -> None:
        """Write a JSON error and close the connection (only close it while a response is being written)."""
        if self.cycle is not None and self.cycle.response_started and not self.cycle.response_complete:
            self.transport.close()  # an answer now would land inside the one being written
            return
        body = orjson.dumps({"detail": detail})
        head = [STATUS_LINE[status]]
        for name, value in self.server_state.default_headers:
            head += [name, b": ", value, b"\r\n"]
        head += [
            b"content-type: application/json\r\ncontent-length: ",
            str(len(body)).encode(),
            b"\r\nconnection: close\r\n\r\n",
            body,
        ]
        self.transport.write(b"".join(head))
        self.transport.close()


def limited_protocol(
    max_header_bytes: int,
    max_head_bytes: int,
    max_headers: int,
    request_read_seconds: float = 60.0,
    max_connections: int = 1_000,
    send_stall_seconds: float = 60.0,
) -> type[LimitedHttpToolsProtocol]:
    """The protocol class (``uvicorn.run(http=...)``) with these limits (module docstring)."""
    return type(
        "LimitedHttpToolsProtocol",
        (LimitedHttpToolsProtocol,),
        {
            "max_header_bytes": max_header_bytes,
            "max_head_bytes": max_head_bytes,
            "max_headers": max_headers,
            "request_read_seconds": request_read_seconds,
            "max_connections": max_connections,
            "send_stall_seconds": send_stall_seconds,
        },
    )
