"""POST /learn and /models/{name}/learn: numbering, delayed labels, bad input loses nothing."""

from __future__ import annotations

import time
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamtree import ProbabilityTree
from tests.app.conftest import learn_all, make_stream, same_predictions


def state(client: Any, name: str = "default") -> tuple[int, int, Any]:
    """(seq, n_examples, predictions on fixed probes): what must not change after a refusal."""
    info = client.get(f"/models/{name}").json()
    probes = [x for x, _ in make_stream(10, seed=42)]
    proba = client.post(f"/models/{name}/predict_proba", json={"instances": probes}).json()
    return info["seq"], info["summary"]["n_examples"], proba


def test_single_and_batch_are_numbered_in_order(client, stream) -> None:  # type: ignore[no-untyped-def]
    x, y = stream[0]
    assert client.post("/learn", json={"features": x, "label": y}).json() == {"learned": 1, "seq": 1}
    body = {"events": [{"features": x, "label": y} for x, y in stream[1:4]]}
    assert client.post("/learn", json=body).json() == {"learned": 3, "seq": 4}
    assert client.post("/models/default/learn", json={"features": x, "label": y}).json() == {"learned": 1, "seq": 5}
    assert client.get("/models/default").json()["summary"]["n_examples"] == 5


def test_model_equals_fresh_model_fed_the_same_events(client, stream) -> None:  # type: ignore[no-untyped-def]
    for x, y in stream[:20]:
        client.post("/learn", json={"features": x, "label": y})
    learn_all(client, stream[20:])
    fresh = ProbabilityTree()
    for x, y in stream:
        fresh.learn_one(x, y)
    assert same_predictions(client, fresh)
    fresh.predict_proba_one(stream[0][0])  # tree_ shows lazily computed values once a prediction was made
    assert client.get("/models/default/tree").json() == fresh.tree_


def test_delayed_label_learns_the_predicted_features(client, stream) -> None:  # type: ignore[no-untyped-def]
    learn_all(client, stream[:50])
    x, y = stream[50]
    client.post("/predict_proba", json={"features": x, "id": "req-1"})
    client.post("/predict_proba", json={"features": stream[51][0], "id": 17})
    r = client.post("/learn", json={"events": [{"id": "req-1", "label": y}, {"id": 17, "label": stream[51][1]}]})
    assert r.json() == {"learned": 2, "seq": 52}
    fresh = ProbabilityTree()
    for xx, yy in stream[:52]:
        fresh.learn_one(xx, yy)
    assert same_predictions(client, fresh)
    r = client.post("/learn", json={"id": "req-1", "label": y})  # already used
    assert r.status_code == 422
    assert r.json()["detail"][0]["loc"] == ["body", "id"]
    assert r.json()["detail"][0]["type"] == "unknown_id"


def test_an_event_with_features_and_an_id_learns_its_own_features_and_uses_up_the_id(client, stream) -> None:  # type: ignore[no-untyped-def]
    learn_all(client, stream[:20])
    client.post("/predict_proba", json={"features": stream[20][0], "id": "req-2"})
    sent, y = stream[21]
    assert client.post("/learn", json={"features": sent, "label": y, "id": "req-2"}).json() == {"learned": 1, "seq": 21}
    logged = client.get("/models/default/events", params={"limit": 1000}).json()["events"][-1]
    assert (logged["seq"], logged["features"], logged["label"]) == (21, sent, y)
    r = client.post("/learn", json={"id": "req-2", "label": y})
    assert r.status_code == 422 and r.json()["detail"][0]["type"] == "unknown_id"


def test_delayed_label_ids_expire_by_time_and_count(running, stream) -> None:  # type: ignore[no-untyped-def]
    with running(pending_ttl_seconds=0.2, pending_max=2) as client:
        for i in range(3):
            client.post("/predict_proba", json={"features": stream[i][0], "id": f"p{i}"})
        assert client.post("/learn", json={"id": "p0", "label": "low"}).status_code == 422  # evicted by count
        assert client.post("/learn", json={"id": "p1", "label": "low"}).status_code == 200
        time.sleep(0.3)
        r = client.post("/learn", json={"id": "p2", "label": "low"})  # expired
        assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "id"]


