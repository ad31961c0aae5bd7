"""Delayed labels that can never be learned: refused when the prediction is kept, or, when the
model changed since, refused at the label naming the id, which is then let go."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.app.conftest import learn_all, make_stream
from tests.app.test_forks import wait_fork


def test_a_prediction_kept_for_a_label_must_hold_values_the_model_can_learn(client: TestClient) -> None:
    # a prediction reads "red" for a numeric feature as missing; kept under an id, its label was
    # then refused at body.features.x (a field the label does not have), at every retry
    learn_all(client, make_stream(50))
    body = {"features": {"a": "red", "b": 1.0}, "id": "order-1"}
    for path in ("/predict_proba", "/models/default/predict_proba"):
        r = client.post(path, json=body)
        assert r.status_code == 422
        assert r.json()["detail"][0]["loc"] == ["body", "features", "a"]
        assert "numeric in this model" in r.json()["detail"][0]["msg"]
    costs = {"act": {"low": 0, "mid": 1, "high": 2}, "wait": {"low": 1, "mid": 0, "high": 0}}
    r = client.post("/decide", json=body | {"costs": costs})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "features", "a"]
    r = client.post(
        "/models/default/predict_proba",
        json={"instances": [{"features": {"a": 1.0}, "id": "o-2"}, {"features": {"a": True}, "id": "o-3"}]},
    )
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "instances", 1, "features", "a"]
    assert (
        client.post("/predict_proba", json={"features": {"a": "red"}}).status_code == 200
    )  # without an id: read as missing
    assert client.post("/learn", json={"id": "order-1", "label": "low"}).json()["detail"][0]["type"] == "unknown_id"
    assert client.post("/learn", json={"id": "o-2", "label": "low"}).json()["detail"][0]["type"] == "unknown_id"


def test_a_label_whose_prediction_the_model_now_refuses_names_the_id_and_lets_it_go(client: TestClient) -> None:
    learn_all(client, make_stream(50))
    assert client.post("/predict_proba", json={"features": {"z": 1.5}, "id": "order-1"}).status_code == 200
    assert client.post("/learn", json={"features": {"z": "red"}, "label": "low"}).status_code == 200  # z nominal now
    for body, loc in [
        ({"id": "order-1", "label": "low"}, ["body", "id"]),
        ({"events": [{"id": "order-1", "label": "low"}]}, ["body", "events", 0, "id"]),
    ]:
        client.post("/predict_proba", json={"features": {"z": 1.5}}).raise_for_status()
        r = client.post("/learn", json=body)
        assert r.status_code == 422
        detail = r.json()["detail"][0]
        if loc == ["body", "id"]:
            assert detail["loc"] == loc and "cannot be learned, and the id is forgotten" in detail["msg"]
        else:  # let go by the first: unknown now, and the batch with it is refused for that alone
            assert detail["loc"] == loc and detail["type"] == "unknown_id"
    assert client.get("/models/default").json()["seq"] == 51


def test_a_fork_keeps_no_id(client: TestClient) -> None:
    # it answered 200 and kept the ids, which no route could label: the fork refuses labels
    # (it learns its source's log), and the source never saw the ids
    learn_all(client, make_stream(50))
    assert client.put("/models/trial", json={"from": "default"}).status_code == 201
    wait_fork(client, "trial", 50)
    x = make_stream(1, seed=3)[0][0]
    costs = {"act": {"low": 0, "mid": 1, "high": 2}, "wait": {"low": 1, "mid": 0, "high": 0}}
    for path, body, loc in [
        ("predict_proba", {"features": x, "id": "o-1"}, ["body", "id"]),
        ("predict_proba", {"instances": [x, {"features": x, "id": "o-2"}]}, ["body", "instances", 1, "id"]),
        ("decide", {"features": x, "id": "o-3", "costs": costs}, ["body", "id"]),
        ("decide", {"instances": [{"features": x, "id": "o-4"}], "costs": costs}, ["body", "instances", 0, "id"]),
    ]:
        r = client.post(f"/models/trial/{path}", json=body)
        assert r.status_code == 422, (path, r.text)
        assert r.json()["detail"][0]["loc"] == loc and r.json()["detail"][0]["type"] == "fork_keeps_no_id"
        assert "Predict with the id on 'default'" in r.json()["detail"][0]["msg"]
    assert client.post("/models/trial/predict_proba", json={"features": x}).status_code == 200
    assert client.post("/models/trial/decide", json={"features": x, "costs": costs}).status_code == 200
    metrics = client.get("/metrics").text
    assert 'streamtree_model_pending_ids{model="trial"} 0.0' in metrics


def test_a_key_holder_replaces_an_id_a_caller_without_a_key_predicted_under(running) -> None:  # type: ignore[no-untyped-def]
    # reads open, writes keyed: a caller without a key took "order-1234" first, the key
    # holder's prediction got 409, and its label trained on the other caller's features
    key = {"Authorization": "Bearer secret-key-0123456789"}
    with running(api_keys=["secret-key-0123456789"]) as client:
        events = [{"features": {"amount": 10.0}, "label": "ok"}, {"features": {"amount": 900.0}, "label": "fraud"}]
        assert client.post("/learn", json={"events": events}, headers=key).status_code == 200
        assert client.post("/predict_proba", json={"features": {"amount": 5.0}, "id": "order-1234"}).status_code == 200
        r = client.post("/predict_proba", json={"features": {"amount": 990.0}, "id": "order-1234"}, headers=key)
        assert r.status_code == 200
        r = client.post("/predict_proba", json={"features": {"amount": 1.0}, "id": "order-1234"})
        assert r.status_code == 409  # the key holder's id is written once
        assert client.post("/learn", json={"id": "order-1234", "label": "fraud"}, headers=key).status_code == 200
        logged = client.get("/models/default/events", params={"after": 2}, headers=key).json()["events"]
        assert logged == [{"seq": 3, "features": {"amount": 990.0}, "label": "fraud"}]


def test_a_label_learned_in_stretches_takes_only_the_prediction_it_was_admitted_with(tmp_path) -> None:  # type: ignore[no-untyped-def]
    # a label in a batch of more than 1,000 events took its id after learning, the loop free in
    # between: the key holder's prediction made meanwhile under that id was removed, and its
    # own label then got 422 unknown_id
    import asyncio
    import random

    import httpx

    from app.main import create_app
    from app.settings import Settings

    key = {"Authorization": "Bearer secret-key-0123456789"}
    rng = random.Random(2)
    events = [{"features": {"a": rng.random()}, "label": rng.choice(["x", "y"])} for _ in range(3000)]

    async def main() -> None:
        app = create_app(Settings(data_dir=tmp_path, api_keys=["secret-key-0123456789"]))
        async with (
            app.router.lifespan_context(app),
            httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c,
        ):
            assert (await c.post("/learn", json={"events": events[:50]}, headers=key)).status_code == 200
            host = app.state.node.registry.get("default")
            assert (await c.post("/predict_proba", json={"features": {"a": 0.1}, "id": "order-7"})).status_code == 200
            before = host.model.n_examples
            big = asyncio.create_task(
                c.post("/learn", json={"events": [*events, {"id": "order-7", "label": "x"}]}, headers=key)
            )
            while host.model.n_examples == before:  # admitted, and learning
                await asyncio.sleep(0)
            r = await c.post("/predict_proba", json={"features": {"a": 0.9}, "id": "order-7"}, headers=key)
            assert r.status_code == 200 and (await big).status_code == 200
            r = await c.post("/learn", json={"id": "order-7", "label": "y"}, headers=key)
            assert r.status_code == 200, r.text
            logged = (await c.get("/models/default/events", params={"after": 3050}, headers=key)).json()["events"]
            assert [(e["features"], e["label"]) for e in logged] == [({"a": 0.1}, "x"), ({"a": 0.9}, "y")]

    asyncio.run(main())
