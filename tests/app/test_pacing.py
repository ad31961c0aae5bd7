"""Learning in stretches bounded by cost: the same model bits, a refused event still refuses the
whole request, and ``/health`` answers while a 100-tree forest learns a large batch."""

from __future__ import annotations

import asyncio
import copy
import http.client
import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from app.history import History
from app.learning import learn_scored
from app.pacing import learn_in_stretches
from app.prequential import Prequential
from streamtree.estimators import ESTIMATORS
from streamtree.exceptions import InputError
from tests.app.conftest import make_stream
from tests.app.test_process import free_port, request, start


def fresh(config: dict[str, Any]) -> tuple[Any, Prequential]:
    return ESTIMATORS(**config), Prequential(100, 10, History(50, 30.0, 100))


@pytest.mark.parametrize(
    "config", [{}, {"estimator": "forest", "n_trees": 3, "method": "bt+", "seed": 4}], ids=["tree", "forest"]
)
def test_stretches_learn_the_same_model_bit_for_bit(config: dict[str, Any]) -> None:
    events = make_stream(1_500, seed=9)
    xs, ys = [x for x, _ in events], [y for _, y in events]
    whole, whole_scores = fresh(config)
    learn_scored(whole, whole_scores, xs, ys, 1000.0)
    cut, cut_scores = fresh(config)
    asyncio.run(learn_in_stretches(cut, cut_scores, xs, ys, 1000.0, 37))
    assert cut.to_bytes() == whole.to_bytes()
    assert cut_scores.state() == whole_scores.state()


def test_a_refused_event_in_a_late_stretch_refuses_the_request_before_any_is_learned() -> None:
    model, scores = fresh({"estimator": "forest", "n_trees": 3})
    events = make_stream(300, seed=2)
    learn_scored(model, scores, [x for x, _ in events[:100]], [y for _, y in events[:100]], 1.0)
    before, state = model.to_bytes(), copy.deepcopy(scores.state())
    xs = [x for x, _ in events[100:]]
    xs[180] = xs[180] | {"a": "not a number"}  # 'a' is numeric in this model
    with pytest.raises(InputError):
        asyncio.run(learn_in_stretches(model, scores, xs, [y for _, y in events[100:]], 2.0, 20))
    assert model.to_bytes() == before and scores.state() == state
    with pytest.raises(InputError):
        asyncio.run(learn_in_stretches(model, scores, xs[:5], ["ok", "ok", 3.5, "ok", "ok"], 2.0, 2))
    assert model.to_bytes() == before


def test_a_refused_event_of_a_large_batch_on_a_forest_is_422_and_learns_nothing(running) -> None:  # type: ignore[no-untyped-def]
    with running() as client:
        assert client.put("/models/f", json={"estimator": "forest", "n_trees": 50}).status_code == 201
        events = [{"features": x, "label": y} for x, y in make_stream(600, seed=5)]
        events[550]["features"] = events[550]["features"] | {"colour": 7.5}  # colour is nominal by then
        r = client.post("/models/f/learn", json={"events": events})
        assert r.status_code == 422, r.text
        assert r.json()["detail"][0]["loc"][:3] == ["body", "events", 550]
        assert client.get("/models/f").json()["seq"] == 0
        assert client.get("/models/f/events").json() == {"events": []}


def health_waits_while(work: threading.Thread, port: int) -> tuple[list[float], float]:
    """Start ``work`` and ask ``/health`` every 20 ms until it is done: each answer's wait, and
    how long the work took."""
    started = time.monotonic()
    work.start()
    waits = []
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    while work.is_alive():
        t0 = time.monotonic()
        assert request(port, "GET", "/health", conn=conn)[0] == 200
        waits.append(time.monotonic() - t0)
        time.sleep(0.02)
    work.join()
    return waits, time.monotonic() - started