BAD_BODIES = [
    (b'{"features": {"a": NaN}, "label": "x"}', ["body", "features", "a"]),
    (b'{"features": {"a": Infinity}, "label": "x"}', ["body", "features", "a"]),
    (b'{"features": {"a": -Infinity}, "label": "x"}', ["body", "features", "a"]),
    (b'{"features": {"a": {"b": 1}}, "label": "x"}', ["body", "features", "a"]),
    (b'{"features": {"a": [1, 2]}, "label": "x"}', ["body", "features", "a"]),
    (b'{"features": {"a": 1e400}, "label": "x"}', ["body", "features", "a"]),
    (b'{"features": {"a": 100000000000000000000}, "label": "x"}', ["body", "features", "a"]),
    (b'{"features": {"a": 1}, "label": 1.5}', ["body", "label"]),
    (b'{"features": {"a": 1}, "label": null}', ["body"]),
    (b'{"features": {"a": 1}, "label": {"x": 1}}', ["body", "label"]),
    (b'{"features": {"a": 1}, "label": "x", "id": 1.5}', ["body", "id"]),
    (b'{"features": {"a": 1}}', ["body"]),
    (b'{"label": "x"}', ["body"]),
    (b'{"features": {"a": 1}, "label": "x", "extra": 1}', ["body", "extra"]),
    (b'{"events": []}', ["body", "events"]),
    (b'{"events": [{"features": {"a": 1}, "label": "x"}], "label": "x"}', ["body"]),
    (
        b'{"events": [{"features": {"a": 1}, "label": "x"}, {"features": {"a": NaN}, "label": "x"}]}',
        ["body", "events", 1, "features", "a"],
    ),
    (b'{"events": [{"label": "x"}]}', ["body", "events", 0]),
    # a batch's events are checked by hand (pydantic skips them), naming the same fields
    (b'{"events": [{"features": {"a": 1}, "label": "x"}, [1]]}', ["body", "events", 1]),
    (b'{"events": [{"features": {"a": 1}, "label": "x"}, "x"]}', ["body", "events", 1]),
    (b'{"events": [{"features": {"a": 1}, "label": "x", "extra": 1}]}', ["body", "events", 0, "extra"]),
    (b'{"events": [{"features": {"a": 1}}]}', ["body", "events", 0, "label"]),
    (b'{"events": [{"features": [1, 2], "label": "x"}]}', ["body", "events", 0, "features"]),
    (b'{"events": [{"features": {"a": 1}, "label": null}]}', ["body", "events", 0, "label"]),
    (b'{"events": [{"features": {"a": 1}, "label": "x", "id": 1.5}]}', ["body", "events", 0, "id"]),
    (b'{"events": {"a": 1}}', ["body", "events"]),
    (b"[1, 2]", ["body"]),
    (b'{"features": ', ["body", 13]),  # JSON decode error at character 13
]


@pytest.mark.parametrize("raw, loc", BAD_BODIES, ids=[b.decode()[:40] for b, _ in BAD_BODIES])
def test_bad_input_is_422_naming_the_field_and_loses_nothing(client, stream, raw, loc) -> None:  # type: ignore[no-untyped-def]
    learn_all(client, stream[:60])
    before = state(client)
    r = client.post("/learn", content=raw, headers={"content-type": "application/json"})
    assert r.status_code == 422, r.text
    assert r.json()["detail"][0]["loc"][: len(loc)] == loc
    assert state(client) == before


@pytest.mark.parametrize(
    "limit, body, loc",
    [
        ({"max_string_length": 8}, {"features": {"a": "x" * 9}, "label": "l"}, ["body", "features", "a"]),
        ({"max_string_length": 8}, {"features": {"a" * 9: 1}, "label": "l"}, ["body", "features", "aaaaaaaaa"]),
        ({"max_string_length": 8}, {"features": {"a": 1}, "label": "l" * 9}, ["body", "label"]),
        ({"max_string_length": 8}, {"features": {"a": 1}, "label": "l", "id": "i" * 9}, ["body", "id"]),
        ({"max_features": 3}, {"features": {"a": 1, "b": 2, "c": 3, "d": 4}, "label": "l"}, ["body", "features"]),
        ({"max_batch": 2}, {"events": [{"features": {"a": 1}, "label": "l"}] * 3}, ["body", "events"]),
    ],
)
def test_limits_are_422_naming_the_field(running, limit, body, loc) -> None:  # type: ignore[no-untyped-def]
    with running(**limit) as client:
        client.post("/learn", json={"features": {"a": 0}, "label": "l"})
        r = client.post("/learn", json=body)
        assert r.status_code == 422, r.text
        assert r.json()["detail"][0]["loc"] == loc
        assert client.get("/models/default").json()["seq"] == 1


