"""Hostile HTTP against a real ``streamtree serve`` on loopback, over raw sockets.

Heads over the size and count limits are answered 431 (414 for a long target) with JSON
naming the setting; a head that never ends is not held (the connection is closed once the
head passes its limit, and the process's memory stays put); a request the parser cannot read
is answered 400 JSON. Each refusal closes its connection, and the service goes on serving.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.app.test_process import free_port, request, start

pytestmark = pytest.mark.slow

#: The server's head limit in these tests: small, so that a head over it arrives in one read.
HEAD = 16 * 1024


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, int]]:
    """``(port, pid)`` of the server."""
    data_dir: Path = tmp_path_factory.mktemp("hostile") / "data"
    port = free_port()
    proc = start(data_dir, port, max_head_bytes=str(HEAD))
    try:
        yield port, proc.pid
    finally:
        proc.kill()
        proc.wait(timeout=30)


@pytest.fixture
def port(server: tuple[int, int]) -> int:
    return server[0]


def exchange(port: int, raw: bytes, timeout: float = 30) -> tuple[int, dict[str, str], bytes]:
    """Send ``raw`` on a new connection; the answer's status, headers and body, read until the
    server closes the connection (every answer here closes it)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(raw)
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.lower().split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), headers, body


def refused(port: int, raw: bytes, status: int, setting: str) -> None:
    code, headers, body = exchange(port, raw)
    assert code == status, body
    assert headers["content-type"] == "application/json" and headers["connection"] == "close"
    assert setting in json.loads(body)["detail"]


def test_heads_over_the_limits_are_answered_431_json_naming_the_limit(port: int) -> None:
    get = b"GET /health HTTP/1.1\r\nHost: x\r\n"
    refused(port, get + b"Authorization: Bearer " + b"k" * 9000 + b"\r\n\r\n", 431, "max_header_bytes")
    refused(port, get + b"".join(b"X-%d: 1\r\n" % i for i in range(101)) + b"\r\n", 431, "max_headers")
    refused(port, get + b"".join(b"X-%d: %s\r\n" % (i, b"v" * 4000) for i in range(5)) + b"\r\n", 431, "max_head_bytes")
    refused(port, b"GET /health?" + b"q" * 9000 + b" HTTP/1.1\r\nHost: x\r\n\r\n", 414, "max_header_bytes")
    # just within every limit: served
    code, _, body = exchange(
        port,
        get
        + b"".join(b"X-%d: %s\r\n" % (i, b"v" * 40) for i in range(97))
        + b"Authorization: Bearer "
        + b"k" * 8000
        + b"\r\nConnection: close\r\n\r\n",
    )
    assert code == 200 and json.loads(body)["status"] == "ok"


def test_malformed_requests_are_answered_400_json(port: int) -> None:
    for raw in [
        b"GARBAGE\r\n\r\n",
        b"GET /health HTTP/1.1\r\nNo colon here\r\n\r\n",
        b"GET /health HTTP/9.9\r\n\r\n",
        b"POST /learn HTTP/1.1\r\nHost: x\r\nContent-Length: x\r\n\r\n",
        b"POST /learn HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    ]:
        code, headers, body = exchange(port, raw)
        assert code == 400 and headers["content-type"] == "application/json", raw
        assert "Malformed HTTP request" in json.loads(body)["detail"]
    assert request(port, "GET", "/health")[0] == 200


def rss(pid: int) -> int:
    """The process's resident memory, bytes."""
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS:"))


def test_an_unfinished_huge_header_is_not_held(server: tuple[int, int]) -> None:
    """Clients that send an endless header (32 MiB each, never finished) are cut off at the
    head limit: none gets to send it all, and the server's memory stays put."""
    port, pid = server
    before = rss(pid)
    sent: list[int] = []
    cut: list[bool] = []

    def endless() -> None:
        n = 0
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
                s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Endless: ")
                piece = b"a" * 65536
                while n < 32 * 1024 * 1024:
                    s.sendall(piece)
                    n += len(piece)
                cut.append(s.recv(65536) == b"")  # the server never answered, and holds the connection
        except TimeoutError:  # the server holds the connection without answering
            cut.append(False)
        except OSError:  # reset by the server, which closed the connection
            cut.append(True)
        sent.append(n)

    clients = [threading.Thread(target=endless) for _ in range(12)]
    for c in clients:
        c.start()
    for c in clients:
        c.join(timeout=120)
    assert len(cut) == len(clients) and all(cut)
    assert max(sent) < 32 * 1024 * 1024, sent  # every one was cut off before the end
    time.sleep(0.5)
    assert rss(pid) - before < 64 * 1024 * 1024, (before, rss(pid))
    assert request(port, "GET", "/health")[0] == 200


def test_a_request_that_does_not_arrive_whole_in_time_is_408_and_its_connection_closed(tmp_path: Path) -> None:
    # a half-sent body or a connection that never sends held memory and a socket forever
    port = free_port()
    proc = start(tmp_path / "data", port, request_read_seconds="1")
    try:
        body_cut = b"POST /learn HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"
        for raw in (b"", b"GET /heal", body_cut):
            started = time.monotonic()
            status, headers, body = exchange(port, raw, timeout=10)
            assert 0.9 < time.monotonic() - started < 8
            assert status == 408 and headers["content-type"] == "application/json", body
            assert json.loads(body)["detail"] == "The request did not arrive whole within 1 s (request_read_seconds)."
        # a connection whose requests each arrive in time stays served past the deadline
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        sockets = []
        for _ in range(3):
            conn.request("GET", "/health")
            answer = conn.getresponse()
            assert answer.status == 200 and answer.read()
            sockets.append(conn.sock)
            time.sleep(0.6)
        conn.close()
        assert sockets[0] is sockets[1] is sockets[2]  # one connection, not reopened
        assert request(port, "GET", "/models/default")[1]["seq"] == 0
    finally:
        proc.kill()
        proc.wait(timeout=30)


def test_a_request_past_max_connections_is_503_json_naming_it(tmp_path: Path) -> None:
    # no bound: idle connections took every descriptor, and no other client was served
    port = free_port()
    proc = start(tmp_path / "data", port, max_connections="10")
    idle = []
    try:
        for _ in range(10):
            idle.append(socket.create_connection(("127.0.0.1", port), timeout=10))
        time.sleep(0.3)
        status, headers, body = exchange(port, b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        assert status == 503 and "max_connections" in json.loads(body)["detail"], body
        for s in idle:
            s.close()
        time.sleep(0.3)
        assert request(port, "GET", "/health")[0] == 200
    finally:
        for s in idle:
            s.close()
        proc.kill()
        proc.wait(timeout=30)
