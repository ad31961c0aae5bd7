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


@pytest.mark.parametrize(("field", "value"), [
    ("after", -1), ("after", "x"), ("after", 2**63), ("after", 1.5),
    ("limit", 0), ("limit", EVENTS_MAX + 1), ("limit", "ten"),
])
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
        assert client.get("/models/default/events", headers={"Authorization": "Bearer wrong-key-0123456789"}
                          ).status_code == 403
        assert client.get("/models/default/events", headers={"Authorization": f"Bearer {KEY}"}).status_code == 200


def test_a_store_failure_is_503(client: TestClient) -> None:
    learn_all(client, make_stream(5))
    store = client.app.state.registry.db.store  # type: ignore[attr-defined]
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
