"""``Idempotency-After``: a learn naming the request it follows is learned only after that one."""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import orjson
import pytest
from fastapi.testclient import TestClient

import app.ordering
from tests.app.conftest import Event, learn_all


def batch(events: list[Event]) -> dict[str, Any]:
    return {"events": [{"features": x, "label": y} for x, y in events]}


def headers(key: str, after: str | None = None) -> dict[str, str]:
    return {"Idempotency-Key": key} | ({"Idempotency-After": after} if after is not None else {})


class Sent:
    """A request posted from another thread; ``wait()`` is its answer."""

    def __init__(self, client: TestClient, body: dict[str, Any], hdrs: dict[str, str], path: str = "/learn") -> None:
        self.response: Any = None
        self.thread = threading.Thread(target=self._run, args=(client, path, body, hdrs))
        self.thread.start()

    def _run(self, client: TestClient, path: str, body: dict[str, Any], hdrs: dict[str, str]) -> None:
        self.response = client.post(path, json=body, headers=hdrs)

    def done(self) -> bool:
        return not self.thread.is_alive()

    def wait(self) -> Any:
        self.thread.join(timeout=30)
        assert not self.thread.is_alive()
        return self.response


def logged_labels(client: TestClient) -> list[str]:
    return [e["label"] for e in client.get("/models/default/events", params={"limit": 1000}).json()["events"]]


def test_a_request_that_overtakes_the_one_it_follows_waits_for_it(client, stream) -> None:  # type: ignore[no-untyped-def]
    learn_all(client, stream[:30])
    second = Sent(client, batch(stream[40:50]), headers("b", after="a"))
    time.sleep(0.5)
    assert not second.done()  # held: "a" has not come
    first = client.post("/learn", json=batch(stream[30:40]), headers=headers("a"))
    assert first.json() == {"learned": 10, "seq": 40}
    assert second.wait().json() == {"learned": 10, "seq": 50}
    assert logged_labels(client) == [y for _, y in stream[:50]]  # the order named, not the order of arrival


def test_a_chain_sent_backwards_is_learned_in_its_order(client, stream) -> None:  # type: ignore[no-untyped-def]
    learn_all(client, stream[:10])
    third = Sent(client, batch(stream[30:40]), headers("c", after="b"))
    second = Sent(client, batch(stream[20:30]), headers("b", after="a"))
    time.sleep(0.3)
    r = client.post("/learn", json=batch(stream[10:20]), headers=headers("a"))
    assert r.json()["seq"] == 20, r.text
    assert second.wait().json() == {"learned": 10, "seq": 30}
    assert third.wait().json() == {"learned": 10, "seq": 40}
    assert logged_labels(client) == [y for _, y in stream[:40]]


def test_following_a_logged_request_learns_at_once_and_a_retry_gets_the_first_answer(client, stream) -> None:  # type: ignore[no-untyped-def]
    assert client.post("/learn", json=batch(stream[:10]), headers=headers("a")).json()["seq"] == 10
    body, hdrs = batch(stream[10:20]), headers("b", after="a")
    assert client.post("/learn", json=body, headers=hdrs).json() == {"learned": 10, "seq": 20}
    assert client.post("/learn", json=body, headers=hdrs).json() == {"learned": 10, "seq": 20}
    assert client.get("/models/default").json()["seq"] == 20


def test_following_a_refused_request_is_409_and_learns_nothing(client, stream) -> None:  # type: ignore[no-untyped-def]
    learn_all(client, stream[:10])
    second = Sent(client, batch(stream[20:30]), headers("b", after="a"))
    third = Sent(client, batch(stream[30:40]), headers("c", after="b"))
    time.sleep(0.3)
    bad = copy.deepcopy(batch(stream[10:20]))
    bad["events"][3]["features"]["a"] = "x" * 10_000  # longer than max_string_length
    assert client.post("/learn", json=bad, headers=headers("a")).status_code == 422
    for sent in (second, third):  # "b" follows the refused "a", "c" the refused "b"
        r = sent.wait()
        assert r.status_code == 409
        assert r.json()["type"] == app.ordering.AFTER_NOT_LEARNED
        assert "Idempotency-After" in r.json()["detail"]
    assert client.get("/models/default").json()["seq"] == 10
    # once "a" is learned, "b" sent again is learned after it
    r = client.post("/learn", json=batch(stream[10:20]), headers=headers("a"))
    assert r.status_code == 200, r.text
    assert r.json()["seq"] == 20
    assert client.post("/learn", json=batch(stream[20:30]), headers=headers("b", after="a")).json()["seq"] == 30


