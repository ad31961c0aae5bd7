"""The service benchmark's stub model serves, learns and snapshots as a real model does."""

from __future__ import annotations

import warnings
from pathlib import Path

from app.main import create_app
from app.settings import Settings
from app.storage import open_store
from bench.service_overhead import StubModel

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # starlette suggests httpx2; httpx is what we have
    from fastapi.testclient import TestClient


def test_the_stub_is_snapshotted_and_restored_by_the_service(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "data", snapshot_every=50, snapshot_pace=0)
    events = [{"features": {"a": float(i)}, "label": "yes" if i % 3 else "no"} for i in range(120)]
    with TestClient(create_app(settings, model_cls=StubModel)) as client:
        r = client.post("/learn", json={"events": events})
        assert r.status_code == 200, r.text
        assert client.post("/predict_proba", json={"features": {"a": 1.0}}).json()["probabilities"] == {
            "yes": 0.5,
            "no": 0.5,
        }
    # the snapshots were written (at seq 50 and 100; the stub has no cost to pace), and the stub comes back
    store = open_store(settings.data_dir)
    try:
        assert store.snapshot_seqs("default")
    finally:
        store.close()
    with TestClient(create_app(settings, model_cls=StubModel)) as client:
        summary = client.get("/models/default").json()
    assert summary["summary"]["n_examples"] == 120
