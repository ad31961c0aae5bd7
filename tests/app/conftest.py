"""Fixtures of the service tests: an app on a temporary data directory, and a small stream."""

from __future__ import annotations

import random
import warnings
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import pytest

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # starlette suggests httpx2; httpx is what we have
    from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import Settings
from tests.pg import pg_cluster, pg_url  # noqa: F401  (fixtures: a throwaway PostgreSQL)

Event = tuple[dict[str, Any], str]


def make_stream(n: int, seed: int = 0) -> list[Event]:
    """A deterministic labelled stream: 3 numeric and 2 nominal features, 3 classes, some noise."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        x: dict[str, Any] = {
            "a": round(rng.gauss(0, 1), 6),
            "b": round(rng.uniform(-2, 2), 6),
            "c": rng.randint(0, 9),
            "colour": rng.choice(["red", "green", "blue"]),
            "flag": rng.random() < 0.5,
        }
        s = x["a"] + 0.5 * x["b"] - 0.7 * (x["colour"] == "red")
        y = "low" if s < -0.4 else ("mid" if s < 0.6 else "high")
        if rng.random() < 0.05:
            y = rng.choice(["low", "mid", "high"])
        out.append((x, y))
    return out


@pytest.fixture
def stream() -> list[Event]:
    """300 labelled events."""
    return make_stream(300)


@pytest.fixture
def running(tmp_path: Path) -> Callable[..., AbstractContextManager[TestClient]]:
    """``with running(**settings) as client:`` an app (lifespan run) on ``tmp_path/data``."""

    @contextmanager
    def run(**overrides: Any) -> Iterator[TestClient]:
        settings = Settings(data_dir=tmp_path / "data", **overrides)
        with TestClient(create_app(settings)) as client:
            yield client

    return run


@pytest.fixture
def client(running: Callable[..., AbstractContextManager[TestClient]]) -> Iterator[TestClient]:
    """An app with default settings."""
    with running() as c:
        yield c


def learn_all(client: TestClient, events: list[Event], path: str = "/learn", batch: int = 100) -> int:
    """Learn events in batches; return the last seq."""
    seq = 0
    for i in range(0, len(events), batch):
        body = {"events": [{"features": x, "label": y} for x, y in events[i : i + batch]]}
        r = client.post(path, json=body)
        assert r.status_code == 200, r.text
        seq = r.json()["seq"]
    return seq


def batch_proba(model: Any, xs: list[dict[str, Any]]) -> list[dict[str, float]]:
    """``model.predict_proba`` as the service returns it for ``{"instances": xs}``."""
    keys = [str(c).lower() if isinstance(c, bool) else str(c) for c in model.classes_]
    return [dict(zip(keys, row, strict=True)) for row in model.predict_proba(xs).tolist()]


def same_predictions(client: TestClient, model: Any, name: str = "default", n: int = 20) -> bool:
    """Whether the served model and ``model`` predict exactly the same on fixed probes (single and batch)."""
    probes = [x for x, _ in make_stream(n, seed=12345)]
    batch = client.post(f"/models/{name}/predict_proba", json={"instances": probes}).json()["probabilities"]
    single = [
        client.post(f"/models/{name}/predict_proba", json={"features": x}).json()["probabilities"] for x in probes
    ]
    return batch == batch_proba(model, probes) and single == [
        {(str(k).lower() if isinstance(k, bool) else str(k)): v for k, v in model.predict_proba_one(x).items()}
        for x in probes
    ]
