"""The model host: restart from snapshot + log, failures roll back, concurrent clients, group commit."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from app.hosting import ModelHost
from app.main import create_app
from app.settings import Settings
from app.snapshotting import Snapshots
from app.storage import DB_NAME
from streamtree import ProbabilityTree
from tests.app.conftest import learn_all, make_stream, same_predictions


def fed(events: list[tuple[dict[str, Any], Any]]) -> ProbabilityTree:
    model = ProbabilityTree()
    for x, y in events:
        model.learn_one(x, y)
    return model


def scored(events: list[tuple[dict[str, Any], Any]]) -> ProbabilityTree:
    """The model the service holds after ``events``: each is predicted (for the metrics), then learned."""
    model = ProbabilityTree()
    for x, y in events:
        model.predict_proba_one(x)
        model.learn_one(x, y)
    return model


def snapshot_seqs(data_dir: Path) -> list[int]:
    with sqlite3.connect(data_dir / DB_NAME) as db:
        return [r[0] for r in db.execute("SELECT seq FROM snapshots WHERE model='default' ORDER BY seq")]


def test_graceful_restart_keeps_model_and_metrics(running, stream, tmp_path) -> None:  # type: ignore[no-untyped-def]
    with running() as client:
        learn_all(client, stream, batch=30)
        metrics = client.get("/models/default/metrics").json()
    assert snapshot_seqs(tmp_path / "data") == [0, 300]  # written with the model, and on shutdown
    with running() as client:
        assert client.get("/models/default").json()["seq"] == 300
        assert client.get("/models/default/metrics").json() == metrics
        assert same_predictions(client, fed(stream))
        assert client.post("/learn", json={"features": stream[0][0], "label": "low"}).json()["seq"] == 301


def test_restart_without_shutdown_snapshot_replays_the_log(running, stream, tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    original_close = ModelHost.close

    async def close_without_snapshot(self: ModelHost, snapshot: bool) -> None:
        await original_close(self, snapshot=False)

    with running(snapshot_every=100, snapshot_pace=0) as client:
        learn_all(client, stream[:250], batch=25)
        metrics = client.get("/models/default/metrics").json()
        monkeypatch.setattr(ModelHost, "close", close_without_snapshot)
    assert snapshot_seqs(tmp_path / "data") == [100, 200]  # periodic only; events 201..250 are in the log
    monkeypatch.setattr(ModelHost, "close", original_close)
    with running(snapshot_every=100, snapshot_pace=0) as client:
        assert client.get("/models/default").json()["seq"] == 250
        assert client.get("/models/default/metrics").json() == metrics
        assert same_predictions(client, fed(stream[:250]))


def test_unreadable_snapshot_falls_back_to_the_log(running, stream, tmp_path) -> None:  # type: ignore[no-untyped-def]
    with running() as client:
        learn_all(client, stream)
    with sqlite3.connect(tmp_path / "data" / DB_NAME) as db:
        db.execute("UPDATE snapshot_pieces SET bytes = x'00112233'")  # the snapshots' bytes are in pieces
    with running() as client:
        assert client.get("/models/default").json()["seq"] == 300
        assert same_predictions(client, fed(stream))


def test_gap_in_the_log_keeps_the_model_unavailable_but_the_service_starts(running, stream, tmp_path) -> None:  # type: ignore[no-untyped-def]
    with running() as client:
        learn_all(client, stream[:20], batch=5)  # four records of five events (app.storage.records)
    with sqlite3.connect(tmp_path / "data" / DB_NAME) as db:
        db.execute("DELETE FROM snapshots")
        db.execute("DELETE FROM events WHERE seq = 6")  # events 6 to 10
    with running() as client:  # never a model that differs from its log: this one answers 503, saying why
        r = client.post("/predict_proba", json={"features": stream[0][0]})
        assert r.status_code == 503 and "jumps from seq 5 to 11" in r.json()["detail"]
        assert client.get("/health").status_code == 200


def test_failed_commit_answers_503_and_learns_nothing(running, stream, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    with running() as client:
        learn_all(client, stream[:100])
        store = client.app.state.node.registry.db.store  # type: ignore[attr-defined]
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
            chunk = events[i : i + size]
            body = (
                {"events": [{"features": x, "label": y} for x, y in chunk]}
                if size > 1
                else {"features": chunk[0][0], "label": chunk[0][1]}
            )
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
            order.extend(events[idx : idx + last - first + 1])
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
        host = client.app.state.node.registry.get("default")  # type: ignore[attr-defined]
        model = host.model
        original = model.learn_many

        def flaky(xs: list[dict[str, Any]], ys: list[Any], **kwargs: Any) -> Any:
            original(xs[:2], ys[:2], **kwargs)  # part of the batch is learned, then the library fails
            raise RuntimeError("library bug")

        monkeypatch.setattr(model, "learn_many", flaky)
        r = client.post("/learn", json={"events": [{"features": x, "label": y} for x, y in stream[100:105]]})
        assert r.status_code == 500
        assert r.json() == {"detail": "Internal error while learning; none of the events was learned."}
        assert client.app.state.node.registry.get("default").model is not model  # type: ignore[attr-defined]
        assert client.get("/models/default").json()["seq"] == 100
        assert same_predictions(client, fed(stream[:100]))
        r = client.post("/learn", json={"features": stream[100][0], "label": stream[100][1]})
        assert r.json() == {"learned": 1, "seq": 101}


def test_failed_rebuild_keeps_the_model_unavailable(running, stream, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import app.hosting as hosting

    with running() as client:
        learn_all(client, stream[:50])
        store = client.app.state.node.registry.db.store  # type: ignore[attr-defined]

        def failing(*args: Any) -> None:
            raise sqlite3.OperationalError("disk I/O error")

        def broken_restore(*args: Any) -> None:
            raise sqlite3.OperationalError("database disk image is malformed")

        monkeypatch.setattr(store, "append", failing)
        monkeypatch.setattr(hosting, "restore", broken_restore)
        r = client.post("/learn", json={"features": stream[50][0], "label": stream[50][1]})
        assert r.status_code == 503
        for method, path, body in [
            ("POST", "/learn", {"features": {"a": 1}, "label": "low"}),
            ("POST", "/predict_proba", {"features": {"a": 1}}),
            ("GET", "/models/default", None),
        ]:
            r = client.request(method, path, json=body)
            assert r.status_code == 503 and r.json() == {
                "detail": "Model 'default' is unavailable: rebuilding it "
                "from its log failed (OperationalError). The other models "
                "are served; this one is rebuilt from its log again from "
                "time to time (see the service's log)"
            }


async def _one_group(
    app: Any,
    bodies: list[dict[str, Any]],
    first: dict[str, Any] | None = None,
    predict_first: dict[str, Any] | None = None,
    headers: list[dict[str, str]] | None = None,
) -> tuple[list[httpx.Response], list[int]]:
    """Send ``first``, hold its commit on the store's thread and the writer's lock (under which
    it takes its next group), send ``bodies`` concurrently meanwhile, then release both:
    ``bodies`` all wait in the writer's queue, so they form one
    group. Returns the responses to ``bodies`` and the size of every transaction (append)."""
    transport = httpx.ASGITransport(app=app)
    async with app.router.lifespan_context(app), httpx.AsyncClient(transport=transport, base_url="http://t") as c:
        if predict_first is not None:
            assert (await c.post("/predict_proba", json=predict_first)).status_code == 200
        host = app.state.node.registry.get("default")
        store = app.state.node.registry.db.store
        original, sizes, release = store.append, [], threading.Event()

        def append(name: str, first_seq: int, texts: list[str], *keys: Any) -> None:
            sizes.append(len(texts))
            if len(sizes) == 1:
                release.wait(30)
            original(name, first_seq, texts, *keys)

        store.append = append
        held = asyncio.create_task(c.post("/learn", json=first or {"features": {"a": 0.0}, "label": "low"}))

        async def until(condition: Any) -> None:
            while not condition():
                await asyncio.sleep(0.001)

        await asyncio.wait_for(until(lambda: sizes), 30)  # the first commit is in flight, held
        await host.apply_lock.acquire()  # the writer takes its next group under it: all of bodies
        tasks = [
            asyncio.create_task(c.post("/learn", json=b, headers=headers[i] if headers else None))
            for i, b in enumerate(bodies)
        ]
        await asyncio.wait_for(until(lambda: len(host.writer.queue) == len(bodies)), 30)
        release.set()
        host.apply_lock.release()
        assert (await held).status_code == 200
        responses = list(await asyncio.gather(*tasks))
        app.state.live = (host.model.to_bytes(), host.prequential.state())
        return responses, sizes


def single(x: dict[str, Any], y: Any) -> dict[str, Any]:
    return {"features": x, "label": y}


def test_concurrent_single_learns_share_one_transaction(tmp_path) -> None:  # type: ignore[no-untyped-def]
    events = make_stream(9, seed=21)
    app = create_app(Settings(data_dir=tmp_path))
    responses, sizes = asyncio.run(_one_group(app, [single(x, y) for x, y in events[1:]], single(*events[0])))
    assert [r.status_code for r in responses] == [200] * 8
    assert sizes == [1, 8]  # eight requests, one transaction (one fsync) after the first
    seqs = [r.json()["seq"] for r in responses]
    assert sorted(seqs) == list(range(2, 10))
    order = [events[0]] + [events[1 + seqs.index(s)] for s in range(2, 10)]
    assert app.state.live[0] == scored(order).to_bytes()


def test_a_refused_request_leaves_the_rest_of_its_group_learned(tmp_path) -> None:  # type: ignore[no-untyped-def]
    events = make_stream(12, seed=22)
    bad = [single(x, y) for x, y in events[4:8]]
    bad[2]["features"] = bad[2]["features"] | {"a": "text"}  # "a" is numeric
    bodies = [
        {"events": [single(x, y) for x, y in events[1:4]]},  # learned
        {"events": bad},  # the library refuses its event 2: none of it is learned
        single(*events[8]),  # learned
        single(events[9][0], 7),  # an integer label in a model of strings
        {"id": "k", "label": "low"},  # labels the prediction made with id "k"
        {"id": "k", "label": "mid"},  # the id was used by the request before
    ]

    app = create_app(Settings(data_dir=tmp_path))
    responses, sizes = asyncio.run(
        _one_group(app, bodies, single(*events[0]), predict_first={"features": events[10][0], "id": "k"})
    )
    assert [r.status_code for r in responses] == [200, 422, 200, 422, 200, 422]
    assert responses[1].json()["detail"][0]["loc"] == ["body", "events", 2, "features", "a"]
    assert responses[3].json()["detail"][0]["loc"] == ["body", "label"]
    assert responses[3].json()["detail"][0]["type"] == "label_type"
    assert responses[5].json()["detail"][0]["loc"] == ["body", "id"]
    assert [r.json()["seq"] for i, r in enumerate(responses) if i in (0, 2, 4)] == [4, 5, 6]
    assert sizes == [1, 5]
    learned = events[0:4] + [events[8], (events[10][0], "low")]
    assert app.state.live[0] == scored(learned).to_bytes()


def test_concurrent_requests_with_one_idempotency_key_learn_once(tmp_path) -> None:  # type: ignore[no-untyped-def]
    events = make_stream(6, seed=25)
    bodies = [single(*events[1]), single(*events[2]), single(*events[1]), single(*events[3]), single(*events[4])]
    keys = [{"Idempotency-Key": k} for k in ("a", "b", "a", "b", "c")]  # "b" comes back with another body
    app = create_app(Settings(data_dir=tmp_path))
    responses, sizes = asyncio.run(_one_group(app, bodies, single(*events[0]), headers=keys))
    assert [r.status_code for r in responses] == [200, 200, 200, 422, 200]
    assert [r.json() for r in responses if r.status_code == 200] == [
        {"learned": 1, "seq": 2},
        {"learned": 1, "seq": 3},
        {"learned": 1, "seq": 2},
        {"learned": 1, "seq": 4},
    ]
    assert responses[3].json()["detail"][0]["loc"] == ["header", "Idempotency-Key"]
    assert sizes == [1, 3]  # the repeated keys wait for their first request's commit, then learn nothing
    assert app.state.live[0] == scored([events[0], events[1], events[2], events[4]]).to_bytes()


def test_a_library_failure_costs_only_the_request_at_fault(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    events = make_stream(6, seed=24)
    original = ProbabilityTree.learn_many

    def flaky(self: ProbabilityTree, xs: list[dict[str, Any]], ys: list[Any], **kwargs: Any) -> Any:
        if any("boom" in x for x in xs):
            original(self, xs[:1], ys[:1], **kwargs)  # part of the batch is learned, then the library fails
            raise RuntimeError("library bug")
        return original(self, xs, ys, **kwargs)

    monkeypatch.setattr(ProbabilityTree, "learn_many", flaky)
    bodies = [
        {"events": [single(x, y) for x, y in events[1:4]]},
        single(events[4][0] | {"boom": 1}, "low"),
        single(*events[5]),
    ]
    app = create_app(Settings(data_dir=tmp_path))
    responses, sizes = asyncio.run(_one_group(app, bodies, single(*events[0])))
    assert [r.status_code for r in responses] == [200, 500, 200]
    assert [responses[0].json()["seq"], responses[2].json()["seq"]] == [4, 5]
    assert sizes == [1, 3, 1]  # what was learned before the failure is committed before the rebuild
    assert app.state.live[0] == scored(events[:4] + events[5:]).to_bytes()


def test_replay_equals_live(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The model and metrics rebuilt from the log equal, bit for bit, those that served the
    live requests, whatever groups and chunks the writer learned them in."""
    events = make_stream(1800, seed=23)
    bodies: list[dict[str, Any]] = []
    i = 1
    for k in range(40):  # singles and batches of many sizes, some above the apply chunk
        size = [1, 1, 3, 1, 40, 1, 7, 300][k % 8]
        chunk = events[i : i + size]
        bodies.append(single(*chunk[0]) if size == 1 else {"events": [single(x, y) for x, y in chunk]})
        i += size
    bodies.append({"events": [single(events[i][0] | {"c": "nominal now"}, "low")]})  # refused
    monkeypatch.setattr(Snapshots, "now", _no_snapshot)
    app = create_app(Settings(data_dir=tmp_path))
    responses, sizes = asyncio.run(_one_group(app, bodies, single(*events[0])))
    assert [r.status_code for r in responses] == [200] * 40 + [422]
    assert sizes == [1, i - 1]
    live_model, live_metrics = app.state.live
    monkeypatch.undo()
    from tests.app.conftest import TestClient

    with TestClient(create_app(Settings(data_dir=tmp_path))) as client:  # no snapshot: the log is replayed
        host = client.app.state.node.registry.get("default")  # type: ignore[attr-defined]
        assert host.seq == i
        assert host.model.to_bytes() == live_model
        assert host.prequential.state() == live_metrics


