"""The forwarding client: answers by length or chunks, kept-alive connections, and telling a
request not sent from one whose answer did not come."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from app.http_client import HTTPPool, NoAnswer, NotSent, parse_url

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def serve(handler: Handler) -> tuple[asyncio.Server, str]:
    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    return server, f"http://127.0.0.1:{port}"


async def read_request(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(
        int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")
    )
    return head + await reader.readexactly(length)


def test_answers_by_length_and_by_chunks_over_one_kept_connection() -> None:
    seen: list[bytes] = []
    connections = 0

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        while not reader.at_eof():
            try:
                seen.append(await read_request(reader))
            except asyncio.IncompleteReadError:
                break
            if len(seen) % 2:
                writer.write(b'HTTP/1.1 201 Created\r\nContent-Length: 7\r\nRetry-After: 1\r\n\r\n{"a":1}')
            else:
                writer.write(b'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n{"b\r\n4\r\n":2}\r\n0\r\n\r\n')
            await writer.drain()
        writer.close()

    async def main() -> None:
        server, url = await serve(handler)
        pool = HTTPPool(5.0)
        first = await pool.request(url, "POST", "/learn?x=1", [("Idempotency-Key", "k1")], b'{"z":1}')
        second = await pool.request(url, "PUT", "/models/m", [], b"{}")
        assert (first.status, first.body, first.header(b"retry-after")) == (201, b'{"a":1}', b"1")
        assert (second.status, second.body) == (200, b'{"b":2}')
        assert seen[0].startswith(b"POST /learn?x=1 HTTP/1.1\r\n") and b"Idempotency-Key: k1\r\n" in seen[0]
        assert seen[0].endswith(b'\r\n\r\n{"z":1}') and seen[1].startswith(b"PUT /models/m ")
        assert connections == 1
        pool.close()
        server.close()

    asyncio.run(main())


def test_a_refused_connection_is_not_sent_and_a_cut_answer_is_no_answer() -> None:
    async def cut(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b'HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{"partial')
        await writer.drain()
        writer.close()

    async def main() -> None:
        server, url = await serve(cut)
        pool = HTTPPool(5.0)
        with pytest.raises(NoAnswer):
            await pool.request(url, "POST", "/learn", [], b"{}")
        server.close()
        await server.wait_closed()
        with pytest.raises(NotSent):
            await pool.request(url, "POST", "/learn", [], b"{}")

    asyncio.run(main())


def test_a_silent_server_is_no_answer_after_the_timeout() -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(5)

    async def main() -> None:
        server, url = await serve(silent)
        with pytest.raises(NoAnswer):
            await HTTPPool(0.2).request(url, "POST", "/learn", [], b"{}")
        server.close()

    asyncio.run(main())


@pytest.mark.parametrize(
    "url, expected", [("http://a:81", ("a", 81)), ("http://a", ("a", 80)), ("http://[::1]:8000/", ("::1", 8000))]
)
def test_parse_url(url: str, expected: tuple[str, int]) -> None:
    assert parse_url(url) == expected


@pytest.mark.parametrize(
    "url",
    # the last four were taken: port 99999 then raised OverflowError on connect (a 500 on a
    # replica forwarding to it), an empty host or a path failed only when forwarding
    [
        *(
            "https://a:1",
            "a:1",
            "http://",
            "ftp://a",
            "http://a:99999",
            "http://:8000",
            "http://a:8000/p",
            "http://a:x",
        ),
        # accepted at start, then every forwarded write waited and got 503 naming no setting
        *("http://user@127.0.0.1:8000", "http://my host:8000", "http://[127.0.0.1\r\nX-Injected: 1]:8000"),
        *("http://[not-v6]:8000", "http://h\u00e9:8000"),
    ],
)
def test_parse_url_refuses_other_urls(url: str) -> None:
    with pytest.raises(ValueError):
        parse_url(url)


def test_a_request_to_a_bad_address_is_not_sent() -> None:
    # an address another instance advertised, perhaps before it was checked at start
    async def main() -> None:
        for url in ("http://127.0.0.1:99999", "http://a:x"):
            with pytest.raises(NotSent):
                await HTTPPool(0.2).request(url, "POST", "/learn", [], b"{}")
        with pytest.raises(NotSent):  # past parse_url: a port asyncio refuses
            await HTTPPool(0.2)._connect("127.0.0.1", 70000)

    asyncio.run(main())


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_a_kept_connection_the_server_reset_is_not_reused(loop: str) -> None:
    """A killed writer resets its kept connections: the next request goes on a new one (under
    uvloop, as uvicorn runs, writing to the reset one raised a bare RuntimeError: a 500)."""
    import socket
    import struct

    connections = 0

    async def once_then_reset(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
        await writer.drain()
        if connections == 1:  # as a SIGKILLed process's socket: an RST, not a FIN
            sock = writer.get_extra_info("socket")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()
        else:
            await read_request(reader)

    async def main() -> None:
        server, url = await serve(once_then_reset)
        pool = HTTPPool(5.0)
        assert (await pool.request(url, "POST", "/learn", [], b"{}")).status == 200
        await asyncio.sleep(0.2)  # the reset reaches the client
        assert (await pool.request(url, "POST", "/learn", [], b"{}")).status == 200
        assert connections == 2
        pool.close()
        server.close()

    if loop == "uvloop":
        uvloop = pytest.importorskip("uvloop")
        uvloop.run(main())
    else:
        asyncio.run(main())


def test_a_write_uvloop_refuses_on_a_closed_transport_is_not_sent() -> None:
    """Under load a replica's write to a SIGKILLed writer still raised uvloop's bare
    RuntimeError ("the handler is closed") on a connection not yet seen closing: a 500. It is
    NotSent (nothing went out), which the forwarder retries on another connection."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
        await writer.drain()
        await read_request(reader)

    def closed_handle(data: bytes) -> None:
        raise RuntimeError("unable to perform operation on <TCPTransport closed=True>; the handler is closed")

    async def main() -> None:
        server, url = await serve(answer)
        pool = HTTPPool(5.0)
        assert (await pool.request(url, "POST", "/learn", [], b"{}")).status == 200
        [kept] = [conn for conns in pool._idle.values() for conn in conns]
        kept.writer.write = closed_handle  # type: ignore[method-assign]
        with pytest.raises(NotSent, match="the handler is closed"):
            await pool.request(url, "POST", "/learn", [], b"{}")
        pool.close()
        server.close()

    asyncio.run(main())


