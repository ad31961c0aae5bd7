"""The model host: restart from snapshot + log, failures roll back, concurrent clients, group commit."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import httpx
import pytest
from streamtree import ProbabilityTree

from app.hosting import ModelHost
from app.main import create_app
from app.settings import Settings
from app.storage import DB_NAME
from tests.app.conftest import learn_all, make_stream, same_predictions


def fed(events: list[tuple[dict[str, Any], Any]]) -> ProbabilityTree:
    model = ProbabilityTree()
    for x, y in events:
        model.learn_one(x, y)
    return model


def snapshot_seqs(data_dir: Path) -> list[int]:
    with sqlite3.connect(data_dir / DB_NAME) as db:
        return [r[0] for r in db.execute("SELECT seq FROM snapshots WHERE model='default' ORDER BY seq")]


def test_graceful_restart_keeps_model_and_metrics(running, stream, tmp_path) -> None:  # type: ignore[no-untyped-def]
    with running() as client:
        learn_all(client, stream, batch=30)
        metrics = client.get("/models/default/metrics").json()
    assert snapshot_seqs(tmp_path / "data") == [300]  # written on shutdown
    with running() as client:
        assert client.get("/models/default").json()["seq"] == 300
        assert client.get("/models/default/metrics").json() == metrics
        assert same_predictions(client, fed(stream))
        assert client.post("/learn", json={"features": stream[0][0], "label": "low"}).json()["seq"] == 301


def test_restart_without_shutdown_snapshot_replays_the_log(running, stream, tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    original_close = ModelHost.close

    async def close_without_snapshot(self: ModelHost, snapshot: bool) -> None:
        await original_close(self, snapshot=False)

    with running(snapshot_every=100) as client:
        learn_all(client, stream[:250], batch=25)
        metrics = client.get("/models/default/metrics").json()
        monkeypatch.setattr(ModelHost, "close", close_without_snapshot)
    assert snapshot_seqs(tmp_path / "data") == [100, 200]  # periodic only; events 201..250 are in the log
    monkeypatch.setattr(ModelHost, "close", original_close)
    with running(snapshot_every=100) as client:
        assert client.get("/models/default").json()["seq"] == 250
        assert client.get("/models/default/metrics").json() == metrics
        assert same_predictions(client, fed(stream[:250]))


def test_unreadable_snapshot_falls_back_to_the_log(running, stream, tmp_path) -> None:  # type: ignore[no-untyped-def]
    with running() as client:
        learn_all(client, stream)
    with sqlite3.connect(tmp_path / "data" / DB_NAME) as db:
        db.execute("UPDATE snapshots SET model_bytes = x'00112233'")
    with running() as client:
        assert client.get("/models/default").json()["seq"] == 300
        assert same_predictions(client, fed(stream))


def test_gap_in_the_log_refuses_to_start(running, stream, tmp_path) -> None:  # type: ignore[no-untyped-def]
    with running() as client:
        learn_all(client, stream[:20])
    with sqlite3.connect(tmp_path / "data" / DB_NAME) as db:
        db.execute("DELETE FROM snapshots")
        db.execute("DELETE FROM events WHERE seq = 7")
    with pytest.raises(RuntimeError, match="jumps from seq 6 to 8"):
        with running():
            pass


def test_failed_commit_answers_503_and_learns_nothing(running, stream, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    with running() as client:
        learn_all(client, stream[:100])
        store = client.app.state.registry.db.store  # type: ignore[attr-defined]
        original = store.append

        def failing(*args: Any) -> None:
            raise sqlite3.OperationalError("disk I/O error")

        monkeypatch.setattr(store, "append", failing)
        r = client.post("/learn", json={"events": [{"features": x, "label": y} for x, y in stream[100:110]]})
        assert r.status_code == 503
        assert r.json() == {"detail": "Events could not be stored; none were learned."}
        monkeypatch.setattr(store, "append", original)
        assert client.get("/models/default").json()["seq"] == 100
        assert same_predictions(client, fed(stream[:100]))
        r = client.post("/learn", json={"features": stream[110][0], "label": stream[110][1]})
        assert r.json() == {"learned": 1, "seq": 101}
        assert same_predictions(client, fed(stream[:100] + [stream[110]]))


async def _concurrent(app: Any, events: list[tuple[dict[str, Any], Any]]) -> tuple[list[Any], list[int]]:
    acked: list[tuple[int, int, int]] = []  # (first seq, last seq, index of first event)
    statuses: list[int] = []
    transport = httpx.ASGITransport(app=app)
    async with app.router.lifespan_context(app), httpx.AsyncClient(transport=transport, base_url="http://t") as c:
        async def learner(i: int, size: int) -> None:
            chunk = events[i:i + size]
            body = ({"events": [{"features": x, "label": y} for x, y in chunk]} if size > 1
                    else {"features": chunk[0][0], "label": chunk[0][1]})
            r = await c.post("/learn", json=body)
            statuses.append(r.status_code)
            seq = r.json()["seq"]
            acked.append((seq - size + 1, seq, i))

        async def predictor(x: dict[str, Any]) -> None:
            r = await c.post("/predict_proba", json={"features": x})
            statuses.append(r.status_code)

        tasks, i = [], 0
        for k in range(60):
            size = 1 + k % 3
            tasks.append(learner(i, size))
            tasks.append(predictor(events[k][0]))
            i += size
        await asyncio.gather(*tasks)
        group = app.state.telemetry.commit_events.collect()[0]
        count = next(s.value for s in group.samples if s.name.endswith("_count"))
        # Reorder the events by the sequence numbers the service gave them.
        order: list[tuple[dict[str, Any], Any]] = []
        for first, last, idx in sorted(acked):
            order.extend(events[idx:idx + last - first + 1])
        seqs = sorted(s for a in acked for s in range(a[0], a[1] + 1))
        return [order, count], statuses + seqs


def test_concurrent_clients_no_5xx_no_lost_update(tmp_path) -> None:  # type: ignore[no-untyped-def]
    events = make_stream(200, seed=8)
    app = create_app(Settings(data_dir=tmp_path))
    (order, commits), rest = asyncio.run(_concurrent(app, events))
    statuses, seqs = rest[:120], rest[120:]
    assert set(statuses) == {200}
    assert seqs == list(range(1, 121))  # every acknowledged event numbered once, no gap
    assert commits < 60  # concurrent learn requests shared group commits
    from tests.app.conftest import TestClient

    with TestClient(create_app(Settings(data_dir=tmp_path))) as client:
        assert client.get("/models/default").json()["seq"] == 120
        assert same_predictions(client, fed(order))


def test_unexpected_library_error_mid_batch_is_500_and_learns_nothing(running, stream, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    with running() as client:
        learn_all(client, stream[:100])
        host = client.app.state.registry.get("default")  # type: ignore[attr-defined]
        model = host.model
        original = model.learn_one
        calls = {"n": 0}

        def flaky(x: dict[str, Any], y: Any) -> None:
            calls["n"] += 1
            if calls["n"] == 3:
                raise RuntimeError("library bug")
            original(x, y)

        monkeypatch.setattr(model, "learn_one", flaky)
        r = client.post("/learn", json={"events": [{"features": x, "label": y} for x, y in stream[100:105]]})
        assert r.status_code == 500
        assert r.json() == {"detail": "Internal error while learning; none of the events was learned."}
        assert client.app.state.registry.get("default").model is not model  # type: ignore[attr-defined]
        assert client.get("/models/default").json()["seq"] == 100
        assert same_predictions(client, fed(stream[:100]))
        r = client.post("/learn", json={"features": stream[100][0], "label": stream[100][1]})
        assert r.json() == {"learned": 1, "seq": 101}


def test_failed_rebuild_keeps_the_model_unavailable(running, stream, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import app.hosting as hosting

    with running() as client:
        learn_all(client, stream[:50])
        store = client.app.state.registry.db.store  # type: ignore[attr-defined]

        def failing(*args: Any) -> None:
            raise sqlite3.OperationalError("disk I/O error")

        def broken_restore(*args: Any) -> None:
            raise sqlite3.OperationalError("database disk image is malformed")

        monkeypatch.setattr(store, "append", failing)
        monkeypatch.setattr(hosting, "restore", broken_restore)
        r = client.post("/learn", json={"features": stream[50][0], "label": stream[50][1]})
        assert r.status_code == 503
        for method, path, body in [("POST", "/learn", {"features": {"a": 1}, "label": "low"}),
                                   ("POST", "/predict_proba", {"features": {"a": 1}}),
                                   ("GET", "/models/default", None)]:
            r = client.request(method, path, json=body)
            assert r.status_code == 503 and r.json() == {"detail": "Model is recovering; retry shortly."}
