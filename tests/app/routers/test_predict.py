"""POST /predict_proba and /models/{name}/predict_proba."""

from __future__ import annotations

import pytest

from streamtree import ProbabilityTree
from tests.app.conftest import learn_all, same_predictions


def test_empty_before_any_label(client) -> None:  # type: ignore[no-untyped-def]
    assert client.post("/predict_proba", json={"features": {"a": 1}}).json() == {"probabilities": {}, "seq": 0}
    r = client.post("/models/default/predict_proba", json={"instances": [{"a": 1}, {}]})
    assert r.json() == {"probabilities": [{}, {}], "seq": 0}


def test_every_answer_carries_the_seq_it_was_computed_at(client, stream) -> None:  # type: ignore[no-untyped-def]
    seq = learn_all(client, stream[:150])
    assert client.post("/predict_proba", json={"features": stream[0][0]}).json()["seq"] == seq == 150
    assert client.post("/predict_proba", json={"features": stream[0][0], "id": "p1"}).json()["seq"] == 150
    r = client.post("/models/default/predict_proba", json={"instances": [stream[0][0]]})
    assert r.json()["seq"] == client.get("/models/default").json()["seq"] == 150


def test_min_seq_reached_answers_at_once_and_past_the_bound_is_a_503(running, stream) -> None:  # type: ignore[no-untyped-def]
    with running(min_seq_timeout_seconds=0.2) as client:
        seq = learn_all(client, stream[:100])
        for min_seq in (0, seq):
            r = client.post("/predict_proba", json={"features": stream[0][0], "min_seq": min_seq})
            assert r.status_code == 200 and r.json()["seq"] == seq
        r = client.post("/models/default/predict_proba", json={"instances": [stream[0][0]], "min_seq": seq + 1})
        assert r.status_code == 503
        assert r.json() == {
            "detail": "This instance has applied model 'default' up to seq 100, not min_seq 101, "
            "within 0.2 s; retry later, or without min_seq"
        }


def test_a_read_waiting_for_min_seq_on_a_model_deleted_meanwhile_is_a_404_at_once(tmp_path) -> None:  # type: ignore[no-untyped-def]
    # it waited the whole min_seq_timeout_seconds, then a 503 quoting the deleted model's seq
    import asyncio
    import time

    import httpx

    from app.main import create_app
    from app.settings import Settings

    async def main() -> None:
        app = create_app(Settings(data_dir=tmp_path, min_seq_timeout_seconds=30))
        async with (
            app.router.lifespan_context(app),
            httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c,
        ):
            assert (await c.put("/models/m", json={})).status_code == 201
            events = [{"features": {"a": float(i)}, "label": "yes" if i % 2 else "no"} for i in range(10)]
            assert (await c.post("/models/m/learn", json={"events": events})).status_code == 200
            started = time.monotonic()
            waiting = asyncio.create_task(
                c.post("/models/m/predict_proba", json={"features": {"a": 1.0}, "min_seq": 50})
            )
            await asyncio.sleep(0.2)
            assert (await c.delete("/models/m")).status_code == 204
            r = await waiting
            assert (r.status_code, r.json()) == (404, {"detail": "Model not found."})
            assert time.monotonic() - started < 10

    asyncio.run(main())


@pytest.mark.parametrize("bad", ["5", 1.5, True, -1, 2**63, [1]])
def test_a_bad_min_seq_is_a_422_naming_it(client, bad) -> None:  # type: ignore[no-untyped-def]
    r = client.post("/predict_proba", json={"features": {"a": 1}, "min_seq": bad})
    assert r.status_code == 422 and [e["loc"] for e in r.json()["detail"]] == [["body", "min_seq"]]


def test_single_and_batch_shapes(client, stream) -> None:  # type: ignore[no-untyped-def]
    learn_all(client, stream)
    p = client.post("/predict_proba", json={"features": stream[0][0]}).json()["probabilities"]
    assert set(p) == {"low", "mid", "high"} and abs(sum(p.values()) - 1) < 1e-12 and min(p.values()) > 0
    ps = client.post("/predict_proba", json={"instances": [x for x, _ in stream[:7]]}).json()["probabilities"]
    assert len(ps) == 7 and all(set(q) == set(p) for q in ps)
    assert ps[0] == pytest.approx(p, abs=1e-12)


def test_missing_and_new_features_are_accepted(client, stream) -> None:  # type: ignore[no-untyped-def]
    learn_all(client, stream)
    for x in ({}, {"a": None}, {"never_seen": "v"}, {"a": 1, "colour": "purple"}):
        r = client.post("/predict_proba", json={"features": x})
        assert r.status_code == 200 and len(r.json()["probabilities"]) == 3


