"""The writer learns the next group while the last one commits, and undoes it if that commit fails.

Each test holds the first request's commit on the store's thread, sends another request,
and only then lets the commit finish, or fail. What must hold: a group learned behind a
commit is committed after it (the log in order), answered only once durable; a failed commit
takes the group learned behind it with it (both answered 503, the model back to the durable
state); a retry of a request in flight (same ``Idempotency-Key``) is not learned twice; and
no snapshot is taken of a state that is not durable.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import httpx

from app.main import create_app
from app.settings import Settings
from app.storage import StorageError
from tests.app.conftest import make_stream
from tests.app.test_hosting import scored, single


async def _behind_a_held_commit(
    app: Any,
    first: dict[str, Any],
    then: dict[str, Any],
    learned_behind: Callable[[Any], bool],
    fail: bool = False,
    headers: dict[str, str] | None = None,
    also: Sequence[tuple[dict[str, Any], Callable[[Any], bool]]] = (),
    before: Sequence[tuple[str, dict[str, Any]]] = (),
) -> tuple[httpx.Response, httpx.Response, list[tuple[int, int]], Any]:
    """Post each ``(path, body)`` of ``before``; send ``first`` and hold its commit; send ``then`` and wait until ``learned_behind(host)``;
    then each of ``also`` (a body, and until when to wait after sending it); release the commit
    (failing it if ``fail``). Returns the first two responses (those of ``also`` in
    ``app.state.more``), every append as ``(first seq, events)`` and the host."""
    transport = httpx.ASGITransport(app=app)
    async with app.router.lifespan_context(app), httpx.AsyncClient(transport=transport, base_url="http://t") as c:
        host = app.state.node.registry.get("default")
        store = app.state.node.registry.db.store
        for path, body in before:
            assert (await c.post(path, json=body)).status_code == 200
        original, appends, release = store.append, [], threading.Event()
        more: list[asyncio.Task[httpx.Response]] = []

        def append(name: str, first_seq: int, texts: list[str], *keys: Any) -> None:
            appends.append((first_seq, len(texts)))
            if len(appends) == 1:
                release.wait(30)
                if fail:
                    raise StorageError("disk full")
            original(name, first_seq, texts, *keys)

        store.append = append

        async def until(condition: Callable[[], bool]) -> None:
            while not condition():
                await asyncio.sleep(0.001)

        held = asyncio.create_task(c.post("/learn", json=first, headers=headers))
        await asyncio.wait_for(until(lambda: bool(appends)), 30)  # the first commit is in flight, held
        behind = asyncio.create_task(c.post("/learn", json=then, headers=headers))
        await asyncio.wait_for(until(lambda: learned_behind(host)), 30)
        for body, condition in also:  # more requests while the first commit is still held
            more.append(asyncio.create_task(c.post("/learn", json=body, headers=headers)))
            await asyncio.wait_for(until(lambda: condition(host)), 30)  # noqa: B023 (awaited here)
        assert not held.done() and not behind.done()  # neither is answered before its commit
        assert not any(task.done() for task in more)
        release.set()
        responses = await held, await behind
        app.state.more = [await task for task in more]
        app.state.snapshots = store.snapshot_seqs("default")
        app.state.log = store.read_events("default", 0, 100)
        app.state.live = host.model.to_bytes()
        return *responses, appends, host


def test_a_group_is_learned_behind_the_commit_in_flight_and_committed_after_it(tmp_path: Path) -> None:
    events = make_stream(6, seed=41)
    app = create_app(Settings(data_dir=tmp_path))
    first, then = single(*events[0]), {"events": [single(x, y) for x, y in events[1:6]]}
    held, behind, appends, host = asyncio.run(
        _behind_a_held_commit(app, first, then, lambda host: host.seq == 6)  # learned while 1 is held
    )
    assert (held.status_code, held.json()) == (200, {"learned": 1, "seq": 1})
    assert (behind.status_code, behind.json()) == (200, {"learned": 5, "seq": 6})
    assert appends == [(1, 1), (2, 5)]  # in order, the second once the first was durable
    assert [seq for seq, _ in app.state.log] == list(range(1, 7))
    assert app.state.live == scored(events[:6]).to_bytes()


def test_a_failed_commit_undoes_the_group_learned_behind_it(tmp_path: Path) -> None:
    events = make_stream(8, seed=42)
    app = create_app(Settings(data_dir=tmp_path))
    first, then = single(*events[0]), {"events": [single(x, y) for x, y in events[1:6]]}
    held, behind, appends, host = asyncio.run(
        _behind_a_held_commit(app, first, then, lambda host: host.seq == 6, fail=True)
    )
    assert held.status_code == behind.status_code == 503  # neither was durable: both may be retried
    assert appends == [(1, 1)]  # the second group is never written after a failed first
    assert host.seq == 0 and app.state.log == []
    assert app.state.live == scored([]).to_bytes()  # back to the durable state: nothing of either


def test_a_retry_of_a_request_in_flight_is_not_learned_behind_it(tmp_path: Path) -> None:
    events = make_stream(2, seed=43)
    app = create_app(Settings(data_dir=tmp_path))
    body = single(*events[0])
    held, retry, appends, host = asyncio.run(
        # the retry waits in the queue: a keyed request is only looked at once nothing is in flight
        _behind_a_held_commit(
            app, body, body, lambda host: len(host.writer.queue) == 1, headers={"Idempotency-Key": "k"}
        )
    )
    assert held.json() == retry.json() == {"learned": 1, "seq": 1}
    assert appends == [(1, 1)] and host.seq == 1


def test_no_snapshot_is_taken_of_a_group_whose_commit_fails(tmp_path: Path) -> None:
    events = make_stream(4, seed=44)
    app = create_app(Settings(data_dir=tmp_path, snapshot_every=2))
    first, then = {"events": [single(x, y) for x, y in events[:2]]}, single(*events[2])
    # a snapshot is due after the first group: the next one waits for its commit, so it is not
    # learned behind it, and the capture would come only once the commit is durable
    held, behind, appends, host = asyncio.run(
        _behind_a_held_commit(app, first, then, lambda host: len(host.writer.queue) == 1, fail=True)
    )
    assert held.status_code == 503
    assert (behind.status_code, behind.json()) == (200, {"learned": 1, "seq": 1})  # learned after the rebuild
    assert appends == [(1, 2), (1, 1)]
    assert all(seq <= 1 for seq in app.state.snapshots)  # never one at seq 2, which the log lacks
    assert app.state.live == scored([events[2]]).to_bytes()


def test_what_comes_while_a_group_waits_behind_a_commit_joins_it(tmp_path: Path) -> None:
    events = make_stream(9, seed=45)
    app = create_app(Settings(data_dir=tmp_path))
    first, then = single(*events[0]), {"events": [single(x, y) for x, y in events[1:4]]}
    also = [
        (single(*events[4]), lambda host: host.seq == 5),
        ({"events": [single(x, y) for x, y in events[5:9]]}, lambda host: host.seq == 9),
    ]
    held, behind, appends, host = asyncio.run(
        _behind_a_held_commit(app, first, then, lambda host: host.seq == 4, also=also)
    )
    assert [r.json() for r in (held, behind, *app.state.more)] == [
        {"learned": 1, "seq": 1},
        {"learned": 3, "seq": 4},
        {"learned": 1, "seq": 5},
        {"learned": 4, "seq": 9},
    ]
    assert appends == [(1, 1), (2, 8)]  # the three learned behind the held commit: one commit after it
    assert app.state.live == scored(events[:9]).to_bytes()


def test_a_group_behind_a_commit_stays_within_group_max_events(tmp_path: Path) -> None:
    events = make_stream(9, seed=46)
    app = create_app(Settings(data_dir=tmp_path, group_max_events=4))
    first, then = single(*events[0]), {"events": [single(x, y) for x, y in events[1:4]]}
    also = [
        (single(*events[4]), lambda host: host.seq == 5),  # fits: 4 events behind the commit
        ({"events": [single(x, y) for x, y in events[5:7]]}, lambda host: len(host.writer.queue) == 1),  # does not
    ]
    held, behind, appends, host = asyncio.run(
        _behind_a_held_commit(app, first, then, lambda host: host.seq == 4, also=also)
    )
    assert [r.json()["seq"] for r in (held, behind, *app.state.more)] == [1, 4, 5, 7]
    assert appends == [(1, 1), (2, 4), (6, 2)]
    assert app.state.live == scored(events[:7]).to_bytes()


def test_a_failed_commit_gives_back_the_ids_its_labels_took(tmp_path: Path) -> None:
    # the 503 says nothing was learned: the predictions stay pending, for the labels' retries
    # (they were forgotten when learned, so the retry was refused "unknown_id" for good)
    events = make_stream(6, seed=45)
    app = create_app(Settings(data_dir=tmp_path))
    before = [("/learn", {"events": [single(x, y) for x, y in events[:4]]})]
    before += [("/predict_proba", {"features": events[i][0], "id": f"order-{i}"}) for i in (4, 5)]
    first, then = {"id": "order-4", "label": events[4][1]}, {"id": "order-5", "label": events[5][1]}
    held, behind, appends, host = asyncio.run(
        _behind_a_held_commit(app, first, then, lambda host: host.seq == 6, fail=True, before=before)
    )
    assert held.status_code == behind.status_code == 503
    assert host.seq == 4
    assert host.pending.get("order-4") == events[4][0] and host.pending.get("order-5") == events[5][0]


def test_the_retry_of_a_label_whose_commit_failed_is_learned(tmp_path: Path, monkeypatch: Any) -> None:
    from fastapi.testclient import TestClient

    events = make_stream(4, seed=46)
    with TestClient(create_app(Settings(data_dir=tmp_path))) as client:
        client.post("/learn", json={"events": [single(x, y) for x, y in events[:3]]})
        assert client.post("/predict_proba", json={"features": events[3][0], "id": 7}).status_code == 200
        store = client.app.state.node.registry.db.store  # type: ignore[attr-defined]

        def failing(*args: Any) -> None:
            raise StorageError("disk I/O error")

        original = store.append
        monkeypatch.setattr(store, "append", failing)
        assert client.post("/learn", json={"id": 7, "label": events[3][1]}).status_code == 503
        monkeypatch.setattr(store, "append", original)
        r = client.post("/learn", json={"id": 7, "label": events[3][1]}, headers={"Idempotency-Key": "k"})
        assert (r.status_code, r.json()) == (200, {"learned": 1, "seq": 4})
        assert client.app.state.node.registry.get("default").model.to_bytes() == scored(events).to_bytes()  # type: ignore[attr-defined]
