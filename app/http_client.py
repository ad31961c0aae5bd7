"""A small keep-alive HTTP/1.1 client: what a replica forwards writes to the writer with.

One hop on a private network to another streamtree instance (uvicorn), so it needs little:
plain ``http://``, a request with a body, an answer with ``Content-Length`` or chunked, and
connections kept open between requests. Compared with a general client it costs a fraction of
the CPU per request, which matters when every single-event learn sent to a replica is
forwarded (``bench/scaleout.py``).

It tells apart a request that was certainly not sent (:class:`NotSent`: the connection could
not be opened) from one whose answer did not come (:class:`NoAnswer`: it may have been
processed). Idle connections are dropped after :data:`IDLE_SECONDS`, before the server's own
keep-alive timeout (uvicorn's is 5 s) can close one under a new request.
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Answer", "HTTPPool", "IDLE_SECONDS", "NoAnswer", "NotSent", "parse_url"]

#: An idle connection older than this is closed rather than reused.
IDLE_SECONDS = 2.0
#: A host name or IPv4 address: what a request's ``Host`` line may carry as it is.
_HOST = re.compile(r"[A-Za-z0-9_.-]+")
_STATUS_LINE = re.compile(rb"HTTP/1\.[01] (\d{3})(?: |$)")
#: What a request's target or a header may not hold: it would end the line (or the head).
_LINE_BREAK = re.compile(r"[\r\n\0]")


class NotSent(Exception):
    """No connection could be opened: the request was not sent."""


class NoAnswer(Exception):
    """The request was (maybe) sent, and no complete answer came: it may have been processed."""


@dataclass(frozen=True)
class Answer:
    """A response: its status, headers (lower-case names) and body."""

    status: int
    headers: list[tuple[bytes, bytes]]
    body: bytes

    def header(self, name: bytes) -> bytes | None:
        """The value of header ``name`` (lower case), if present."""
        return next((v for k, v in self.headers if k == name), None)


def parse_url(url: str) -> tuple[str, int]:
    """``(host, port)`` of an ``http://host[:port]`` URL (a trailing ``/`` allowed).

    Raises
    ------
    ValueError
        Another scheme, a host that is neither a name (letters, digits, ``.``, ``-``, ``_``)
        nor an IP address (IPv6 in brackets), user info, a port that is not 1-65535, or a path.
    """
    expected = f"expected http://host:port, got {url!r}"
    scheme, sep, rest = url.partition("://")
    authority, _, path = rest.partition("/")
    if scheme != "http" or not sep or not authority or path:
        raise ValueError(expected)
    if authority.startswith("["):  # [IPv6]:port
        host, _, port = authority[1:].partition("]")
        port = port.removeprefix(":")
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise ValueError(expected) from None
    else:
        host, _, port = authority.partition(":")
        if not _HOST.fullmatch(host):
            raise ValueError(expected)
    if port and not (port.isascii() and port.isdigit() and 1 <= int(port) <= 65535):
        raise ValueError(expected)
    return host, int(port) if port else 80


@dataclass
class _Conn:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    idle_since: float = 0.0

    def close(self) -> None:
        self.writer.close()


async def _read_answer(reader: asyncio.StreamReader) -> tuple[Answer, bool]:
    """One response; and whether the connection may be reused."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head[:-4].split(b"\r\n")
    match = _STATUS_LINE.match(lines[0])
    if match is None:
        raise ValueError(f"not an HTTP/1.x status line: {lines[0][:80]!r}")
    status = int(match[1])
    headers = []
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        headers.append((name.strip().lower(), value.strip()))
    fields = dict(headers)
    keep = fields.get(b"connection", b"").lower() != b"close"
    if fields.get(b"transfer-encoding", b"").lower() == b"chunked":
        chunks = []
        while size := int((await reader.readuntil(b"\r\n")).split(b";")[0], 16):
            chunks.append(await reader.readexactly(size))
            await reader.readexactly(2)
        await reader.readuntil(b"\r\n")  # no trailers are sent by uvicorn: the empty line
        body = b"".join(chunks)
    elif b"content-length" in fields:
        body = await reader.readexactly(int(fields[b"content-length"]))
    else:
        body, keep = await reader.read(), False
    return Answer(status, headers, body), keep


class HTTPPool:
    """Keep-alive connections to HTTP servers, by ``(host, port)``.

    Parameters
    ----------
    timeout
        Seconds a request may take, connection included.
    """

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self._idle: dict[tuple[str, int], list[_Conn]] = {}

    async def _connect(self, host: str, port: int) -> _Conn:
        pool = self._idle.setdefault((host, port), [])
        now = time.monotonic()
        while pool:
            conn = pool.pop()
            # closed by the server: at its end (FIN), or reset (RST: a killed server), after
            # which a write is silently dropped (asyncio) or raises RuntimeError (uvloop)
            closed = conn.reader.at_eof() or conn.reader.exception() is not None or conn.writer.is_closing()
            if now - conn.idle_since < IDLE_SECONDS and not closed:
                return conn
            conn.close()
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), self.timeout)
        except (OSError, TimeoutError, OverflowError, ValueError) as exc:  # the last two: a bad address
            raise NotSent(f"{host}:{port}: {exc or type(exc).__name__}") from None
        sock = writer.get_extra_info("socket")
        if sock is not None:  # a request's last segment must not wait for the previous one's ACK
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return _Conn(reader, writer)

    async def request(
        self, url: str, method: str, target: str, headers: Sequence[tuple[str, str]], body: bytes
    ) -> Answer:
        """Send one request to the server at ``url`` (``http://host:port``); its answer.

        Raises
        ------
        NotSent
            The connection could not be opened (nothing was sent).
        NoAnswer
            No complete answer within the timeout, the connection broke, or what came is not
            an HTTP/1.x answer.
        ValueError
            The target or a header holds a line break or a character beyond Latin-1 (nothing
            was sent).
        """
        try:  # the URL another instance advertised (in the store), perhaps of an older version
            host, port = parse_url(url)
        except ValueError as exc:
            raise NotSent(str(exc)) from None
        name = f"[{host}]" if ":" in host else host  # an IPv6 address, bracketed as in its URL
        head = [f"{method} {target} HTTP/1.1", f"Host: {name}:{port}", f"Content-Length: {len(body)}"]
        head += [f"{k}: {v}" for k, v in headers]
        if any(_LINE_BREAK.search(line) for line in head):
            raise ValueError("a request target or header holds a line break")
        data = ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body  # ValueError if not Latin-1
        conn = await self._connect(host, port)
        try:
            conn.writer.write(data)
        except RuntimeError as exc:  # uvloop: a transport closed under a connection not seen closing
            conn.close()
            raise NotSent(f"{host}:{port}: {exc}") from None
        try:
            async with asyncio.timeout(self.timeout):
                answer, keep = await _read_answer(conn.reader)
        except (OSError, TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError) as exc:
            conn.close()
            raise NoAnswer(f"{host}:{port}: {exc or type(exc).__name__}") from None
        except BaseException:  # cancelled: the answer would come on a connection nobody reads
            conn.close()
            raise
        if keep:
            conn.idle_since = time.monotonic()
            self._idle[(host, port)].append(conn)
        else:
            conn.close()
        return answer

    def close(self) -> None:
        """Close every idle connection."""
        for pool in self._idle.values():
            for conn in pool:
                conn.close()
        self._idle.clear()