@pytest.mark.parametrize(
    "status_line",
    [b"HTTP/1.1200 OK", b"HTTP/2 200", b"HTTP/1.1 42 Short", b"SSH-2.0-OpenSSH_9.2", b"<html>"],
)
def test_what_is_not_an_http_answer_is_no_answer(status_line: bytes) -> None:
    # a status line without a space was an IndexError: a 500 on the replica
    async def garbage(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(status_line + b"\r\nContent-Length: 2\r\n\r\n{}")
        await writer.drain()

    async def main() -> None:
        server, url = await serve(garbage)
        with pytest.raises(NoAnswer, match="status line"):
            await HTTPPool(2.0).request(url, "POST", "/learn", [], b"{}")
        server.close()

    asyncio.run(main())


def test_a_line_break_or_wide_character_is_refused_before_connecting() -> None:
    async def main() -> None:
        pool = HTTPPool(0.5)
        for target, headers in (("/models/m\r\nX: 1", []), ("/models/\u20ac", []), ("/learn", [("x", "a\nb")])):
            with pytest.raises(ValueError):  # before any connection: the port is closed
                await pool.request("http://127.0.0.1:9", "PUT", target, headers, b"{}")

    asyncio.run(main())


def test_an_ipv6_writer_gets_a_bracketed_host_line() -> None:
    heads: list[bytes] = []

    async def record(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        heads.append(await read_request(reader))
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
        await writer.drain()

    async def main() -> None:
        server = await asyncio.start_server(record, "::1", 0)
        port = server.sockets[0].getsockname()[1]
        answer = await HTTPPool(2.0).request(f"http://[::1]:{port}", "POST", "/learn", [], b"{}")
        assert answer.status == 200 and f"\r\nHost: [::1]:{port}\r\n".encode() in heads[0]
        server.close()

    try:
        asyncio.run(main())
    except OSError as e:  # no IPv6 loopback on this machine
        pytest.skip(f"no IPv6 loopback: {e}")
