"""Which requests a replica forwards to the writer, and what it answers when the writer's
address answers garbage or nothing (the forwarding between real instances runs in
test_cluster.py and test_replica_edges.py)."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest

from app.forwarding import Forwarder, _has_id, _is_write
from tests.app.test_http_client import read_request, serve


@pytest.mark.parametrize(
    "method, path, expected",
    [
        ("POST", "/learn", True),
        ("POST", "/models/churn/learn", True),
        ("PUT", "/models/churn", True),
        ("DELETE", "/models/churn", True),
        ("POST", "/predict_proba", None),  # a write if it carries an id
        ("POST", "/models/churn/predict_proba", None),
        ("POST", "/decide", None),
        ("POST", "/models/churn/decide", None),
        ("GET", "/models/churn", False),
        ("GET", "/models", False),
        ("GET", "/models/churn/events", False),
        ("POST", "/models/churn/explain", False),
        ("GET", "/health", False),
        ("GET", "/learn", False),
        ("PUT", "/models/churn/learn", False),
        # names the routes refuse are answered here (422), not forwarded: the decoded path was
        # forwarded, and DELETE /models/victim%3Fx deleted model 'victim' on the writer
        ("DELETE", "/models/victim?x", False),
        ("PUT", "/models/made#x", False),
        ("PUT", "/models/m\r\nIdempotency-Key: zz", False),
        ("POST", "/models/\u20ac/learn", False),
        ("POST", "/models/a b/predict_proba", False),
    ],
)
def test_writes_are_told_from_reads(method: str, path: str, expected: bool | None) -> None:
    assert _is_write(method, path) is expected


@pytest.mark.parametrize(
    "body, expected",
    [
        (b'{"features": {"a": 1}, "id": "order-1"}', True),
        (b'{"features": {"a": 1}, "id": 7}', True),
        (b'{"features": {"a": 1}, "id": null}', False),
        (b'{"features": {"id": 1}}', False),  # a feature named id is not the prediction's id
        (b'{"features": {"a": 1}}', False),
        (b'{"features": ', False),  # malformed: the replica's own validation answers it
        (b'["id"]', False),
        # read as the writer's route reads it (app.json_route.parse_json): an escaped key is id,
        # and numbers beyond 64 bits or NaN do not hide it
        (rb'{"features": {"a": 1}, "\u0069d": "esc-1"}', True),
        (rb'{"features": {"a": 1}, "i\u0064": "esc-2"}', True),
        (rb'{"features": {"\u0069d": 1}}', False),
        (b'{"features": {"a": 123456789012345678901234567890}, "id": "big"}', True),
        (b'{"features": {"a": NaN}, "id": "nan"}', True),
        (b'{"id": "x", "id": null}', False),  # the last of two keys, as for the route
    ],
)
def test_a_prediction_with_an_id_is_a_write(body: bytes, expected: bool) -> None:
    assert _has_id(body) is expected


class _Replica:
    """Stands in for a replica's cluster: the writer is at ``url``."""

    is_writer = False

    def __init__(self, url: str) -> None:
        self.url = url

    def writer_url(self) -> str:
        return self.url


def _forward_to(
    answer: bytes | None, path: str = "/learn", method: str = "POST"
) -> tuple[int, dict[str, Any], dict[bytes, bytes]]:
    """What a replica answers for ``method path`` when the writer's address answers ``answer``
    (None: the connection closes unanswered)."""

    async def writer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        if answer is not None:
            writer.write(answer)
            await writer.drain()
        writer.close()

    async def main() -> tuple[int, bytes, list[tuple[bytes, bytes]]] | None:
        server, url = await serve(writer)
        forwarder = Forwarder(2.0)
        try:
            return await forwarder.forward(_Replica(url), method, path, path, [], b"{}")  # type: ignore[arg-type]
        finally:
            forwarder.close()
            server.close()

    got = asyncio.run(main())
    assert got is not None
    status, body, headers = got
    return status, orjson.loads(body) if body else {}, dict(headers)