def test_label_limit_and_label_type(running, stream) -> None:  # type: ignore[no-untyped-def]
    with running(max_labels=2) as client:
        two = [{"features": {"a": 1}, "label": "p"}, {"features": {"a": 2}, "label": "q"}]
        client.post("/learn", json={"events": two})
        r = client.post("/learn", json={"events": [two[0], {"features": {"a": 3}, "label": "r"}]})
        assert r.status_code == 422
        err = r.json()["detail"][0]
        assert err["loc"] == ["body", "events", 1, "label"] and err["type"] == "too_many_labels"
        r = client.post("/learn", json={"features": {"a": 1}, "label": 1})
        assert r.status_code == 422 and r.json()["detail"][0]["type"] == "label_type"
        assert client.get("/models/default").json()["seq"] == 2


def test_library_refusal_mid_batch_rolls_back_the_request(client, stream) -> None:  # type: ignore[no-untyped-def]
    learn_all(client, stream[:60])  # "a" is numeric in this model
    before = state(client)
    x, y = stream[60]
    body = {"events": [{"features": x, "label": y}, {"features": {"a": "text"}, "label": "low"}]}
    r = client.post("/learn", json=body)
    assert r.status_code == 422
    assert r.json()["detail"][0]["loc"] == ["body", "events", 1, "features", "a"]
    assert state(client) == before
    assert client.post("/learn", json={"features": x, "label": y}).json() == {"learned": 1, "seq": 61}


def test_boolean_and_integer_labels(client) -> None:  # type: ignore[no-untyped-def]
    client.put("/models/b", json={})
    client.post("/models/b/learn", json={"events": [{"features": {"a": i}, "label": i % 2 == 0} for i in range(10)]})
    p = client.post("/models/b/predict_proba", json={"features": {"a": 1}}).json()["probabilities"]
    assert set(p) == {"true", "false"} and abs(sum(p.values()) - 1) < 1e-12
    client.put("/models/i", json={})
    client.post("/models/i/learn", json={"events": [{"features": {"a": i}, "label": i % 3} for i in range(10)]})
    p = client.post("/models/i/predict_proba", json={"features": {"a": 1}}).json()["probabilities"]
    assert set(p) == {"0", "1", "2"}


def test_max_features_refuses_events_that_would_pass_it_naming_the_limit(client) -> None:  # type: ignore[no-untyped-def]
    assert client.get("/models/default").json()["config"]["max_features"] == 10_000
    client.put("/models/m", json={"max_features": 5})
    learn_all(client, make_stream(50), "/models/m/learn")  # 5 features: a, b, c, colour, flag
    before = state(client, "m")
    for body, loc in [
        ({"features": {"a": 1.0, "new": 1.0}, "label": "low"}, ["body", "features"]),
        (
            {"events": [{"features": {"a": 1.0}, "label": "low"}, {"features": {"zz": "q"}, "label": "low"}]},
            ["body", "events", 1, "features"],
        ),
    ]:
        r = client.post("/models/m/learn", json=body)
        assert r.status_code == 422, r.text
        err = r.json()["detail"][0]
        assert err["loc"] == loc and "max_features=5" in err["msg"]
        assert state(client, "m") == before
    assert client.post("/models/m/learn", json={"features": {"a": 1.0}, "label": "low"}).json()["seq"] == 51


def test_thirty_thousand_new_feature_names_are_refused_by_the_default_limit(client) -> None:  # type: ignore[no-untyped-def]
    names = [f"n{i}" for i in range(30_000)]
    before = state(client)
    r = client.post(
        "/learn",
        json={
            "events": [
                {"features": {k: 1.0 for k in names[i : i + 1000]}, "label": "y"} for i in range(0, 30_000, 1000)
            ]
        },
    )
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "events", 10, "features"]
    assert "max_features=10000" in r.json()["detail"][0]["msg"]
    assert state(client) == before


