"""Forks (``PUT /models/{name} {"config", "from"}``): a model of another config learning a
source's logged events, on the real service (TestClient with its lifespan: the fork's
background task runs as in production).

A fork equals, bit for bit, a fresh model of its config fed the source's events; it follows
the source's new events; it reports its progress; it is refused direct learning (409 naming
the source); its source cannot be deleted under it; after a restart it resumes where its log
ends. A ``PUT`` of another config names each parameter that differs.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from fastapi.testclient import TestClient

from tests.app.conftest import learn_all, make_stream

Running = Callable[..., AbstractContextManager[TestClient]]

FOREST = {"estimator": "forest", "n_trees": 3, "seed": 7, "tree": {"grace_period": 40}}


def wait_fork(client: TestClient, name: str, seq: int, deadline_s: float = 120.0) -> dict[str, Any]:
    """The fork's progress once it has learned its source's events up to ``seq`` and follows it
    (a bound for a broken fork only: the test fails there, it measures nothing)."""
    end = time.monotonic() + deadline_s
    while True:
        fork = client.get(f"/models/{name}").json()["fork"]
        if fork["seq"] >= seq and fork["state"] == "following":
            return fork
        assert fork["state"] != "stopped", fork
        assert time.monotonic() < end, f"fork {name!r} did not reach seq {seq}: {fork}"
        time.sleep(0.02)


def model_bytes(client: TestClient, name: str) -> bytes:
    """The served model's saved form (the library's bytes: equal bytes, equal model)."""
    data: bytes = client.app.state.node.registry.get(name).model.to_bytes()  # type: ignore[attr-defined]
    return data


def events_of(client: TestClient, name: str) -> list[dict[str, Any]]:
    """Every logged event of a model, as ``GET /events`` pages them."""
    out: list[dict[str, Any]] = []
    while True:
        page = client.get(f"/models/{name}/events", params={"after": len(out), "limit": 1000}).json()["events"]
        if not page:
            return out
        out += page


def learn_events(client: TestClient, name: str, events: list[dict[str, Any]]) -> None:
    for i in range(0, len(events), 200):
        body = {"events": [{"features": e["features"], "label": e["label"]} for e in events[i : i + 200]]}
        r = client.post(f"/models/{name}/learn", json=body)
        assert r.status_code == 200, r.text


def test_a_fork_equals_a_fresh_model_fed_the_source_events_and_follows_it(running: Running) -> None:
    with running(snapshot_every=500) as client:
        learn_all(client, make_stream(2600), batch=300)  # more than one replay page
        r = client.put("/models/forest", json={"config": FOREST, "from": "default"})
        assert r.status_code == 201, r.text
        body = r.json()
        assert body["config"]["from"] == "default" and body["config"]["n_trees"] == 3
        assert body["fork"]["from"] == "default" and body["fork"]["source_seq"] == 2600
        assert body["fork"]["state"] in ("replaying", "following")
        assert wait_fork(client, "forest", 2600) == {
            "from": "default",
            "seq": 2600,
            "source_seq": 2600,
            "state": "following",
        }
        # new events of the source reach the fork, in order
        learn_all(client, make_stream(400, seed=9), batch=50)
        wait_fork(client, "forest", 3000)
        source_log = events_of(client, "default")
        assert events_of(client, "forest") == source_log  # event n of the fork is event n of the source

        fresh = {k: v for k, v in FOREST.items()}
        assert client.put("/models/fresh", json=fresh).status_code == 201
        learn_events(client, "fresh", source_log)
        assert model_bytes(client, "forest") == model_bytes(client, "fresh")
        listed = {m["name"]: m for m in client.get("/models").json()["models"]}
        assert listed["forest"]["fork"]["seq"] == 3000
        assert "fork" not in listed["fresh"] and "fork" not in listed["default"]


def test_a_fork_of_the_same_config_scores_the_same_metrics_as_its_source(running: Running) -> None:
    """A fork's prequential metrics are its own predictions on the source's events: with the
    source's own config they are the source's, to the last bit (so log losses compare)."""
    with running() as client:
        learn_all(client, make_stream(700), batch=100)
        config = client.get("/models/default").json()["config"]
        assert client.put("/models/twin", json={"config": config, "from": "default"}).status_code == 201
        other = {"config": {"grace_period": 15, "smoothing": "laplace"}, "from": "default"}
        assert client.put("/models/other", json=other).status_code == 201
        wait_fork(client, "twin", 700)
        wait_fork(client, "other", 700)
        source, twin, other_m = (client.get(f"/models/{n}/metrics").json() for n in ("default", "twin", "other"))
        assert twin == source
        assert other_m["seq"] == source["seq"] and other_m["all"]["n"] == source["all"]["n"]
        assert other_m["all"]["log_loss"] != source["all"]["log_loss"]
        history = client.get("/models/twin/metrics/history").json()
        assert history == client.get("/models/default/metrics/history").json()  # same arrival times too


def test_refusals_name_what_is_wrong(client: TestClient) -> None:
    learn_all(client, make_stream(50))
    r = client.put("/models/f", json={"config": {"grace_period": 15}, "from": "nope"})
    assert r.status_code == 404 and r.json() == {"detail": "Model 'nope' not found (body.from)."}
    r = client.put("/models/f", json={"config": {}, "from": "f"})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "from"]
    for bad in ({"config": {}, "from": "default", "grace_period": 3}, {"config": [1], "from": "default"}):
        r = client.put("/models/f", json=bad)
        assert r.status_code == 422, bad
        assert r.json()["detail"][0]["loc"] in (["body", "grace_period"], ["body", "config"])
    r = client.put("/models/f", json={"config": {"grace_period": 0}, "from": "default"})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "grace_period"]
    r = client.put("/models/f", json={"config": {"from": "default"}, "from": "default"})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "from"]
    r = client.put("/models/f", json={"config": {"grace_period": 15}})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "from"]
    assert client.get("/models/f").status_code == 404  # nothing was created by a refused request

    assert client.put("/models/f", json={"config": {"grace_period": 15}, "from": "default"}).status_code == 201
    assert client.put("/models/f", json={"config": {"grace_period": 15}, "from": "default"}).status_code == 200
    wait_fork(client, "f", 50)
    shown = client.get("/models/f").json()["config"]  # its parameters beside "from": PUT back, a no-op
    assert shown["from"] == "default" and shown["grace_period"] == 15
    assert client.put("/models/f", json=shown).status_code == 200
    r = client.put("/models/f", json=shown | {"grace_period": 16})
    assert r.status_code == 409 and "grace_period" in r.json()["differences"]
    assert client.put("/models/g", json={"from": "default", "grace_period": 15}).status_code == 201
    for path, body in (
        ("/models/f/learn", {"features": {"a": 1.0}, "label": "low"}),
        ("/models/f/learn", {"events": [{"features": {"a": 1.0}, "label": "low"}]}),
    ):
        r = client.post(path, json=body)
        assert r.status_code == 409
        assert r.json() == {
            "detail": "Model 'f' is a fork: it learns only the events of the model it follows. "
            "Learn into 'default'; 'f' follows it",
            "source": "default",
        }
    assert client.get("/models/f").json()["seq"] == 50  # learned nothing
    # predictions work as for any model
    r = client.post("/models/f/predict_proba", json={"features": {"a": 0.1, "colour": "red"}})
    assert r.status_code == 200 and set(r.json()["probabilities"]) == {"low", "mid", "high"}

    # the fork's config is another: the PUT of the plain config says what differs
    r = client.put("/models/f", json={"grace_period": 15})
    assert r.status_code == 409
    assert r.json()["differences"] == {"from": {"stored": "default", "requested": None}}


def test_a_conflicting_put_names_each_parameter_that_differs(client: TestClient) -> None:
    assert client.put("/models/m", json={"grace_period": 30, "smoothing": "laplace"}).status_code == 201
    r = client.put("/models/m", json={"grace_period": 15, "smoothing": "laplace", "delta": 0.1})
    assert r.status_code == 409
    body = r.json()
    stored_delta = client.get("/models/m").json()["config"]["delta"]
    assert body["differences"] == {
        "delta": {"stored": stored_delta, "requested": 0.1},
        "grace_period": {"stored": 30, "requested": 15},
    }
    assert body["detail"].startswith("A model with this name exists with a different config: delta, grace_period")
    assert '"from": "m"' in body["detail"]  # how to fork

    assert client.put("/models/rf", json=FOREST).status_code == 201
    r = client.put("/models/rf", json=FOREST | {"n_trees": 4, "tree": {"grace_period": 41}})
    assert r.status_code == 409
    assert r.json()["differences"] == {
        "n_trees": {"stored": 3, "requested": 4},
        "tree.grace_period": {"stored": 40, "requested": 41},
    }
    r = client.put("/models/rf", json={"grace_period": 40})  # a tree: every parameter differs
    assert r.status_code == 409
    diff = r.json()["differences"]
    assert diff["estimator"] == {"stored": "forest", "requested": None}
    assert diff["grace_period"] == {"stored": None, "requested": 40}
    assert diff["tree.grace_period"] == {"stored": 40, "requested": None}
    assert len(diff) > 6 and f"and {len(diff) - 5} more differ" in r.json()["detail"]


def test_a_followed_source_cannot_be_deleted_and_a_fork_of_a_fork_follows_too(client: TestClient) -> None:
    learn_all(client, make_stream(300))
    assert client.put("/models/a", json={"config": {"grace_period": 20}, "from": "default"}).status_code == 201
    assert client.put("/models/b", json={"config": {"grace_period": 10}, "from": "a"}).status_code == 201
    learn_all(client, make_stream(100, seed=3))
    wait_fork(client, "a", 400)
    wait_fork(client, "b", 400)
    assert events_of(client, "b") == events_of(client, "default")
    r = client.delete("/models/default")
    assert r.status_code == 409
    assert r.json() == {
        "detail": "Model 'default' is followed by its forks 'a': delete them first "
        "(a fork learns only its source's events)",
        "forks": ["a"],
    }
    assert client.delete("/models/a").status_code == 409  # b follows a
    assert client.get("/models/default").json()["seq"] == 400  # the refusal lost nothing
    assert client.delete("/models/b").status_code == 204
    assert client.delete("/models/a").status_code == 204
    assert client.delete("/models/default").status_code == 204
    assert client.get("/models").json()["models"] == []


def test_a_fork_resumes_after_a_restart_learning_nothing_twice(running: Running) -> None:
    with running(snapshot_every=300) as client:
        learn_all(client, make_stream(1000), batch=100)
        assert client.put("/models/f", json={"config": FOREST, "from": "default"}).status_code == 201
        wait_fork(client, "f", 1000)
    with running(snapshot_every=300) as client:  # restored from its snapshot and log
        assert client.get("/models/f").json()["fork"]["seq"] == 1000
        learn_all(client, make_stream(500, seed=5), batch=100)
        wait_fork(client, "f", 1500)
        log = events_of(client, "f")
        assert [e["seq"] for e in log] == list(range(1, 1501))
        assert log == events_of(client, "default")
        assert client.put("/models/fresh", json=FOREST).status_code == 201
        learn_events(client, "fresh", log)
        assert model_bytes(client, "f") == model_bytes(client, "fresh")


def test_a_fork_whose_config_refuses_an_event_stops_and_says_why(client: TestClient) -> None:
    learn_all(client, make_stream(30))  # five features
    assert client.put("/models/narrow", json={"config": {"max_features": 2}, "from": "default"}).status_code == 201
    end = time.monotonic() + 60
    while (fork := client.get("/models/narrow").json()["fork"])["state"] != "stopped":
        assert time.monotonic() < end, fork
        time.sleep(0.02)
    assert fork["seq"] == 0 and fork["source_seq"] == 30
    assert fork["error"].startswith("it cannot learn the events of 'default' after seq 0 (")
    assert "max_features=2" in fork["error"]
    assert events_of(client, "narrow") == []  # nothing it did not learn is logged
    # refused mid-slice: the events before the refused one are learned and logged, as a
    # fresh model of its config learns them (the slice used to be dropped whole)
    assert client.put("/models/wide", json={}).status_code == 201
    for i in range(12):
        client.post(
            "/models/wide/learn", json={"features": {"a": float(i), "b": i % 3}, "label": "yes" if i % 2 else "no"}
        )
    client.post("/models/wide/learn", json={"features": {"a": 1.0, "c": 2.0, "d": 3.0}, "label": "no"})
    assert client.put("/models/wide-fork", json={"config": {"max_features": 3}, "from": "wide"}).status_code == 201
    while (fork := client.get("/models/wide-fork").json()["fork"])["state"] != "stopped":
        assert time.monotonic() < end, fork
        time.sleep(0.02)
    assert fork["seq"] == 12 and "after seq 12 (" in fork["error"] and "events 13..13" in fork["error"]
    assert [e["seq"] for e in events_of(client, "wide-fork")] == list(range(1, 13))
    assert learn_all(client, make_stream(10, seed=2)) == 40  # the source goes on
    assert client.get("/models/narrow").json()["fork"]["state"] == "stopped"


def test_a_fork_reads_replaying_until_it_has_learned_its_sources_last_page(running: Running, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # it read "following" from the moment it read a short last page, while learning it
    from app import forks

    seen: list[tuple[str, int]] = []
    apply_logged = forks.ForkHost.apply_logged

    def watched(self, events):  # type: ignore[no-untyped-def]
        seen.append((forks.progress(self, sources[0])["state"], self.seq))
        return apply_logged(self, events)

    sources: list[Any] = []
    monkeypatch.setattr(forks.ForkHost, "apply_logged", watched)
    with running() as client:
        learn_all(client, make_stream(600), batch=300)  # one page, shorter than a replay page
        sources.append(client.app.state.node.registry.get("default"))  # type: ignore[attr-defined]
        r = client.put("/models/fork", json={"config": {"grace_period": 30}, "from": "default"})
        assert r.status_code == 201, r.text
        wait_fork(client, "fork", 600)
    assert len(seen) > 1, "the page was learned in one slice: nothing to observe between slices"
    assert all(state == "replaying" for state, seq in seen), seen