@pytest.mark.parametrize(
    "answer, why",
    [
        (b"HTTP/1.1 999 Odd\r\nContent-Length: 2\r\n\r\n{}", "status 999"),  # uvicorn had no line for it: no answer
        (b"HTTP/1.1 404 Not Found\r\nContent-Type: text/html\r\nContent-Length: 9\r\n\r\n<h1>x</h1", "text/html"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", "no content type"),
    ],
)
def test_an_answer_no_writer_gives_is_a_502_naming_the_setting(answer: bytes, why: str) -> None:
    status, out, _ = _forward_to(answer)
    assert status == 502 and why in out["detail"] and "advertise_url" in out["detail"], out
    assert out["detail"].endswith("may or may not have been learned: retry it with the same Idempotency-Key.")


@pytest.mark.parametrize(
    "method, path, advice",
    [
        ("POST", "/models/m/learn", "retry it with the same Idempotency-Key."),
        ("PUT", "/models/m", "the PUT may or may not have been done: sending it again is safe."),
        ("DELETE", "/models/m", "the DELETE may or may not have been done: sending it again is safe."),
        # a prediction takes no key: its retry got 409 id_pending
        ("POST", "/predict_proba", "the writer may have kept the request's id: predict again with a new id."),
        ("POST", "/models/m/decide", "predict again with a new id."),
    ],
)
def test_a_lost_answer_says_what_the_request_allows(method: str, path: str, advice: str) -> None:
    status, out, _ = _forward_to(None, path, method)
    assert status == 503 and out["detail"].startswith("The writer did not answer") and out["detail"].endswith(advice)


def test_the_writers_answer_headers_are_passed_on() -> None:
    answer = (
        b"HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json\r\nWWW-Authenticate: Bearer\r\n"
        b"X-Internal: 1\r\nContent-Length: 2\r\n\r\n{}"
    )
    status, _, headers = _forward_to(answer)
    assert status == 401 and headers == {b"content-type": b"application/json", b"www-authenticate": b"Bearer"}


@pytest.mark.parametrize(
    "method, status, synced",
    [("PUT", 201, True), ("PUT", 200, True), ("DELETE", 204, True), ("PUT", 409, False), ("POST", 200, False)],
)
def test_a_replica_reads_the_models_before_it_answers_a_creation_or_deletion(
    method: str, status: int, synced: bool
) -> None:
    # it passed the writer's 201 on before its own list had the model: the client's next
    # request here (a prediction with min_seq included) was 404 until the follower caught up
    from types import SimpleNamespace

    from app.forwarding import ForwardingMiddleware

    order: list[str] = []
    sent: list[dict[str, Any]] = []

    class Follower:
        def __init__(self, fails: bool) -> None:
            self.fails = fails

        async def sync_models(self) -> None:
            order.append("sync")
            if self.fails:
                raise RuntimeError("the store failed")

    class Writer:
        async def forward(self, cluster, method, path, target, headers, body):  # type: ignore[no-untyped-def]
            order.append("forwarded")
            return status, b"{}", [(b"content-type", b"application/json")]

    async def app(scope, receive, send):  # type: ignore[no-untyped-def]
        raise AssertionError("a write on a replica is forwarded, not served")

    for fails in (False, True):  # a store failing here only delays the replica: the answer stands
        order.clear()
        sent.clear()
        cluster = SimpleNamespace(is_writer=False, follower=Follower(fails))
        middleware = ForwardingMiddleware(app, Writer(), lambda cluster=cluster: cluster)  # type: ignore[arg-type]
        path = "/models/m/learn" if method == "POST" else "/models/m"
        scope = {"type": "http", "method": method, "path": path, "headers": [(b"idempotency-key", b"k")]}

        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": b"{}", "more_body": False}

        async def send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                order.append("answered")
            sent.append(message)

        asyncio.run(middleware(scope, receive, send))
        assert order == (["forwarded", "sync", "answered"] if synced else ["forwarded", "answered"])
        assert sent[0]["status"] == status
