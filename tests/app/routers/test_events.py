"""/models/{name}/events: the logged events in order, paged, on both engines; bad queries named."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.errors import LOG_UNAVAILABLE, MODEL_NOT_FOUND
from app.routers.events import EVENTS_DEFAULT, EVENTS_MAX
from app.storage import StorageError
from tests.app.conftest import learn_all, make_stream

Running = Callable[..., AbstractContextManager[TestClient]]
KEY = "events-key-0123456789"


@pytest.fixture(params=["sqlite", "postgresql"])
def engine(request: pytest.FixtureRequest) -> dict[str, Any]:
    """Settings selecting the engine: the SQLite default, or a fresh PostgreSQL database."""
    return {} if request.param == "sqlite" else {"database_url": request.getfixturevalue("pg_url")}


def test_pages_through_the_log_in_order(running: Running, engine: dict[str, Any]) -> None:
    stream = make_stream(EVENTS_DEFAULT + 50, seed=3)
    with running(**engine) as client:
        learn_all(client, stream[:-1], batch=200)
        x, y = stream[-1]  # a delayed label: logged with the features of its prediction
        assert client.post("/predict_proba", json={"features": x, "id": "p-1"}).status_code == 200
        assert client.post("/learn", json={"id": "p-1", "label": y}).json()["seq"] == len(stream)
        expected = [{"seq": i, "features": x, "label": y} for i, (x, y) in enumerate(stream, start=1)]

        first = client.get("/models/default/events").json()["events"]
        assert first == expected[:EVENTS_DEFAULT]  # exact features, floats included
        pages, after = [], 0
        while page := client.get("/models/default/events", params={"after": after, "limit": 333}).json()["events"]:
            pages.append(page)
            after = page[-1]["seq"]
        assert [len(p) for p in pages] == [333, 333, 333, 51]
        assert [e for p in pages for e in p] == expected
        assert client.get("/models/default/events", params={"after": len(stream)}).json() == {"events": []}

        assert client.put("/models/other", json={}).status_code == 201
        assert client.get("/models/other/events").json() == {"events": []}


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("after", -1),
        ("after", "x"),
        ("after", 2**63),
        ("after", 1.5),
        ("limit", 0),
        ("limit", EVENTS_MAX + 1),
        ("limit", "ten"),
    ],
)
def test_bad_queries_are_422_naming_the_field(client: TestClient, field: str, value: Any) -> None:
    r = client.get("/models/default/events", params={field: value})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["query", field], r.text


def test_limits_and_unknown_model(client: TestClient) -> None:
    learn_all(client, make_stream(5))
    assert len(client.get("/models/default/events", params={"limit": EVENTS_MAX}).json()["events"]) == 5
    assert client.get("/models/default/events", params={"after": 2**63 - 1}).json() == {"events": []}
    r = client.get("/models/nope/events")
    assert r.status_code == 404 and r.json() == {"detail": MODEL_NOT_FOUND}


def test_reads_need_a_key_only_when_reads_are_protected(running: Running) -> None:
    with running(api_keys=[KEY]) as client:
        assert client.get("/models/default/events").status_code == 200
    with running(api_keys=[KEY], protect_reads=True) as client:
        assert client.get("/models/default/events").status_code == 401
        assert (
            client.get("/models/default/events", headers={"Authorization": "Bearer wrong-key-0123456789"}).status_code
            == 403
        )
        assert client.get("/models/default/events", headers={"Authorization": f"Bearer {KEY}"}).status_code == 200


def test_a_store_failure_is_503(client: TestClient) -> None:
    learn_all(client, make_stream(5))
    store = client.app.state.node.registry.db.store  # type: ignore[attr-defined]
    real = store.read_events

    def failing(*args: Any) -> Any:
        raise StorageError("disk I/O error")

    store.read_events = failing
    try:
        r = client.get("/models/default/events")
    finally:
        store.read_events = real
    assert r.status_code == 503 and r.json() == {"detail": LOG_UNAVAILABLE}
    assert len(client.get("/models/default/events").json()["events"]) == 5  # nothing changed


def test_a_streamed_answer_is_read_a_page_at_a_time_and_equals_the_log(client: TestClient) -> None:
    """Events of very different sizes: the export reads pages of about PAGE_BYTES each, and the
    streamed document is exactly the log, at every window."""
    from app.export import PAGE_BYTES, PAGE_EVENTS

    store = client.app.state.node.registry.db.store  # type: ignore[attr-defined]
    real = store.read_events
    asked: list[int] = []

    def counting(name: str, after: int, limit: int, max_bytes: int | None = None) -> Any:
        asked.append(limit)
        return real(name, after, limit, max_bytes)

    stream = [
        ({"a": i, "pad": i % 7 * 40} | ({f"f{j}": j for j in range(60)} if i % 3 == 0 else {}), "y")
        for i in range(2_500)
    ]
    learn_all(client, stream, batch=500)
    logged = [{"seq": i, "features": x, "label": y} for i, (x, y) in enumerate(stream, start=1)]
    store.read_events = counting
    try:
        for after, limit in [
            (0, EVENTS_MAX),
            (0, 1),
            (17, PAGE_EVENTS),
            (17, PAGE_EVENTS + 1),
            (2_400, 333),
            (2_499, 10),
            (2_500, 10),
            (0, 2_500),
        ]:
            asked.clear()
            r = client.get("/models/default/events", params={"after": after, "limit": limit})
            assert r.status_code == 200 and r.headers["content-type"] == "application/json"
            assert r.json() == {"events": logged[after : after + limit]}, (after, limit)
            assert max(asked) <= PAGE_EVENTS
        asked.clear()
        body = client.get("/models/default/events", params={"limit": EVENTS_MAX}).content
        assert len(asked) >= len(body) // (2 * PAGE_BYTES)  # many small reads, not one
    finally:
        store.read_events = real


def test_no_page_of_an_export_of_large_events_reads_much_more_than_page_bytes(client: TestClient) -> None:
    # the first page was 100 events, whatever their size: 50 MiB of JSON for events of 0.5 MB,
    # held for as long as its client stalled (and max_exports such clients at once)
    import orjson

    from app.export import PAGE_BYTES

    store = client.app.state.node.registry.db.store  # type: ignore[attr-defined]
    real = store.read_events
    read: list[int] = []

    def measuring(name: str, after: int, limit: int, max_bytes: int | None = None) -> Any:
        events = real(name, after, limit, max_bytes)
        read.append(sum(len(text) for _, text in events))
        return events

    big = [({f"f{j}": "v" * 200 for j in range(990)} | {"i": i}, "y") for i in range(12)]  # ~0.2 MB each
    for events, batch in [(make_stream(300), 100), (big, 1), (make_stream(300), 100)]:
        learn_all(client, events, batch=batch)  # each big event a record of its own
    largest = max(len(orjson.dumps(x)) for x, _ in big) + 100  # a page: PAGE_BYTES and one record at most
    store.read_events = measuring
    try:
        for after in (0, 300):
            read.clear()
            r = client.get("/models/default/events", params={"after": after, "limit": 1_000})
            assert r.status_code == 200 and len(r.json()["events"]) == 612 - after
            assert max(read) <= PAGE_BYTES + largest, read
    finally:
        store.read_events = real


def test_exports_beyond_max_exports_are_429_with_retry_after(running: Running) -> None:
    with running(max_exports=2) as client:
        learn_all(client, make_stream(5))
        slots = client.app.state.exports  # type: ignore[attr-defined]
        assert slots.take() and slots.take()  # two exports streaming
        r = client.get("/models/default/events")
        assert r.status_code == 429 and r.headers["retry-after"] == "1"
        assert r.json() == {"detail": "Too many event log exports are streaming; retry shortly."}
        slots.release()
        assert len(client.get("/models/default/events").json()["events"]) == 5
        assert slots.active == 1  # its place given back once answered
        assert client.get("/models/nope/events").status_code == 404 and slots.active == 1
