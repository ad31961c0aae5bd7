"""Ids in batches: ``{"instances": [{"features": {...}, "id": ...}, ...]}`` on /predict_proba and
/decide, and the labels of many ids in one /learn batch, with the rules of single ids."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from streamtree import ProbabilityTree
from tests.app.conftest import learn_all, make_stream, same_predictions

TAKEN = "This id is pending already; predict with a new id."
FULL = "No room for another pending id; label or let expire earlier ones."
COSTS = {"act": {"low": 1, "mid": 0, "high": 5}, "wait": {"low": 0, "mid": 2, "high": 1}}
KEY = "k" * 16
AUTH = {"Authorization": f"Bearer {KEY}"}


def wrapped(xs: list[dict[str, Any]], ids: list[Any]) -> list[dict[str, Any]]:
    return [{"features": x, "id": i} for x, i in zip(xs, ids, strict=True)]


def refusal(r: Any) -> tuple[int, list[Any], str]:
    """``(status, loc, msg)`` of an answer naming one field."""
    [error] = r.json()["detail"]
    return r.status_code, error["loc"], error["msg"]


def labelled(client: Any, ids: list[Any]) -> list[int]:
    """The status of labelling each id alone (200: it was pending; 422: it was not)."""
    return [client.post("/learn", json={"id": i, "label": "mid"}).status_code for i in ids]


@pytest.mark.parametrize("path", ["/predict_proba", "/models/default/predict_proba"])
def test_a_batch_mixes_plain_and_id_instances_and_answers_as_without_ids(client, stream, path) -> None:  # type: ignore[no-untyped-def]
    learn_all(client, stream[:200])
    xs = [x for x, _ in stream[200:206]]
    plain = client.post(path, json={"instances": xs}).json()
    mixed = [
        xs[0],
        {"features": xs[1], "id": "b-1"},
        xs[2],
        {"features": xs[3], "id": 4},
        {"features": xs[4], "id": None},
        xs[5],
    ]
    r = client.post(path, json={"instances": mixed})
    assert r.status_code == 200, r.text
    assert r.json() == plain  # the same probabilities, bit for bit, and the same seq
    assert labelled(client, ["b-1", 4]) == [200, 200]  # each id kept, null is no id


def test_one_learn_batch_labels_many_ids_mixed_with_whole_events(client, stream) -> None:  # type: ignore[no-untyped-def]
    learn_all(client, stream[:100])
    xs = [x for x, _ in stream[100:110]]
    ids = [f"b-{i}" for i in range(10)]
    assert client.post("/predict_proba", json={"instances": wrapped(xs, ids)}).status_code == 200
    events: list[dict[str, Any]] = []
    for i in range(10):  # the labels in another order, each followed by a whole event
        j = (3 * i) % 10
        events.append({"id": ids[j], "label": stream[100 + j][1]})
        events.append({"features": stream[200 + i][0], "label": stream[200 + i][1]})
    r = client.post("/learn", json={"events": events})
    assert r.json() == {"learned": 20, "seq": 120}
    logged = client.get("/models/default/events?after=100").json()["events"]
    assert [(e["features"], e["label"]) for e in logged] == [
        (e["features"], e["label"]) if "features" in e else (xs[ids.index(e["id"])], e["label"]) for e in events
    ]
    fresh = ProbabilityTree()
    for x, y in stream[:100]:
        fresh.learn_one(x, y)
    for e in logged:
        fresh.learn_one(e["features"], e["label"])
    assert same_predictions(client, fresh)
    assert labelled(client, ids[:2]) == [422, 422]  # labelled: no longer pending


def test_an_id_pending_already_is_a_409_naming_it_and_no_id_of_the_batch_is_kept(client, stream) -> None:  # type: ignore[no-untyped-def]
    learn_all(client, stream[:100])
    xs = [x for x, _ in stream[100:105]]
    assert client.post("/predict_proba", json={"features": xs[0], "id": "old"}).status_code == 200
    body = {
        "instances": [
            xs[1],
            {"features": xs[2], "id": "n-1"},
            {"features": xs[3], "id": "old"},
            {"features": xs[4], "id": "n-2"},
        ]
    }
    r = client.post("/predict_proba", json=body)
    assert refusal(r) == (409, ["body", "instances", 2, "id"], TAKEN)
    assert r.json()["detail"][0]["type"] == "id_pending"
    assert labelled(client, ["n-1", "n-2"]) == [422, 422]  # all or nothing
    learned = client.get("/models/default/events?after=100").json()["events"]
    assert learned == [] and labelled(client, ["old"]) == [200]  # its first features are kept
    assert client.get("/models/default/events?after=100").json()["events"][0]["features"] == xs[0]


def test_the_same_id_twice_in_a_batch_is_a_422_naming_the_second(client) -> None:  # type: ignore[no-untyped-def]
    body = {
        "instances": [
            {"features": {"a": 1}, "id": "x"},
            {"a": 2},
            {"features": {"a": 3}, "id": 7},
            {"features": {}, "id": "x"},
        ]
    }
    r = client.post("/predict_proba", json=body)
    assert r.status_code == 422
    assert r.json()["detail"] == [
        {
            "type": "duplicate_id",
            "loc": ["body", "instances", 3, "id"],
            "msg": "This id is also at instances[0]; a batch names each id at most once",
        }
    ]
    client.post("/learn", json={"features": {"a": 1}, "label": "y"})
    assert labelled(client, ["x", 7]) == [422, 422]  # nothing kept


WRAPPED = 'an instance with an id is {"features": {...}, "id": ...}'


@pytest.mark.parametrize(
    "instance, loc, msg",
    [
        # the case: once refused as a nested feature value, now an extra key is named
        ({"features": {"a": 1}, "id": "b-1", "label": "y"}, ["label"], "Extra inputs are not permitted: " + WRAPPED),
        ({"features": {"a": 1}, "ids": "b-1"}, ["ids"], "Extra inputs are not permitted: " + WRAPPED),
        (
            {"features": {"a": 1}},
            ["id"],
            "Field required: " + WRAPPED + " (without an id, send the features object itself)",
        ),
        (
            {"features": [1, 2], "id": "b-1"},
            ["features"],
            "The features of " + WRAPPED + " are an object of feature name to value",
        ),
        (
            {"features": "a", "id": "b-1"},
            ["features"],
            "The features of " + WRAPPED + " are an object of feature name to value",
        ),
        ({"features": {"a": 1}, "id": True}, ["id"], "An id must be a string or an integer"),
        ({"features": {"a": 1}, "id": 1.5}, ["id"], "An id must be a string or an integer"),
        ({"features": {"a": 1}, "id": {"n": 1}}, ["id"], "An id must be a string or an integer"),
        ({"features": {"a": 1}, "id": 2**63}, ["id"], "Integers must fit in 64 bits"),
        ({"features": {"a": 1}, "id": "x" * 300}, ["id"], "String should have at most 256 characters"),
        (
            {"features": {"a": {"n": 1}}, "id": "b-1"},
            ["features", "a"],
            "Feature values must be a number, string, boolean or null (no nested objects or arrays)",
        ),
        ({"features": {"a": 1}, "id": "b", "x": {"n": 1}}, ["x"], "Extra inputs are not permitted: " + WRAPPED),
        ("a", [], "An instance is an object of features, or " + WRAPPED),
        ([{"a": 1}], [], "An instance is an object of features, or " + WRAPPED),
    ],
)
@pytest.mark.parametrize("path", ["/predict_proba", "/decide"])
def test_a_bad_instance_is_a_422_naming_the_field_and_saying_what_is_expected(client, path, instance, loc, msg) -> None:  # type: ignore[no-untyped-def]
    client.post("/learn", json={"features": {"a": 1}, "label": "mid"})
    body: dict[str, Any] = {"instances": [{"a": 1}, {"features": {"a": 2}, "id": "ok"}, {"a": 3}, instance]}
    if path == "/decide":
        body["costs"] = {"act": {"mid": 1}, "wait": {"mid": 0}}
    r = client.post(path, json=body)
    assert r.status_code == 422, r.text
    assert [(e["loc"], e["msg"]) for e in r.json()["detail"]] == [(["body", "instances", 3, *loc], msg)]
    assert labelled(client, ["ok"]) == [422]  # the batch's good id was not kept


def test_an_id_with_a_single_features_object_still_points_to_the_instances(client) -> None:  # type: ignore[no-untyped-def]
    r = client.post("/predict_proba", json={"instances": [{"a": 1}], "id": "x"})
    assert refusal(r)[0:2] == (422, ["body"])
    assert 'give each instance its own id: {"features": {...}, "id": ...}' in refusal(r)[2]


def test_plain_instances_whose_features_are_not_an_object_stay_plain(client) -> None:  # type: ignore[no-untyped-def]
    # a feature value is never an object: features named "features" and "id" are plain features
    client.post("/learn", json={"features": {"features": 1.0}, "label": "y"})
    for x in ({"features": 1.0}, {"features": 2.0, "id": 3, "b": 1}, {"id": "x"}, {"features": None, "c": 2}):
        r = client.post("/predict_proba", json={"instances": [x]})
        assert r.status_code == 200 and r.json()["probabilities"] == [{"y": 1.0}], (x, r.text)
    assert labelled(client, ["x", 3]) == [422, 422]  # none of them was an id


def test_a_batch_that_does_not_fit_is_a_429_naming_the_first_id_past_the_room_and_keeps_none(running) -> None:  # type: ignore[no-untyped-def]
    with running(pending_max=3) as client:
        client.post("/learn", json={"features": {"a": 1}, "label": "mid"})
        r = client.post(
            "/predict_proba", json={"instances": wrapped([{"a": i} for i in range(4)], ["a", "b", "c", "d"])}
        )
        assert refusal(r) == (429, ["body", "instances", 3, "id"], FULL)
        assert r.json()["detail"][0]["type"] == "pending_full"
        assert labelled(client, ["a", "b", "c"]) == [422] * 3
        # a batch that fits pushes out the oldest ids (every caller is trusted without keys)
        assert client.post("/predict_proba", json={"features": {"a": 9}, "id": "old"}).status_code == 200
        r = client.post(
            "/predict_proba", json={"instances": [{"a": 0}, *wrapped([{"a": 1}, {"a": 2}, {"a": 3}], ["x", "y", "z"])]}
        )
        assert r.status_code == 200
        assert labelled(client, ["old", "x", "y", "z"]) == [422, 200, 200, 200]


def test_pending_bytes_bound_a_batch_as_they_bound_single_ids(running) -> None:  # type: ignore[no-untyped-def]
    with running(pending_max_bytes=64 * 1024) as client:
        client.post("/learn", json={"features": {"a": 1}, "label": "mid"})
        x = {f"f{i}": "v" * 100 for i in range(100)}  # about 23 KiB charged: two fit in 64 KiB
        r = client.post("/predict_proba", json={"instances": wrapped([x, x, x], [0, 1, 2])})
        assert refusal(r) == (429, ["body", "instances", 2, "id"], FULL)
        assert client.post("/predict_proba", json={"instances": wrapped([x, x], [0, 1])}).status_code == 200
        assert client.post("/predict_proba", json={"instances": [{"a": 2}, *wrapped([x], [2])]}).status_code == 200
        assert labelled(client, [0, 1, 2]) == [422, 200, 200]  # the oldest pushed out by bytes


def test_a_batch_without_a_key_never_pushes_out_ids_sent_with_one(running) -> None:  # type: ignore[no-untyped-def]
    with running(api_keys=KEY, pending_max=4) as client:
        client.post("/learn", json={"features": {"a": 1.0}, "label": "y"}, headers=AUTH)
        r = client.post("/predict_proba", json={"instances": wrapped([{}, {}], ["t0", "t1"])}, headers=AUTH)
        assert r.status_code == 200
        r = client.post("/predict_proba", json={"instances": wrapped([{}, {}], ["u0", "u1"])})  # no key: fits
        assert r.status_code == 200
        r = client.post("/predict_proba", json={"instances": wrapped([{}, {}, {}], ["u2", "u3", "u4"])})
        assert refusal(r) == (429, ["body", "instances", 2, "id"], FULL)  # only two untrusted ids to push out
        r = client.post("/predict_proba", json={"instances": wrapped([{}, {}], ["u2", "u3"])})
        assert r.status_code == 200  # pushes out u0 and u1, its own kind
        r = client.post(
            "/learn", json={"events": [{"id": i, "label": "y"} for i in ("t0", "t1", "u2", "u3")]}, headers=AUTH
        )
        assert r.json()["learned"] == 4
        assert client.post("/learn", json={"id": "u0", "label": "y"}, headers=AUTH).status_code == 422
        r = client.post("/predict_proba", json={"instances": wrapped([{}] * 4, ["t2", "t3", "t4", "t5"])}, headers=AUTH)
        assert r.status_code == 200
        r = client.post("/decide", json={"instances": wrapped([{}], ["u5"]), "costs": {"a": {"y": 1}}})
        assert refusal(r) == (429, ["body", "instances", 0, "id"], FULL)  # full of trusted ids


def test_an_id_of_a_batch_expires_as_a_single_id_does(running) -> None:  # type: ignore[no-untyped-def]
    with running(pending_ttl_seconds=0.3) as client:
        client.post("/learn", json={"features": {"a": 1}, "label": "mid"})
        assert (
            client.post("/predict_proba", json={"instances": wrapped([{"a": 1}, {"a": 2}], ["e-1", "e-2"])}).status_code
            == 200
        )
        assert labelled(client, ["e-1"]) == [200]
        time.sleep(0.5)  # past the time to live
        r = client.post("/learn", json={"events": [{"id": "e-2", "label": "mid"}]})
        assert refusal(r) == (
            422,
            ["body", "events", 0, "id"],
            "No pending prediction has this id (unknown or expired)",
        )
        # expired: free to use again
        assert client.post("/predict_proba", json={"instances": wrapped([{"a": 3}], ["e-2"])}).status_code == 200


@pytest.mark.parametrize("path", ["/decide", "/models/default/decide"])
def test_decide_batches_take_ids_with_the_same_rules(client, stream, path) -> None:  # type: ignore[no-untyped-def]
    learn_all(client, stream[:100])
    xs = [x for x, _ in stream[100:104]]
    plain = client.post(path, json={"instances": xs, "costs": COSTS}).json()
    r = client.post(path, json={"instances": [xs[0], *wrapped(xs[1:], ["d-1", "d-2", "d-3"])], "costs": COSTS})
    assert r.json() == plain
    r = client.post(path, json={"instances": wrapped(xs[:2], ["d-4", "d-2"]), "costs": COSTS})
    assert refusal(r) == (409, ["body", "instances", 1, "id"], TAKEN)
    r = client.post(path, json={"features": xs[0], "id": "d-3", "costs": COSTS})
    assert refusal(r) == (409, ["body", "id"], TAKEN)
    r = client.post("/learn", json={"events": [{"id": f"d-{i}", "label": stream[100 + i][1]} for i in (3, 1, 2)]})
    assert r.json() == {"learned": 3, "seq": 103}
    assert labelled(client, ["d-4"]) == [422]  # refused with the batch


def test_a_decide_batch_before_any_label_keeps_no_id(client) -> None:  # type: ignore[no-untyped-def]
    r = client.post("/decide", json={"instances": wrapped([{"a": 1}], ["n-1"]), "costs": COSTS})
    assert r.status_code == 409 and r.json()["detail"].startswith("The model has learned no label yet")
    client.post("/learn", json={"features": {"a": 1}, "label": "mid"})
    assert labelled(client, ["n-1"]) == [422]


def test_an_unknown_id_in_a_labels_batch_is_refused_and_nothing_of_the_request_is_learned(client, stream) -> None:  # type: ignore[no-untyped-def]
    seq = learn_all(client, stream[:100])
    xs = [x for x, _ in stream[100:103]]
    client.post("/predict_proba", json={"instances": wrapped(xs, ["k-0", "k-1", "k-2"])})
    events = [
        {"id": "k-0", "label": "mid"},
        {"features": xs[0], "label": "low"},
        {"id": "k-1", "label": "mid"},
        {"id": "never", "label": "mid"},
        {"id": "k-2", "label": "mid"},
    ]
    r = client.post("/learn", json={"events": events})
    assert refusal(r) == (422, ["body", "events", 3, "id"], "No pending prediction has this id (unknown or expired)")
    assert client.get("/models/default").json()["seq"] == seq  # nothing learned
    r = client.post("/learn", json={"events": [e for e in events if e.get("id") != "never"]})
    assert r.json() == {"learned": 4, "seq": seq + 4}  # the ids are still pending


def test_a_retried_labels_batch_with_its_idempotency_key_learns_nothing_twice(client, stream) -> None:  # type: ignore[no-untyped-def]
    learn_all(client, stream[:100])
    xs = [x for x, _ in stream[100:105]]
    client.post("/predict_proba", json={"instances": wrapped(xs, [f"r-{i}" for i in range(5)])})
    body = {
        "events": [{"id": f"r-{i}", "label": stream[100 + i][1]} for i in range(5)]
        + [{"features": xs[0], "label": "low"}]
    }
    headers = {"Idempotency-Key": "labels-1"}
    first = client.post("/learn", json=body, headers=headers)
    assert first.json() == {"learned": 6, "seq": 106}
    for _ in range(2):  # the answer was lost: the retry gets the first answer, the ids are labelled once
        again = client.post("/learn", json=body, headers=headers)
        assert again.status_code == 200 and again.json() == first.json()
    assert client.get("/models/default").json()["seq"] == 106
    assert len(client.get("/models/default/events?after=100").json()["events"]) == 6
    # without the key the same body is a new request: its ids are labelled already
    r = client.post("/learn", json=body)
    assert refusal(r)[:2] == (422, ["body", "events", 0, "id"])


def test_a_large_batch_of_ids_is_labelled_in_one_request(running) -> None:  # type: ignore[no-untyped-def]
    stream = make_stream(1000, seed=7)
    with running(max_batch=1000) as client:
        learn_all(client, stream[:200])
        xs = [x for x, _ in stream[200:]]
        ids = list(range(800))
        assert client.post("/predict_proba", json={"instances": wrapped(xs, ids)}).status_code == 200
        r = client.post(
            "/learn", json={"events": [{"id": i, "label": y} for i, (_, y) in zip(ids, stream[200:], strict=True)]}
        )
        assert r.json() == {"learned": 800, "seq": 1000}
        fresh = ProbabilityTree()
        for x, y in stream:
            fresh.learn_one(x, y)
        assert same_predictions(client, fresh)


@pytest.mark.parametrize("body", ["PredictBody", "DecideBody"])
def test_the_openapi_schema_shows_both_forms_of_an_instance(client, body) -> None:  # type: ignore[no-untyped-def]
    schema = client.get("/openapi.json").json()
    defs = schema["components"]["schemas"]
    [batch] = [s for s in defs[body]["properties"]["instances"]["anyOf"] if s.get("type") == "array"]
    plain, with_id = batch["items"]["anyOf"]
    assert plain["type"] == "object" and "anyOf" in plain["additionalProperties"]  # a features object
    ref = defs[with_id["$ref"].rsplit("/", 1)[1]]
    assert ref["required"] == ["features", "id"] and ref["additionalProperties"] is False
    assert ref["properties"]["features"]["type"] == "object"
    id_schema = json.dumps(ref["properties"]["id"])
    assert all(f'"type": "{t}"' in id_schema for t in ("string", "integer", "null"))
    for path in ("/predict_proba", "/decide"):
        assert {"409", "429"} <= set(schema["paths"][path]["post"]["responses"])
