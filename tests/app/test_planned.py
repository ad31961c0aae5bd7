"""Routes answered through a plan (``app.planned``) answer exactly as FastAPI's own handler does."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import pytest
from fastapi import APIRouter, Header, Request
from fastapi.testclient import TestClient

from app.main import create_app
from app.planned import plan_of
from app.routers import decide, events, learn, models, predict
from app.settings import Settings
from tests.app.conftest import Event, learn_all


def routes(router: APIRouter) -> dict[tuple[str, str], Any]:
    return {(m, r.path): r for r in router.routes for m in getattr(r, "methods", ())}  # type: ignore[attr-defined]


HOT = [
    (learn.router, "POST", "/learn"),
    (learn.router, "POST", "/models/{name}/learn"),
    (predict.router, "POST", "/predict_proba"),
    (predict.router, "POST", "/models/{name}/predict_proba"),
    (decide.router, "POST", "/decide"),
    (decide.router, "POST", "/models/{name}/decide"),
]


@pytest.mark.parametrize(("router", "method", "path"), HOT)
def test_the_hot_routes_have_a_plan(router: APIRouter, method: str, path: str) -> None:
    assert plan_of(routes(router)[(method, path)].dependant) is not None


def test_routes_a_plan_cannot_describe_keep_fastapis_handler() -> None:
    scratch = APIRouter()

    @scratch.post("/q")
    async def with_query(q: int, request: Request) -> dict[str, int]:  # a query parameter, and a dict to serialize
        return {"q": q}

    @scratch.post("/h")
    async def with_list_header(x_tags: Annotated[list[str], Header()]) -> dict[str, int]:
        return {}

    @scratch.post("/sync")
    def synchronous(request: Request) -> dict[str, int]:
        return {}

    assert all(plan_of(r.dependant) is None for r in scratch.routes)  # type: ignore[attr-defined]
    assert plan_of(routes(events.router)[("GET", "/models/{name}/events")].dependant) is None  # query parameters
    assert routes(models.router)  # a router whose routes are planned or not, each on its own


REQUESTS: list[tuple[str, str, Any, dict[str, str]]] = [
    ("POST", "/predict_proba", {"features": {"a": 1.0, "colour": "red"}}, {}),
    ("POST", "/models/default/predict_proba", {"instances": [{"a": 1.0}, {"b": 2.0}]}, {}),
    ("POST", "/models/default/predict_proba", {"features": {"a": "x" * 10_000}}, {}),  # a too long string
    ("POST", "/models/default/predict_proba", {"features": {"a": 1.0}, "extra": 1}, {}),  # an unknown key
    ("POST", "/models/nope/predict_proba", {"features": {"a": 1.0}}, {}),  # no such model
    ("POST", "/models/-bad-/predict_proba", {"features": {"a": 1.0}}, {}),  # the name's pattern
    ("POST", "/predict_proba", [1, 2], {}),  # not an object
    ("POST", "/predict_proba", b'{"features": ', {}),  # malformed
    ("POST", "/predict_proba", b"", {}),  # empty
    ("POST", "/predict_proba", b'{"features": {"a": 1.0}}', {"content-type": "text/plain"}),
    ("POST", "/predict_proba", b'{"features": {"a": "\\ud800"}}', {}),  # a lone surrogate
    ("POST", "/learn", {"features": {"a": 1.0, "colour": "red"}, "label": "low"}, {"Idempotency-Key": "k1"}),
    ("POST", "/learn", {"features": {"a": 1.0}, "label": "low"}, {"Idempotency-Key": "k" * 300}),
    ("POST", "/learn", {"features": {"a": 1.0}}, {}),  # no label
    ("POST", "/models/default/learn", {"events": [{"features": {"a": 2.0}, "label": "mid"}]}, {}),
    ("POST", "/decide", {"features": {"a": 1.0}, "costs": {"act": {"low": 1, "mid": 0, "high": 0}}}, {}),
    ("POST", "/decide", {"features": {"a": 1.0}, "costs": "none"}, {}),
]


def answers(client: TestClient) -> list[tuple[int, Any]]:
    out = []
    for method, path, body, headers in REQUESTS:
        if isinstance(body, bytes):
            hdrs = {"content-type": "application/json"} | headers
            r = client.request(method, path, content=body, headers=hdrs)
        else:
            r = client.request(method, path, json=body, headers=headers)
        out.append((r.status_code, r.json()))
    return out


def test_planned_answers_are_fastapis_answers(tmp_path: Path, stream: list[Event]) -> None:
    """The same requests on two fresh services, one with a dependency override (which makes every
    route use FastAPI's handler): the same statuses and bodies, errors included."""
    with TestClient(create_app(Settings(data_dir=tmp_path / "a"))) as planned:
        learn_all(planned, stream[:100])
        through_plans = answers(planned)
    with TestClient(create_app(Settings(data_dir=tmp_path / "b"))) as fastapi:
        fastapi.app.dependency_overrides[object] = object  # type: ignore[attr-defined]  # any override
        learn_all(fastapi, stream[:100])
        through_fastapi = answers(fastapi)
    assert [status for status, _ in through_plans] == [
        200, 200, 422, 422, 404, 422, 422, 422, 422, 422, 422, 200, 422, 422, 200, 200, 422,
    ]  # fmt: skip
    assert through_plans == through_fastapi