@pytest.mark.parametrize(
    "body",
    [
        b'{"features": 5, "label": "x"}',  # not a learn body
        b'{"features": {"a": 1}',  # not JSON
        b"[1, 2]",
        b'{"features": {"a": 1}, "label": "\\ud800"}',  # a lone surrogate
    ],
)
def test_following_a_request_refused_before_the_route_is_409_at_once(client, stream, body) -> None:  # type: ignore[no-untyped-def]
    # FastAPI refused these before the route ran, so the ordering never heard of "a": "b" was
    # held the whole AFTER_WAIT_SECONDS (10 s), then refused as "did not reach the writer"
    json_body = {"content-type": "application/json"}
    second = Sent(client, batch(stream[:10]), headers("b", after="a"))
    time.sleep(0.3)
    assert client.post("/learn", content=body, headers=headers("a") | json_body).status_code == 422
    started = time.monotonic()
    r = second.wait()
    assert r.status_code == 409 and "was refused or failed" in r.json()["detail"], r.text
    assert time.monotonic() - started < app.ordering.AFTER_WAIT_SECONDS / 2
    assert client.get("/models/default").json()["seq"] == 0


@pytest.mark.parametrize(
    "hdrs, status",
    [
        ([("Idempotency-Key", "a"), ("Idempotency-After", "a")], 422),  # names itself
        ([("Idempotency-Key", "a"), ("Idempotency-After", "")], 422),
        ([("Idempotency-Key", "a"), ("Idempotency-After", "x"), ("Idempotency-After", "y")], 422),  # sent twice
        ([("Idempotency-Key", "a"), ("Content-Length", "999999999")], 413),  # refused unread
        ([("Idempotency-Key", "a"), ("Transfer-Encoding", "chunked")], 413),  # refused as it arrives
    ],
)
def test_following_a_request_refused_for_its_headers_or_size_is_409_at_once(running, stream, hdrs, status) -> None:  # type: ignore[no-untyped-def]
    # these were never reported to the ordering: "b" waited the whole AFTER_WAIT_SECONDS
    with running(max_body_bytes=2048) as client:
        second = Sent(client, batch(stream[:10]), headers("b", after="a"))
        time.sleep(0.3)
        big = batch(stream[:100]) if status == 413 else batch(stream[:1])
        content = orjson.dumps(big)
        if ("Transfer-Encoding", "chunked") in hdrs:
            content = iter([content[i : i + 1000] for i in range(0, len(content), 1000)])  # type: ignore[assignment]
        sent = client.post("/learn", content=content, headers=[("content-type", "application/json"), *hdrs])
        assert sent.status_code == status, sent.text
        started = time.monotonic()
        r = second.wait()
        assert r.status_code == 409 and "was refused or failed" in r.json()["detail"], r.text
        assert time.monotonic() - started < app.ordering.AFTER_WAIT_SECONDS / 2
        assert client.get("/models/default").json()["seq"] == 0


def test_following_a_request_that_never_comes_is_409_after_the_wait(  # type: ignore[no-untyped-def]
    client, stream, monkeypatch
) -> None:
    monkeypatch.setattr(app.ordering, "AFTER_WAIT_SECONDS", 0.3)
    learn_all(client, stream[:10])
    started = time.monotonic()
    r = client.post("/learn", json=batch(stream[10:20]), headers=headers("b", after="never-sent"))
    assert r.status_code == 409 and r.json()["type"] == "after_not_learned"
    assert "0.3 s" in r.json()["detail"]
    assert time.monotonic() - started >= 0.3
    assert client.get("/models/default").json()["seq"] == 10
    # other learns go on while one is held
    held = Sent(client, batch(stream[20:30]), headers("c", after="also-never"))
    assert client.post("/learn", json=batch(stream[10:20])).json()["seq"] == 20
    assert held.wait().status_code == 409


