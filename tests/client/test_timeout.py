"""A client's ``timeout`` bounds a whole attempt: a server that drips its answer, each byte
well within the timeout, ends in a timeout (retried as one), not a call that never returns."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from streamtree.client import AsyncClient, Client, ConnectionFailed


@pytest.fixture
def dripping() -> Iterator[str]:
    """The URL of a server that answers every request with headers, then a byte every 0.1 s."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    stop = threading.Event()

    def answer(conn: socket.socket) -> None:
        with conn:
            try:
                conn.recv(65536)
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n")
                while not stop.is_set():
                    conn.sendall(b" ")
                    time.sleep(0.1)
            except OSError:
                pass

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=answer, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    stop.set()
    listener.close()


def test_a_dripped_answer_times_out(dripping: str) -> None:
    started = time.monotonic()
    with Client(dripping, timeout=0.5, retries=1, backoff=0.01) as c, pytest.raises(ConnectionFailed) as exc:
        c.model("m").learn_one({"a": 1.0}, "x")
    assert time.monotonic() - started < 10  # two attempts of 0.5 s each (a hang before)
    assert exc.value.attempts == 2 and "ReadTimeout" in str(exc.value) and "0.5 s" in str(exc.value)


def test_a_dripped_answer_times_out_async(dripping: str) -> None:
    async def main() -> ConnectionFailed:
        async with AsyncClient(dripping, timeout=0.5, retries=1, backoff=0.01) as c:
            with pytest.raises(ConnectionFailed) as exc:
                await asyncio.wait_for(c.model("m").learn_one({"a": 1.0}, "x"), 10)
            return exc.value

    started = time.monotonic()
    e = asyncio.run(main())
    assert time.monotonic() - started < 10
    assert e.attempts == 2 and "ReadTimeout" in str(e)
