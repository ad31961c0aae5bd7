"""GET /health."""

from __future__ import annotations

import warnings

from app.main import create_app
from app.settings import Settings

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient


def test_ok_once_loaded(client: TestClient) -> None:
    r = client.get("/health")
    assert r.status_code == 200 and r.json() == {"status": "ok"}


def test_503_before_models_are_loaded(tmp_path) -> None:  # type: ignore[no-untyped-def]
    app = create_app(Settings(data_dir=tmp_path))
    c = TestClient(app)  # not entered: the lifespan handler has not run
    r = c.get("/health")
    assert r.status_code == 503 and r.json() == {"detail": "Service is starting."}