def many_labels(n: int) -> list[tuple[dict[str, Any], str]]:
    """``n`` events of 1,000 labels (``max_labels``), each label first seen in the first 1,000."""
    return [(x, f"label-{i % 1_000}") for i, (x, _) in enumerate(make_stream(n, seed=7))]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("config", "events"),
    [
        ({"estimator": "forest", "n_trees": 100}, lambda: make_stream(10_000, seed=6)),  # max_batch
        # counted by trees alone this was one stretch: /health waited 4.8 s behind it
        ({"estimator": "forest", "n_trees": 10}, lambda: many_labels(1_500)),
    ],
    ids=["100-trees", "1000-labels"],
)
def test_health_answers_while_a_forest_learns_a_large_batch(
    tmp_path: Path, config: dict[str, Any], events: Any
) -> None:
    port = free_port()
    proc = start(tmp_path / "data", port)
    try:
        status, out = request(port, "PUT", "/models/big", config)
        assert status == 201, out
        body = json.dumps({"events": [{"features": x, "label": y} for x, y in events()]})
        answer: list[int] = []

        def learn() -> None:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
            conn.request("POST", "/models/big/learn", body=body, headers={"Content-Type": "application/json"})
            answer.append(conn.getresponse().status)

        learner = threading.Thread(target=learn)
        waits, took = health_waits_while(learner, port)
        assert answer == [200]
        assert len(waits) >= 5, waits  # the learn took a while, and /health answered all along
        # a loop blocked by the learn would make one wait about as long as the learn; against
        # the learn's own duration, the bound holds on a loaded machine too (a stretch: ~35 ms)
        assert max(waits) < took / 4, (took, sorted(waits)[-5:])
    finally:
        proc.kill()
        proc.wait(timeout=30)


@pytest.mark.slow
def test_a_large_prediction_is_paced_and_answered_by_one_model_while_it_learns(tmp_path: Path) -> None:
    # a read was one library call: 10,000 instances on a 100-tree forest held the loop (and
    # /health) for seconds. Paced, it must still be one model's answer: a learn going on
    # meanwhile may not change the model between two of its stretches
    config = {"estimator": "forest", "n_trees": 100, "seed": 3}
    events = make_stream(4_000, seed=11)
    instances = [x for x, _ in make_stream(3_000, seed=12)]
    port = free_port()
    proc = start(tmp_path / "data", port)
    try:
        assert request(port, "PUT", "/models/f", config)[0] == 201
        body = {"events": [{"features": x, "label": y} for x, y in events[:1_000]]}
        assert request(port, "POST", "/models/f/learn", body)[0] == 200
        learning: list[int] = []

        def learn_more() -> None:
            more = {"events": [{"features": x, "label": y} for x, y in events[1_000:]]}
            learning.append(request(port, "POST", "/models/f/learn", more)[0])

        learner = threading.Thread(target=learn_more)
        answers: list[tuple[int, Any]] = []

        def predict() -> None:
            answers.append(request(port, "POST", "/models/f/predict_proba", {"instances": instances}))

        predictor = threading.Thread(target=predict)
        learner.start()
        time.sleep(0.2)
        waits, took = health_waits_while(predictor, port)
        learner.join()
        assert learning == [200]
        ((status, answer),) = answers
        assert status == 200, answer
        assert len(waits) >= 3 and max(waits) < took / 3, (took, sorted(waits)[-5:])
    finally:
        proc.kill()
        proc.wait(timeout=30)
    seq = answer["seq"]
    assert 1_000 <= seq <= 4_000
    model, _ = fresh(config)  # the model at that seq, in the library: every row is its answer
    model.learn_many([x for x, _ in events[:seq]], [y for _, y in events[:seq]])
    expected = model.predict_proba(instances)
    keys = list(answer["probabilities"][0])
    got = [[row[k] for k in keys] for row in answer["probabilities"]]
    assert got == expected[:, [model.classes_.index(k) for k in keys]].tolist()
