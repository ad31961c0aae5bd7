"""A learn refused for the model's memory budget (max_bytes) whose events the writer learns in
stretches (app.pacing): answered 422 naming max_bytes, none of it learned; and a log an older
version accepted past the budget still replays."""

from __future__ import annotations

from typing import Any

from tests.app.conftest import learn_all, make_stream


def test_a_request_refused_for_max_bytes_in_a_later_stretch_learns_nothing(running: Any) -> None:
    # the stretches before the refused one stayed learned, unlogged: the model differed from its log
    # (the request is now checked whole, the budget included, before any stretch is learned)
    with running() as client:
        assert client.put("/models/small", json={"max_bytes": 2 * 2**20}).status_code == 201
        learn_all(client, make_stream(100), path="/models/small/learn")
        host = client.app.state.node.registry.get("small")  # type: ignore[attr-defined]
        before = host.model.to_bytes()
        ordinary = [{"features": x, "label": y} for x, y in make_stream(1_000, seed=1)]  # a stretch: learned
        many_labels = [{"features": {"a": float(i)}, "label": f"class-{i}"} for i in range(900)]
        r = client.post("/models/small/learn", json={"events": ordinary + many_labels})
        assert r.status_code == 422, r.text
        assert "max_bytes" in r.json()["detail"][0]["msg"] and r.json()["detail"][0]["loc"] == [
            "body",
            "events",
            "features",
        ]  # as for max_features
        assert client.get("/models/small").json()["seq"] == 100
        assert host.model.to_bytes() == before  # nothing of the request
        assert client.post("/models/small/learn", json={"events": ordinary}).json() == {"learned": 1000, "seq": 1100}


def test_a_log_an_older_version_accepted_past_the_budget_still_replays(running: Any, tmp_path: Any) -> None:
    # events of many new classes, accepted before max_bytes bounded them: refusing them on
    # replay would leave the model unavailable at the first restart after an upgrade
    from app.learning import encode_events
    from app.storage import DB_NAME
    from app.storage.sqlite import SQLiteStore

    with running() as client:
        assert client.put("/models/small", json={"max_bytes": 2 * 2**20}).status_code == 201
        learn_all(client, make_stream(100), path="/models/small/learn")
    store = SQLiteStore(tmp_path / "data" / DB_NAME)
    old = encode_events([{"a": float(i)} for i in range(900)], [f"class-{i}" for i in range(900)], 0.0)
    store.append("small", 101, old)  # as a version without the refusal logged them
    store.close()
    with running() as client:
        assert "unavailable" not in client.get("/health").json()
        assert client.get("/models/small").json()["seq"] == 1000
        r = client.post("/models/small/learn", json={"features": {"a": 1.0}, "label": "yet another"})
        assert r.status_code == 422 and "max_bytes" in r.json()["detail"][0]["msg"]  # live learning refuses