def test_a_batch_naming_one_id_twice_is_refused(client, stream) -> None:  # type: ignore[no-untyped-def]
    learn_all(client, stream[:50])
    client.post("/predict_proba", json={"features": stream[50][0], "id": "p"})
    before = state(client)
    r = client.post(
        "/learn",
        json={
            "events": [{"id": "p", "label": "low"}, {"features": {"a": 1}, "label": "low"}, {"id": "p", "label": "low"}]
        },
    )
    assert r.status_code == 422
    assert r.json()["detail"] == [
        {
            "type": "duplicate_id",
            "loc": ["body", "events", 2, "id"],
            "msg": "This id is also at events[0]; a batch names each id at most once",
        }
    ]
    assert state(client) == before
    assert (
        client.post(
            "/learn", json={"events": [{"id": "p", "label": "low"}, {"id": "p2", "label": "low", "features": {"a": 1}}]}
        ).json()["seq"]
        == 52
    )


OPS = st.lists(
    st.one_of(
        st.tuples(st.just("predict"), st.integers(0, 4), st.integers(0, 49)),  # (op, id, which features)
        st.tuples(
            st.just("label"), st.lists(st.integers(0, 4), min_size=1, max_size=3), st.sampled_from(["low", "mid"])
        ),
    ),
    min_size=1,
    max_size=12,
)


def test_delayed_label_rules_hold_for_any_sequence_of_predictions_and_labels(running) -> None:  # type: ignore[no-untyped-def]
    """Ids are written once, a batch names each once and only pending ones, and the model is
    always a fresh model fed exactly the accepted events in order."""
    xs = [x for x, _ in make_stream(50, seed=8)]
    with running() as client:
        counter = iter(range(10**6))

        @given(ops=OPS)
        @settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
        def run(ops: list[Any]) -> None:
            name = f"h{next(counter)}"
            assert client.put(f"/models/{name}", json={"grace_period": 5}).status_code == 201
            pending: dict[int, dict[str, Any]] = {}
            learned: list[tuple[dict[str, Any], str]] = []
            for op in ops:
                if op[0] == "predict":
                    _, k, i = op
                    r = client.post(f"/models/{name}/predict_proba", json={"features": xs[i], "id": k})
                    assert r.status_code == (409 if k in pending else 200), r.text
                    pending.setdefault(k, xs[i])
                    continue
                _, ids, y = op
                r = client.post(f"/models/{name}/learn", json={"events": [{"id": k, "label": y} for k in ids]})
                if len(set(ids)) < len(ids) or any(k not in pending for k in ids):
                    assert r.status_code == 422, r.text
                    continue
                assert r.json() == {"learned": len(ids), "seq": len(learned) + len(ids)}
                learned += [(pending.pop(k), y) for k in ids]
            fresh = ProbabilityTree(grace_period=5)
            for x, y in learned:
                fresh.learn_one(x, y)
            assert client.get(f"/models/{name}").json()["seq"] == len(learned)
            if learned:
                assert same_predictions(client, fresh, name, n=5)
            assert client.delete(f"/models/{name}").status_code == 204

        run()


@pytest.fixture(params=["sqlite", "postgresql"])
def engine(request: pytest.FixtureRequest) -> dict[str, Any]:
    """Settings selecting the engine: the SQLite default, or a fresh PostgreSQL database."""
    return {} if request.param == "sqlite" else {"database_url": request.getfixturevalue("pg_url")}


def test_a_retry_with_an_idempotency_key_gets_the_first_answer_and_learns_nothing(running, engine) -> None:  # type: ignore[no-untyped-def]
    stream = make_stream(40, seed=5)
    with running(**engine) as client:
        learn_all(client, stream[:20])
        body = {"events": [{"features": x, "label": y} for x, y in stream[20:30]]}
        key = {"Idempotency-Key": "order-42/retry:ok"}
        first = client.post("/learn", json=body, headers=key)
        assert first.json() == {"learned": 10, "seq": 30}
        before = state(client)
        for _ in range(2):
            again = client.post("/learn", json=body, headers=key)
            assert again.status_code == 200 and again.json() == {"learned": 10, "seq": 30}
        assert client.post("/models/default/learn", json=body, headers=key).json() == {"learned": 10, "seq": 30}
        assert state(client) == before
        assert client.get("/models/default/events", params={"after": 30}).json() == {"events": []}
        assert client.put("/models/other", json={}).status_code in (200, 201)  # keys are per model:
        assert client.post("/models/other/learn", json=body, headers=key).json() == {"learned": 10, "seq": 10}
        x, y = stream[30]  # without a key, learned as ever
        assert client.post("/learn", json={"features": x, "label": y}).json() == {"learned": 1, "seq": 31}


