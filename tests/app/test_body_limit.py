"""Bodies over the limit get 413 before they are parsed, and requests past the bodies the
server may hold at once 503; nothing is learned."""

from __future__ import annotations

import asyncio
import json
import signal
import socket
from pathlib import Path
from typing import Any

from app.body_limit import BodyLimitMiddleware
from tests.app.test_process import free_port, request, start


def test_declared_length_over_limit(running) -> None:  # type: ignore[no-untyped-def]
    with running(max_body_bytes=2048) as client:
        body = json.dumps({"events": [{"features": {"a": i}, "label": "x"} for i in range(200)]})
        assert len(body) > 2048
        r = client.post("/learn", content=body, headers={"content-type": "application/json"})
        assert r.status_code == 413 and r.json() == {"detail": "Request body is too large."}
        assert client.get("/models/default").json()["seq"] == 0


def test_chunked_body_over_limit(running) -> None:  # type: ignore[no-untyped-def]
    with running(max_body_bytes=2048) as client:

        def chunks():  # type: ignore[no-untyped-def]
            yield b'{"events": ['
            for _ in range(300):
                yield b'{"features": {"a": 1}, "label": "x"},'
            yield b'{"features": {"a": 1}, "label": "x"}]}'

        r = client.post("/learn", content=chunks(), headers={"content-type": "application/json"})
        assert r.status_code == 413 and r.json() == {"detail": "Request body is too large."}
        assert client.get("/models/default").json()["seq"] == 0


def test_default_limit_is_4_mib(client) -> None:  # type: ignore[no-untyped-def]
    r = client.post("/learn", content=b" " * (4 * 1024 * 1024 + 1), headers={"content-type": "application/json"})
    assert r.status_code == 413


def test_a_layer_that_reads_the_body_itself_gets_the_same_413_json() -> None:
    """A replica's forwarding reads a write's body before any route (app.forwarding): a chunked
    body over the limit read there is answered 413 JSON too, not a 500."""
    from starlette.testclient import TestClient

    from app.errors import FastJSON

    async def reads_first(scope, receive, send):  # type: ignore[no-untyped-def]
        await FastJSON({"read": await body_size(receive)})(scope, receive, send)

    def chunks():  # type: ignore[no-untyped-def]
        for _ in range(100):
            yield b"x" * 100

    client = TestClient(BodyLimitMiddleware(reads_first, max_bytes=2048), raise_server_exceptions=False)
    r = client.post("/learn", content=chunks())
    assert r.status_code == 413 and r.json() == {"detail": "Request body is too large."}
    r = client.post("/learn", content=iter([b"x" * 2048]))
    assert r.status_code == 200 and r.json() == {"read": 2048}


def test_a_client_leaving_in_the_middle_of_its_body_logs_no_traceback(tmp_path: Path) -> None:
    # each such client logged "Exception in ASGI application" with a ClientDisconnect
    # traceback, 4 KiB of log: a loop of tiny connections filled the log and buried real errors
    port = free_port()
    with open(tmp_path / "server.log", "wb") as log:
        proc = start(tmp_path / "data", port, stderr=log)
        try:
            for _ in range(20):
                with socket.create_connection(("127.0.0.1", port)) as s:
                    s.sendall(b"POST /learn HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n")
                    s.sendall(b"Content-Length: 100\r\n\r\n{")
            assert request(port, "GET", "/models/default")[1]["seq"] == 0
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)
    text = (tmp_path / "server.log").read_text()
    assert "Traceback" not in text and "ClientDisconnect" not in text, text[-3000:]


async def body_size(receive: Any) -> int:
    """Read a request's whole body from an ASGI ``receive``; its size."""
    size = 0
    while True:
        message = await receive()
        size += len(message.get("body", b""))
        if not message.get("more_body"):
            return size


def test_requests_past_max_held_body_bytes_get_503_with_retry_after() -> None:
    """The middleware alone: bodies counted from their Content-Length, or as a chunked one
    arrives, until the answer is sent; one that would pass the budget is refused unread."""
    release = asyncio.Event()
    seen: list[int] = []

    async def slow_app(scope, receive, send):  # type: ignore[no-untyped-def]
        seen.append(await body_size(receive))
        await release.wait()  # held, as a learn waiting for the writer
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    limited = BodyLimitMiddleware(slow_app, max_bytes=1_000, max_held=2_500)

    async def call(size: int, chunked: bool = False, pieces: int = 1) -> tuple[int, dict[bytes, bytes], bytes]:
        headers = [] if chunked else [(b"content-length", str(size).encode())]
        scope = {"type": "http", "method": "POST", "path": "/learn", "headers": headers}
        parts = [b"x" * (size // pieces)] * pieces
        sent: list[dict[str, Any]] = []

        async def receive() -> dict[str, Any]:
            if parts:
                return {"type": "http.request", "body": parts.pop(0), "more_body": bool(parts)}
            await asyncio.sleep(3600)
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        await limited(scope, receive, send)
        start_msg, body = sent[0], b"".join(m.get("body", b"") for m in sent[1:])
        return start_msg["status"], dict(start_msg["headers"]), body

    async def scenario() -> None:
        first = [asyncio.create_task(call(1_000)), asyncio.create_task(call(1_000))]
        await asyncio.sleep(0.01)
        assert limited.held == 2_000 and seen == [1_000, 1_000]
        status, headers, body = await call(1_000)  # 3,000 > 2,500: refused unread
        assert status == 503 and headers[b"retry-after"] == b"1"
        assert json.loads(body)["detail"] == (
            "The server holds 2,500 bytes of request bodies already (max_held_body_bytes), "
            "the most it takes at once; retry shortly."
        )
        status, _, _ = await call(900, chunked=True, pieces=3)  # cut off at its second piece
        assert status == 503 and limited.held == 2_000
        fits = asyncio.create_task(call(400, chunked=True, pieces=2))
        await asyncio.sleep(0.01)
        assert limited.held == 2_400 and seen[-1] == 400
        release.set()
        assert [(await t)[0] for t in (*first, fits)] == [200, 200, 200]
        assert limited.held == 0
        assert (await call(1_000))[0] == 200

    asyncio.run(scenario())
