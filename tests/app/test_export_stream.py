"""Event log exports against a real ``streamtree serve``: streamed with back-pressure, bounded
in number, and cut off when their client stops reading.

Clients that ask for an export and never read it hold, each, a page and the connection's
buffer, not the answer (the process's memory stays put while 40 answers of about 5 MB wait);
one export more than ``max_exports`` is answered 429 JSON with ``Retry-After``; learns are
answered meanwhile; an answer whose client takes nothing for ``export_stall_seconds`` is cut
off, unfinished, and its place freed.
"""

from __future__ import annotations

import http.client
import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.app.test_hostile_http import rss
from tests.app.test_process import free_port, request, start

pytestmark = pytest.mark.slow

EXPORTS = 40
STALL_S = 4.0
#: Events of about 4.6 KB of JSON each (20 long feature names), so an answer of LIMIT events
#: is about 5 MB.
NAMES = [f"feature_{j:02d}_" + "n" * 190 for j in range(20)]
LIMIT = 1_000
N_EVENTS = 1_200


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, int]]:
    """``(port, pid)`` of a server whose log holds N_EVENTS large events."""
    data_dir: Path = tmp_path_factory.mktemp("export") / "data"
    port = free_port()
    proc = start(data_dir, port, max_exports=str(EXPORTS), export_stall_seconds=str(STALL_S))
    try:
        for i in range(0, N_EVENTS, 200):
            events = [
                {"features": {n: (k * 31 + j) % 97 / 7 for j, n in enumerate(NAMES)}, "label": k % 3 == 0}
                for k in range(i, i + 200)
            ]
            status, out = request(port, "POST", "/learn", {"events": events})
            assert status == 200, out
        yield port, proc.pid
    finally:
        proc.kill()
        proc.wait(timeout=30)


def export(port: int, limit: int = LIMIT) -> tuple[int, bytes, str | None]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("GET", f"/models/default/events?limit={limit}")
    r = conn.getresponse()
    body = r.read()
    conn.close()
    return r.status, body, r.getheader("retry-after")


def stalled(port: int) -> socket.socket:
    """A connection that asks for an export and reads nothing (a small receive buffer)."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(("127.0.0.1", port))
    s.sendall(f"GET /models/default/events?limit={LIMIT} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    return s


def test_stalled_exports_hold_no_answer_are_bounded_and_cut_off(server: tuple[int, int]) -> None:
    port, pid = server
    status, full, _ = export(port)
    assert status == 200 and len(json.loads(full)["events"]) == LIMIT and len(full) > 4_000_000
    before = rss(pid)
    clients = [stalled(port) for _ in range(EXPORTS)]
    try:
        deadline = time.monotonic() + 30
        while (answer := export(port, 10))[0] != 429:  # once every place is taken
            assert time.monotonic() < deadline, "the exports never took every place"
            time.sleep(0.05)
        status, body, retry_after = answer
        assert retry_after == "1" and "exports are streaming" in json.loads(body)["detail"]
        grown = rss(pid) - before
        assert grown < 48 * 1024 * 1024, f"{EXPORTS} stalled exports of {len(full)} bytes took {grown} bytes"
        status, out = request(port, "POST", "/learn", {"features": {NAMES[0]: 1.0}, "label": True})
        assert status == 200, out  # learns go on
        deadline = time.monotonic() + STALL_S + 30
        while (answer := export(port))[0] != 200:  # the stalled ones are cut off, their places freed
            assert time.monotonic() < deadline, "stalled exports were never cut off"
            time.sleep(0.2)
        assert answer[1] == full
        for s in clients:  # each got part of its answer, then the server closed the connection
            s.settimeout(30)
            got = b""
            while chunk := s.recv(1 << 20):
                got += chunk
            assert 0 < len(got) < len(full) and not got.endswith(b"0\r\n\r\n")
    finally:
        for s in clients:
            s.close()