@pytest.mark.parametrize("keys", [["x", "y"], ["x", "y", "z"]])
def test_requests_whose_headers_form_a_cycle_are_409_at_once_and_learn_nothing(client, stream, keys) -> None:  # type: ignore[no-untyped-def]
    # x after y, y after x (or x after y, y after z, z after x): each waited for the other for
    # good, beyond the 10 s wait a request gets for one that never comes
    learn_all(client, stream[:10])
    started = time.monotonic()
    sent = []
    for i, key in enumerate(keys):
        after = keys[(i + 1) % len(keys)]
        sent.append(Sent(client, batch(stream[10 + 5 * i : 15 + 5 * i]), headers(key, after=after)))
        time.sleep(0.2)
    for request in sent:
        r = request.wait()
        assert r.status_code == 409 and r.json()["type"] == app.ordering.AFTER_NOT_LEARNED, r.text
    assert time.monotonic() - started < app.ordering.AFTER_WAIT_SECONDS
    assert "cycle" in sent[-1].response.json()["detail"]
    assert client.get("/models/default").json()["seq"] == 10
    assert client.post("/learn", json=batch(stream[10:20])).json()["seq"] == 20  # the writer goes on


@pytest.mark.parametrize(
    ("hdrs", "msg"),
    [
        ({"Idempotency-After": "a"}, "Idempotency-After needs an Idempotency-Key"),
        ({"Idempotency-Key": "a", "Idempotency-After": "a"}, "another request's key"),
        ({"Idempotency-Key": "b", "Idempotency-After": "x" * 256}, "1 to 255 printable ASCII"),
        ({"Idempotency-Key": "b", "Idempotency-After": ""}, "1 to 255 printable ASCII"),
    ],
)
def test_a_bad_idempotency_after_is_422_naming_the_header(client, stream, hdrs, msg) -> None:  # type: ignore[no-untyped-def]
    learn_all(client, stream[:10])
    r = client.post("/learn", json=batch(stream[10:20]), headers=hdrs)
    assert r.status_code == 422
    (error,) = r.json()["detail"]
    assert error["loc"] == ["header", "Idempotency-After"] and msg in error["msg"]
    assert client.get("/models/default").json()["seq"] == 10


def test_a_held_request_is_answered_when_the_service_stops(  # type: ignore[no-untyped-def]
    running: Callable[..., AbstractContextManager[TestClient]], stream
) -> None:
    with running() as client:
        learn_all(client, stream[:10])
        held = Sent(client, batch(stream[10:20]), headers("b", after="a"))
        time.sleep(0.3)
    r = held.wait()
    assert r.status_code == 404  # what a learn arriving while the model closes gets
    assert r.json() == {"detail": "Model not found."}


def test_past_the_most_held_requests_one_more_is_429_and_its_followers_are_refused(  # type: ignore[no-untyped-def]
    client, stream, monkeypatch
) -> None:
    # held requests had no bound (each kept its parsed body and connection for 10 s), and each
    # placement scanned them all: 8,000 held made /health wait 26 s
    monkeypatch.setattr(app.ordering, "MAX_HELD", 3)
    learn_all(client, stream[:10])
    held = [Sent(client, batch(stream[10 + i : 11 + i]), headers(f"k{i}", after=f"never{i}")) for i in range(2)]
    time.sleep(0.3)
    follower = Sent(client, batch(stream[20:21]), headers("f", after="over"))  # the third held
    time.sleep(0.3)
    assert not any(h.done() for h in [*held, follower])
    r = client.post("/learn", json=batch(stream[21:22]), headers=headers("over", after="never9"))
    assert r.status_code == 429 and "3 learn requests already wait" in r.json()["detail"], r.text
    assert r.headers["Retry-After"] == "1"
    r = follower.wait()
    assert r.status_code == 409 and r.json()["type"] == app.ordering.AFTER_NOT_LEARNED, r.text
    first = client.post("/learn", json=batch(stream[30:31]), headers=headers("never0"))
    assert first.status_code == 200, first.text
    assert held[0].wait().status_code == 200  # learned after never0
    assert client.get("/models/default").json()["seq"] == 12