async def _no_snapshot(self: Snapshots) -> None:
    return None


def test_snapshots_are_paced_by_their_cost_and_a_deferred_one_still_comes(running, stream, tmp_path) -> None:  # type: ignore[no-untyped-def]
    # a pace of 1,000 times the first snapshot's cost: while events keep coming, no other
    # snapshot starts; once they stop, the one that was due starts by itself
    with running(snapshot_every=50, snapshot_pace=1000) as client:
        learn_all(client, stream[:50], batch=25)
        host = client.app.state.node.registry.get("default")
        deadline = time.monotonic() + 30
        while host.snapshot_seq != 50 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert host.snapshot_seq == 50
        learn_all(client, stream[50:250], batch=25)  # four more snapshots due, none allowed yet
        assert host.snapshot_seq == 50 and host.seq == 250
        deadline = time.monotonic() + 60
        while host.snapshot_seq != 250 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert host.snapshot_seq == 250  # the deferred one, at the durable seq when it started
        metrics = client.get("/models/default/metrics").json()
    with running(snapshot_every=50) as client:  # restored from it (and the shutdown snapshot)
        assert client.get("/models/default/metrics").json() == metrics
        assert same_predictions(client, fed(stream[:250]))


def test_a_failed_commit_then_a_failed_rebuild_leaves_the_writer_serving(tmp_path, stream, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # the store down: the commit fails while the writer is idle, and so does the rebuild after
    # it. The writer's loop ended there, and every later learn of the model hung for good.
    import app.hosting
    import app.recovery

    monkeypatch.setattr(app.recovery, "FIRST_RETRY", 0.2)
    application = create_app(Settings(data_dir=tmp_path / "data"))

    def failing(*args: Any) -> None:
        raise sqlite3.OperationalError("disk I/O error")

    def event(i: int) -> dict[str, Any]:
        return {"features": stream[i][0], "label": stream[i][1]}

    async def main() -> None:
        transport = httpx.ASGITransport(app=application)
        async with (
            application.router.lifespan_context(application),
            httpx.AsyncClient(transport=transport, base_url="http://t") as c,
        ):
            for i in range(50):
                assert (await c.post("/learn", json=event(i))).status_code == 200
            store = application.state.node.registry.db.store
            original_append, original_restore = store.append, app.hosting.restore
            monkeypatch.setattr(store, "append", failing)
            monkeypatch.setattr(app.hosting, "restore", failing)
            r = await c.post("/learn", json=event(50))
            assert r.status_code == 503, r.text
            monkeypatch.setattr(store, "append", original_append)
            monkeypatch.setattr(app.hosting, "restore", original_restore)
            deadline = time.monotonic() + 20
            while True:  # 503 (the model is out) until the recovery has rebuilt it
                r = await asyncio.wait_for(c.post("/learn", json=event(51)), 10)  # hung: the writer was gone
                if r.status_code != 503 or time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.1)
            assert r.json() == {"learned": 1, "seq": 51}, r.text

    asyncio.run(main())


def test_failed_snapshots_are_tried_again_at_growing_intervals(running, stream, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # on a full disk every group started another snapshot (136 in 15 s), each encoding the model
    with running(snapshot_every=10, snapshot_pace=0) as client:
        store = client.app.state.node.registry.db.store  # type: ignore[attr-defined]
        tried: list[float] = []

        def full_disk(*args: Any) -> None:
            tried.append(time.monotonic())
            raise sqlite3.OperationalError("database or disk is full")

        monkeypatch.setattr(store, "save_snapshot", full_disk)
        started = time.monotonic()
        for i in range(0, 300, 10):  # 30 groups, each making a snapshot due
            r = client.post("/learn", json={"events": [{"features": x, "label": y} for x, y in stream[i : i + 10]]})
            assert r.status_code == 200
        elapsed = time.monotonic() - started
        # retried after 1, 2, 4... s: at most one more attempt than the doublings that fit
        assert 1 <= len(tried) <= 2 + int(elapsed).bit_length(), (len(tried), elapsed)
        monkeypatch.undo()
