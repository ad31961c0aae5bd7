"""Ids in batches on real ``streamtree serve`` processes: the Python client's batch of ids and
labels, a retried labels request, and (on PostgreSQL) a batch with ids predicted on a replica,
which forwards it to the writer where the ids live."""

from __future__ import annotations

import http.client
import json
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from streamtree import ProbabilityTree
from streamtree.client import Client, Conflict, InvalidRequest
from tests.app.conftest import make_stream
from tests.app.test_cluster import health, instances, wait_until
from tests.app.test_process import free_port, request, start


@pytest.fixture(scope="module")
def port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """One service (no API key) for the tests of this module, each on its own model."""
    p = free_port()
    proc = start(tmp_path_factory.mktemp("batch-ids") / "data", p)
    try:
        yield p
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)


def test_the_client_predicts_a_batch_with_ids_and_labels_it_in_one_request(port: int) -> None:
    stream = make_stream(400, seed=11)
    with Client(f"http://127.0.0.1:{port}") as client:
        model = client.model("client-ids")
        model.create()
        model.learn_many([x for x, _ in stream[:300]], [y for _, y in stream[:300]])
        xs, ys = [x for x, _ in stream[300:]], [y for _, y in stream[300:]]
        ids = [f"c-{i}" for i in range(100)]
        with_ids = model.predict_proba_many(xs, ids=ids)
        assert with_ids.equals(model.predict_proba_many(xs))  # the ids change nothing of the answer
        with pytest.raises(Conflict) as taken:
            model.predict_proba_many(xs[:3], ids=["new-0", "new-1", "c-7"])
        assert taken.value.loc == ("body", "instances", 2, "id")
        with pytest.raises(InvalidRequest) as unknown:
            model.label_many(["c-0", "new-0"], ["low", "low"])  # new-0 went with its refused batch
        assert unknown.value.loc == ("body", "events", 1, "id")
        assert model.label_many(ids, ys) == {"learned": 100, "seq": 400}
        fresh = ProbabilityTree()
        for x, y in stream:
            fresh.learn_one(x, y)
        probes = [x for x, _ in make_stream(20, seed=5)]
        assert model.predict_proba_many(probes).to_dict("records") == [fresh.predict_proba_one(x) for x in probes]


def post_with_key(port: int, path: str, body: Any, key: str) -> tuple[int, Any]:
    """POST ``body`` with an ``Idempotency-Key``, as a client retrying a lost answer sends it again."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        c.request("POST", path, json.dumps(body), {"Content-Type": "application/json", "Idempotency-Key": key})
        r = c.getresponse()
        return r.status, json.loads(r.read())
    finally:
        c.close()


def test_a_retried_labels_request_learns_nothing_twice(port: int) -> None:
    assert request(port, "PUT", "/models/retried", {})[0] == 201
    stream = make_stream(60, seed=3)
    body = {"events": [{"features": x, "label": y} for x, y in stream[:50]]}
    assert request(port, "POST", "/models/retried/learn", body)[0] == 200
    instances_ = [{"features": x, "id": i} for i, (x, _) in enumerate(stream[50:])]
    assert request(port, "POST", "/models/retried/predict_proba", {"instances": instances_})[0] == 200
    labels = {"events": [{"id": i, "label": y} for i, (_, y) in enumerate(stream[50:])]}
    # the answer lost twice: the request is sent again with its key
    answers = [post_with_key(port, "/models/retried/learn", labels, "labels-batch-1") for _ in range(3)]
    assert answers == [(200, {"learned": 10, "seq": 60})] * 3  # the first answer, every time
    status, out = request(port, "GET", "/models/retried/events?after=50")
    assert status == 200 and [e["features"] for e in out["events"]] == [x for x, _ in stream[50:]]


@pytest.mark.slow
def test_a_batch_with_ids_on_a_replica_keeps_its_ids_on_the_writer(tmp_path: Path, pg_url: str) -> None:
    stream = make_stream(220, seed=8)
    with instances(tmp_path, pg_url, 2) as [(_, w), (_, r)]:
        assert health(r)["role"] == "replica"
        body = {"events": [{"features": x, "label": y} for x, y in stream[:200]]}
        assert request(w, "POST", "/learn", body)[0] == 200
        wait_until(lambda: health(r)["seq"] == {"default": 200}, 10, "replica at 200")
        batch = [stream[200][0], *({"features": x, "id": f"r-{i}"} for i, (x, _) in enumerate(stream[201:]))]
        status, out = request(r, "POST", "/predict_proba", {"instances": batch})
        assert status == 200 and len(out["probabilities"]) == 20, out
        status, out = request(
            r, "POST", "/decide", {"instances": batch[:2], "costs": {"a": {"low": 1, "mid": 0, "high": 0}}}
        )
        assert status == 409 and out["detail"][0]["loc"] == ["body", "instances", 1, "id"], out  # pending on the writer
        labels = {"events": [{"id": f"r-{i}", "label": y} for i, (_, y) in enumerate(stream[201:])]}
        status, out = request(r, "POST", "/learn", labels)  # forwarded: the writer has the ids
        assert status == 200 and out == {"learned": 19, "seq": 219}, out
        status, out = request(w, "POST", "/learn", labels)
        assert status == 422 and out["detail"][0]["loc"] == ["body", "events", 0, "id"]  # labelled once
