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
