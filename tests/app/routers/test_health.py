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
    assert r.status_code == 200 and r.json() == {"status": "ok", "role": "writer", "seq": {"default": 0}}


def test_a_single_sqlite_instance_is_the_writer_and_reports_applied_seqs(client: TestClient) -> None:
    client.put("/models/other", json={})
    client.post("/learn", json={"events": [{"features": {"a": i}, "label": "x"} for i in range(3)]})
    assert client.get("/health").json() == {"status": "ok", "role": "writer", "seq": {"default": 3, "other": 0}}
    metrics = client.get("/metrics").text
    assert 'streamtree_role{role="writer"} 1.0' in metrics and 'streamtree_role{role="replica"} 0.0' in metrics
    assert 'streamtree_replica_lag_events{model="default"} 0.0' in metrics


def test_503_before_models_are_loaded(tmp_path) -> None:  # type: ignore[no-untyped-def]
    app = create_app(Settings(data_dir=tmp_path))
    c = TestClient(app)  # not entered: the lifespan handler has not run
    r = c.get("/health")
    assert r.status_code == 503 and r.json() == {"detail": "Service is starting."}