def test_an_idempotency_key_with_another_body_is_422_and_learns_nothing(client, stream) -> None:  # type: ignore[no-untyped-def]
    learn_all(client, stream[:20])
    key = {"Idempotency-Key": "k-1"}
    x, y = stream[20]
    assert client.post("/learn", json={"features": x, "label": y}, headers=key).json() == {"learned": 1, "seq": 21}
    before = state(client)
    for body in (
        {"features": stream[21][0], "label": stream[21][1]},
        {"events": [{"features": x, "label": y}]},
    ):  # the same event, as a batch: another body
        r = client.post("/learn", json=body, headers=key)
        assert r.status_code == 422
        assert r.json()["detail"] == [
            {
                "type": "idempotency_key_reused",
                "loc": ["header", "Idempotency-Key"],
                "msg": r.json()["detail"][0]["msg"],
            }
        ]
        assert "Idempotency-Key" in r.json()["detail"][0]["msg"]
    assert state(client) == before


@pytest.mark.parametrize("header", ["Idempotency-Key", "Idempotency-After"])
def test_a_header_sent_twice_is_422_naming_it_and_learns_nothing(client, stream, header) -> None:  # type: ignore[no-untyped-def]
    # which one is the key? (the first was used, silently)
    learn_all(client, stream[:20])
    before = state(client)
    headers = [("Idempotency-Key", "k1")] if header == "Idempotency-After" else []
    headers += [(header, "d1"), (header, "d2")]
    for path in ("/learn", "/models/default/learn"):
        r = client.post(path, json={"features": stream[20][0], "label": stream[20][1]}, headers=headers)
        assert r.status_code == 422, r.text
        assert r.json()["detail"][0]["loc"] == ["header", header] and "once" in r.json()["detail"][0]["msg"]
    assert state(client) == before


@pytest.mark.parametrize("key", [b"", b"k" * 256, b"caf\xc3\xa9", b"tab\there", b"\x7f"])
def test_a_malformed_idempotency_key_is_422_and_learns_nothing(client, stream, key) -> None:  # type: ignore[no-untyped-def]
    learn_all(client, stream[:20])
    before = state(client)
    r = client.post(
        "/learn", json={"features": stream[20][0], "label": stream[20][1]}, headers={"Idempotency-Key": key}
    )
    assert r.status_code == 422
    assert r.json()["detail"][0]["loc"] == ["header", "Idempotency-Key"]
    assert r.json()["detail"][0]["type"] == "idempotency_key"
    assert state(client) == before
    ok = client.post(
        "/learn", json={"features": stream[20][0], "label": stream[20][1]}, headers={"Idempotency-Key": "k" * 255}
    )
    assert ok.json() == {"learned": 1, "seq": 21}


def test_an_idempotency_key_is_kept_for_the_window_only(running, stream) -> None:  # type: ignore[no-untyped-def]
    with running(idempotency_window_seconds=0.2) as client:
        body = {"features": stream[0][0], "label": stream[0][1]}
        key = {"Idempotency-Key": "short-lived"}
        assert client.post("/learn", json=body, headers=key).json() == {"learned": 1, "seq": 1}
        assert client.post("/learn", json=body, headers=key).json() == {"learned": 1, "seq": 1}
        time.sleep(0.3)
        assert client.post("/learn", json=body, headers=key).json() == {"learned": 1, "seq": 2}


def test_an_idempotency_key_survives_a_restart(running, stream) -> None:  # type: ignore[no-untyped-def]
    body = {"events": [{"features": x, "label": y} for x, y in stream[:5]]}
    key = {"Idempotency-Key": "before-restart"}
    with running() as client:
        assert client.post("/learn", json=body, headers=key).json() == {"learned": 5, "seq": 5}
    with running() as client:
        assert client.post("/learn", json=body, headers=key).json() == {"learned": 5, "seq": 5}
        assert client.get("/models/default").json()["seq"] == 5
        other = {"events": body["events"][:4]}
        assert client.post("/learn", json=other, headers=key).status_code == 422
