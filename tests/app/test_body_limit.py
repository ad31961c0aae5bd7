"""Bodies over the limit get 413 before they are parsed; nothing is learned."""

from __future__ import annotations

import json


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

    from app.body_limit import BodyLimitMiddleware
    from app.errors import FastJSON

    async def reads_first(scope, receive, send):  # type: ignore[no-untyped-def]
        size = 0
        while True:
            message = await receive()
            size += len(message.get("body", b""))
            if not message.get("more_body"):
                break
        await FastJSON({"read": size})(scope, receive, send)

    def chunks():  # type: ignore[no-untyped-def]
        for _ in range(100):
            yield b"x" * 100

    client = TestClient(BodyLimitMiddleware(reads_first, max_bytes=2048), raise_server_exceptions=False)
    r = client.post("/learn", content=chunks())
    assert r.status_code == 413 and r.json() == {"detail": "Request body is too large."}
    r = client.post("/learn", content=iter([b"x" * 2048]))
    assert r.status_code == 200 and r.json() == {"read": 2048}