@pytest.mark.parametrize(
    "raw, loc",
    [
        (b'{"features": {"a": NaN}}', ["body", "features", "a"]),
        (b'{"instances": [{"a": 1}, {"a": {"n": 1}}]}', ["body", "instances", 1, "a"]),
        (b'{"instances": []}', ["body", "instances"]),
        (b'{"features": {"a": 1}, "instances": [{"a": 1}]}', ["body"]),
        (b'{"instances": [{"a": 1}], "id": "x"}', ["body"]),
        (b"{}", ["body"]),
        (b'{"features": {"a": 1}, "id": true}', ["body", "id"]),
    ],
)
def test_bad_input_is_422_naming_the_field(client, raw, loc) -> None:  # type: ignore[no-untyped-def]
    r = client.post("/predict_proba", content=raw, headers={"content-type": "application/json"})
    assert r.status_code == 422, r.text
    assert r.json()["detail"][0]["loc"] == loc


def test_batch_limit(running) -> None:  # type: ignore[no-untyped-def]
    with running(max_batch=3) as client:
        r = client.post("/predict_proba", json={"instances": [{"a": 1}] * 4})
        assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "instances"]


def test_a_pending_id_is_written_once(client, stream) -> None:  # type: ignore[no-untyped-def]
    learn_all(client, stream[:50])
    x, y = stream[50]
    assert client.post("/predict_proba", json={"features": x, "id": "req-1"}).status_code == 200
    r = client.post("/predict_proba", json={"features": stream[60][0], "id": "req-1"})  # would poison the label
    assert r.status_code == 409
    assert r.json() == {
        "detail": [
            {"type": "id_pending", "loc": ["body", "id"], "msg": "This id is pending already; predict with a new id."}
        ]
    }
    assert client.post("/learn", json={"id": "req-1", "label": y}).json()["seq"] == 51
    fresh = ProbabilityTree()
    for xx, yy in stream[:51]:  # the label trained on the features first predicted
        fresh.learn_one(xx, yy)
    assert same_predictions(client, fresh)
    assert client.post("/predict_proba", json={"features": x, "id": "req-1"}).status_code == 200  # labelled: free


KEY = "k" * 16


def test_callers_without_a_key_cannot_evict_pending_ids_of_callers_with_one(running) -> None:  # type: ignore[no-untyped-def]
    auth = {"Authorization": f"Bearer {KEY}"}
    with running(api_keys=KEY, pending_max=3) as client:
        client.post("/learn", json={"features": {"a": 1.0}, "label": "y"}, headers=auth)
        for i in range(2):
            assert (
                client.post("/predict_proba", json={"features": {"a": i}, "id": f"t{i}"}, headers=auth).status_code
                == 200
            )
        codes = [
            client.post("/predict_proba", json={"features": {"a": 0}, "id": f"u{i}"}).status_code for i in range(50)
        ]  # an anonymous flood (reads are open)
        assert set(codes) == {200}  # it pushes out its own ids only
        forged = {"Authorization": "Bearer " + "x" * 16}  # a wrong key is no key
        assert client.post("/predict_proba", json={"features": {}, "id": "f"}, headers=forged).status_code == 200
        r = client.post(
            "/learn", json={"events": [{"id": "t0", "label": "y"}, {"id": "t1", "label": "y"}]}, headers=auth
        )
        assert r.status_code == 200, r.text
        assert client.post("/learn", json={"id": "u48", "label": "y"}, headers=auth).status_code == 422  # pushed out
        for i in range(3):
            assert (
                client.post("/predict_proba", json={"features": {}, "id": f"t{i + 2}"}, headers=auth).status_code == 200
            )
        r = client.post("/predict_proba", json={"features": {}, "id": "u-late"})  # full of trusted ids
        assert r.status_code == 429
        assert r.json() == {
            "detail": [
                {
                    "type": "pending_full",
                    "loc": ["body", "id"],
                    "msg": "No room for another pending id; label or let expire earlier ones.",
                }
            ]
        }


def test_pending_ids_are_bounded_in_bytes(running) -> None:  # type: ignore[no-untyped-def]
    with running(pending_max_bytes=64 * 1024) as client:
        x = {f"f{i}": "v" * 200 for i in range(100)}  # about 30 KiB charged
        for i in range(3):
            assert client.post("/predict_proba", json={"features": x, "id": i}).status_code == 200
        assert client.post("/learn", json={"id": 0, "label": "y"}).status_code == 422  # pushed out by bytes
        assert client.post("/learn", json={"id": 2, "label": "y"}).status_code == 200
