"""API keys: writes need a bearer key; reads too with protect_reads."""

from __future__ import annotations

import pytest

KEY = "test-key-0123456789"
OTHER = "another-key-0123456789"


@pytest.fixture
def secured(running):  # type: ignore[no-untyped-def]
    with running(api_keys=[KEY, OTHER]) as client:
        yield client


def test_writes_need_a_key(secured) -> None:  # type: ignore[no-untyped-def]
    body = {"features": {"a": 1}, "label": "x"}
    for method, path, json in [
        ("POST", "/learn", body),
        ("POST", "/models/default/learn", body),
        ("PUT", "/models/m", {}),
        ("DELETE", "/models/default", None),
    ]:
        r = secured.request(method, path, json=json)
        assert r.status_code == 401 and r.json() == {"detail": "Missing bearer token."}, path
        assert r.headers["www-authenticate"] == "Bearer"
        r = secured.request(method, path, json=json, headers={"Authorization": "Bearer wrong-key-000000000"})
        assert r.status_code == 403 and r.json() == {"detail": "Invalid API key."}, path
        r = secured.request(method, path, json=json, headers={"Authorization": f"Basic {KEY}"})
        assert r.status_code == 401, path
    r = secured.post("/learn", json=body, headers={"Authorization": f"Bearer {OTHER}"})
    assert r.status_code == 200 and r.json()["seq"] == 1


def test_reads_are_open_unless_protected(secured, running) -> None:  # type: ignore[no-untyped-def]
    assert secured.post("/predict_proba", json={"features": {"a": 1}}).status_code == 200
    assert secured.get("/models").status_code == 200
    assert secured.get("/metrics").status_code == 200


def test_protect_reads(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from app.main import create_app
    from app.settings import Settings
    from tests.app.conftest import TestClient

    with TestClient(create_app(Settings(data_dir=tmp_path, api_keys=[KEY], protect_reads=True))) as c:
        for method, path in [
            ("POST", "/predict_proba"),
            ("GET", "/models"),
            ("GET", "/models/default"),
            ("GET", "/models/default/metrics"),
            ("GET", "/models/default/tree"),
            ("GET", "/metrics"),
        ]:
            r = c.request(method, path, json={"features": {"a": 1}} if method == "POST" else None)
            assert r.status_code == 401, path
        r = c.post("/predict_proba", json={"features": {"a": 1}}, headers={"Authorization": f"Bearer {KEY}"})
        assert r.status_code == 200
        assert c.get("/health").status_code == 200  # liveness stays open


def test_registry_is_swapped_with_dependency_overrides(client, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Every model route goes through get_registry: overriding it swaps the models."""
    from fastapi import HTTPException

    from app.deps import get_registry

    async def unavailable() -> None:
        raise HTTPException(status_code=503, detail="Service is starting.")

    client.app.dependency_overrides[get_registry] = unavailable  # type: ignore[attr-defined]
    try:
        for method, path in [
            ("POST", "/learn"),
            ("POST", "/predict_proba"),
            ("GET", "/models"),
            ("GET", "/models/default/metrics"),
            ("PUT", "/models/x"),
            ("GET", "/health"),
            ("GET", "/metrics"),
        ]:
            body = {"features": {"a": 1}, "label": "x"} if method == "POST" else ({} if method == "PUT" else None)
            r = client.request(method, path, json=body)
            assert r.status_code == 503 and r.json() == {"detail": "Service is starting."}, path
    finally:
        client.app.dependency_overrides.clear()  # type: ignore[attr-defined]
    assert client.get("/health").status_code == 200


def test_the_key_is_checked_before_the_body_is_parsed(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A caller without a key learns nothing about its body: 401 (403 with a wrong key), not a
    422 naming the body's fault, on every write and, with protect_reads, every read with a body."""
    from app.main import create_app
    from app.settings import Settings
    from tests.app.conftest import TestClient

    malformed = [b'{"features": ', b'{"events": [1, 2]}', b"\xff\xfe", b'{"features": {"a": NaN}, "label": []}']
    routes = [
        ("POST", "/learn"),
        ("POST", "/models/default/learn"),
        ("PUT", "/models/m"),
        ("POST", "/predict_proba"),
        ("POST", "/models/default/decide"),
        ("POST", "/models/default/explain"),
    ]
    with TestClient(create_app(Settings(data_dir=tmp_path, api_keys=[KEY], protect_reads=True))) as c:
        for method, path in routes:
            for body in malformed:
                r = c.request(method, path, content=body, headers={"content-type": "application/json"})
                assert r.status_code == 401 and r.json() == {"detail": "Missing bearer token."}, (path, body)
                r = c.request(
                    method,
                    path,
                    content=body,
                    headers={"content-type": "application/json", "Authorization": "Bearer wrong-key-000000000"},
                )
                assert r.status_code == 403 and r.json() == {"detail": "Invalid API key."}, (path, body)
            r = c.request(
                method,
                path,
                content=malformed[0],
                headers={"content-type": "application/json", "Authorization": f"Bearer {KEY}"},
            )
            assert r.status_code == 422 and r.json()["detail"][0]["type"] == "json_invalid", path
