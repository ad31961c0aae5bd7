"""Every method of ``RemoteModel`` and ``Client`` against a real service, the answers checked
against the service's own log and an in-process model fed the same events."""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import orjson
import pandas as pd
import pytest

from streamtree import ProbabilityTree
from streamtree.client import Client, Conflict, InvalidRequest, NotFound, RemoteModel
from streamtree.client.errors import AFTER_NOT_LEARNED
from tests.app.conftest import make_stream
from tests.client.conftest import fresh_name


def test_create_info_summary_and_delete(client: Client) -> None:
    m = client.model(fresh_name())
    made = m.create({"grace_period": 50})
    assert made["name"] == m.name and made["seq"] == 0 and made["config"]["grace_period"] == 50
    assert m.create({"grace_period": 50}) == made  # the same config again: no-op
    with pytest.raises(Conflict) as exc:
        m.create({"grace_period": 60})
    assert exc.value.status == 409
    with pytest.raises(Conflict):
        m.create({"grace_period": 50}, exist_ok=False)
    assert m.info()["config"] == made["config"]
    assert m.summary()["n_examples"] == 0
    assert m.name in {info["name"] for info in client.models()}
    assert client.health()["seq"][m.name] == 0
    m.delete()
    with pytest.raises(NotFound):
        m.info()
    assert m.name not in client.health()["seq"]


def test_learn_and_predict_match_an_in_process_model(model: RemoteModel) -> None:
    events = make_stream(120, seed=3)
    local = ProbabilityTree(**model.info()["config"])
    for x, y in events[:20]:
        assert model.learn_one(x, y)["learned"] == 1
        local.learn_one(x, y)
    X = pd.DataFrame([x for x, _ in events[20:]])
    y = pd.Series([y for _, y in events[20:]])
    assert model.learn_many(X, y, batch_size=30) == {"learned": 100, "seq": 120}  # four requests
    local.learn_many(X, y)
    probes = [x for x, _ in make_stream(10, seed=99)]
    for x in probes:
        assert model.predict_proba_one(x) == local.predict_proba_one(x)
        assert model.predict_one(x) == local.predict_one(x)
    frame = model.predict_proba_many(pd.DataFrame(probes, index=range(100, 110)))
    expected = local.predict_proba_many(pd.DataFrame(probes))
    assert list(frame.index) == list(range(100, 110))
    assert sorted(frame.columns) == sorted(expected.columns)
    assert np.array_equal(frame[expected.columns].to_numpy(), expected.to_numpy())
    assert model.predict_many(probes).tolist() == [local.predict_one(x) for x in probes]
    raw = model.predict_batch(probes[:2])
    assert raw == [{str(k): p for k, p in local.predict_proba_one(x).items()} for x in probes[:2]]
    assert [(e["features"], e["label"]) for e in model.events(page=7)] == [(x, y) for x, y in events]
    assert [e["seq"] for e in model.events(after=115)] == [116, 117, 118, 119, 120]
    assert model.metrics()["all"]["n"] > 0


def test_labels_come_back_as_learned_booleans_and_integers(client: Client) -> None:
    flags, numbers = client.model(fresh_name()), client.model(fresh_name())
    flags.create()
    numbers.create()
    flags.learn_many([{"a": 1.0}, {"a": 2.0}], [True, False])
    numbers.learn_many([{"a": 1.0}, {"a": 2.0}], np.array([3, 7]))
    assert set(flags.predict_proba_one({"a": 1.0})) == {True, False}
    assert set(numbers.predict_proba_one({"a": 1.0})) == {3, 7}
    # another client that learned nothing reads the labels from the model's classes
    assert set(client.model(flags.name).predict_proba_one({"a": 1.0})) == {True, False}
    assert set(client.model(numbers.name).predict_many([{"a": 1.0}])) <= {3, 7}


def test_missing_values_are_left_out_of_the_events(model: RemoteModel) -> None:
    """Blank cells of a DataFrame (NaN, None, pandas NA and NaT), NaN and None in dicts, and
    numpy scalars: the logged events hold the present values only, as Python scalars."""
    X = pd.DataFrame(
        {
            "size": [1.5, np.nan, 3.0],
            "colour": ["red", None, "blue"],
            "count": pd.array([1, None, 3], dtype="Int64"),
            "when": [pd.NaT, pd.NaT, pd.NaT],
        }
    )
    assert model.learn_many(X, ["a", "b", "a"])["seq"] == 3
    model.learn_one({"size": float("nan"), "colour": None, "count": np.int64(4), "w": np.float32(0.5)}, np.str_("b"))
    logged = [e["features"] for e in model.events()]
    assert logged == [
        {"size": 1.5, "colour": "red", "count": 1},
        {},
        {"size": 3.0, "colour": "blue", "count": 3},
        {"count": 4, "w": 0.5},
    ]
    local = ProbabilityTree(**model.info()["config"])
    for x, y in zip(logged, ["a", "b", "a", "b"], strict=True):
        local.learn_one(x, y)
    assert model.predict_proba_one({"size": np.nan, "count": 2}) == local.predict_proba_one({"count": 2})
    assert model.predict_proba_many(X).to_dict("records") == [
        local.predict_proba_one(x) for x in [logged[0], {}, logged[2]]
    ]


def test_a_numpy_array_takes_its_column_names(model: RemoteModel) -> None:
    X = np.array([[1.0, np.nan], [2.0, 5.0]])
    model.learn_many(X, ["a", "b"], columns=["p", "q"])
    assert [e["features"] for e in model.events()] == [{"p": 1.0}, {"p": 2.0, "q": 5.0}]
    assert list(model.predict_proba_many(X, columns=["p", "q"]).shape) == [2, 2]


def test_delayed_labels_by_id(model: RemoteModel) -> None:
    model.learn_many([{"a": 1.0}, {"a": 5.0}], ["no", "yes"])
    model.predict_proba_one({"a": 4.0}, id="a-1")
    with pytest.raises(Conflict):  # an id is written once
        model.predict_proba_one({"a": 9.0}, id="a-1")
    assert model.label("a-1", "yes") == {"learned": 1, "seq": 3}
    model.predict_one({"a": 2.0}, id=7)
    model.decide({"a": 3.0}, {"act": {"yes": 0, "no": 1}, "wait": {"yes": 1, "no": 0}}, id="a-2")
    assert model.label_many([7, "a-2"], ["no", "yes"]) == {"learned": 2, "seq": 5}
    assert [(e["features"], e["label"]) for e in model.events(after=2)] == [
        ({"a": 4.0}, "yes"),
        ({"a": 2.0}, "no"),
        ({"a": 3.0}, "yes"),
    ]
    with pytest.raises(InvalidRequest) as exc:  # labelled already
        model.label("a-1", "no")
    assert exc.value.loc == ("body", "id")


def test_decisions_single_and_many(model: RemoteModel) -> None:
    costs = {"ship": {True: 0, False: 10}, "hold": {True: 4, False: 0}}
    with pytest.raises(Conflict):  # no label learned yet
        model.decide({"a": 1.0}, costs)
    model.learn_many([{"a": 1.0}, {"a": 2.0}, {"a": 3.0}], [True, False, True])
    one = model.decide({"a": 1.0}, costs)
    p = one["probabilities"]
    assert set(p) == {True, False}
    assert one["expected_costs"] == pytest.approx({"ship": 10 * p[False], "hold": 4 * p[True]})
    assert one["decision"] == min(one["expected_costs"], key=one["expected_costs"].__getitem__)
    many = model.decide_many(pd.DataFrame({"a": [1.0, 2.0]}), costs)
    assert many["decisions"][0] == one["decision"] and len(many["expected_costs"]) == 2
    assert many["probabilities"][0] == p and many["seq"] == 3
    raw = model.decide_batch([{"a": 1.0}], costs)
    assert raw["probabilities"] == [{"true": p[True], "false": p[False]}]


def test_explain(model: RemoteModel) -> None:
    model.learn_many([{"a": 1.0}, {"a": 2.0}], ["x", "y"])
    explained = model.explain({"a": 1.5, "b": None})
    assert explained["proba"] == model.predict_proba_one({"a": 1.5})


def test_learn_batch_posts_prepared_events_under_the_callers_key(model: RemoteModel) -> None:
    events = [{"features": {"a": 1.0}, "label": "x"}, {"features": {"a": 2.0}, "label": "y"}]
    assert model.learn_batch(events, key="import-0001") == {"learned": 2, "seq": 2}
    assert model.learn_batch(events, key="import-0001") == {"learned": 2, "seq": 2}  # a retry: nothing learned
    assert model.learn_batch(events) == {"learned": 2, "seq": 4}


def test_learn_batch_after_another_is_learned_after_it_even_when_sent_first(model: RemoteModel) -> None:
    first = [{"features": {"a": 1.0}, "label": "x"}]
    second = orjson.dumps([{"features": {"a": 2.0}, "label": "y"}])  # JSON bytes are sent as they are
    with ThreadPoolExecutor(1) as pool:
        later = pool.submit(model.learn_batch, second, "import-0002", "import-0001")
        time.sleep(0.3)
        assert not later.done()  # held by the service until import-0001 is learned
        assert model.learn_batch(first, key="import-0001") == {"learned": 1, "seq": 1}
        assert later.result(timeout=30) == {"learned": 1, "seq": 2}
    assert [e["label"] for e in model.events()] == ["x", "y"]
    with pytest.raises(InvalidRequest):
        model.learn_batch([{"features": {"a": 3.0}}], key="import-0003")  # no label: refused
    with pytest.raises(Conflict) as refused:  # and so is the batch that follows it
        model.learn_batch(second, key="import-0004", after="import-0003")
    assert refused.value.status == 409 and refused.value.body["type"] == AFTER_NOT_LEARNED
    with pytest.raises(TypeError, match="a list of event dicts or their JSON bytes"):
        model.learn_batch("[]")  # type: ignore[arg-type]


def test_river_calls_a_remote_model_a_classifier(model: RemoteModel) -> None:
    from river import base

    assert isinstance(model, base.Classifier)
    assert model.predict_proba_one({"a": 1.0}) == {} and model.predict_one({"a": 1.0}) is None


def test_a_batch_prediction_keeps_an_id_per_row(model: RemoteModel) -> None:
    """``predict_proba_many(X, ids=...)`` sends ``{"features", "id"}`` instances: each row's
    features wait for its label, as a single prediction's do."""
    model.learn_many([{"a": 1.0}, {"a": 5.0}], ["no", "yes"])
    X = pd.DataFrame({"a": [4.0, 2.0, None]})
    frame = model.predict_proba_many(X, ids=["b-1", "b-2", 3])
    assert frame.to_dict("records") == model.predict_proba_many(X).to_dict("records")
    decided = model.decide_many(X[:2], {"go": {"yes": 0, "no": 1}, "stop": {"yes": 1, "no": 0}}, ids=["d-1", "d-2"])
    assert decided["probabilities"] == frame[:2].to_dict("records")
    with pytest.raises(Conflict) as taken:  # an id is written once, in a batch too
        model.predict_proba_many(X[:1], ids=["d-2"])
    assert taken.value.loc is not None and taken.value.loc[:2] == ("body", "instances")
    assert model.label_many([3, "b-1", "b-2", "d-2"], ["no", "yes", "no", "yes"]) == {"learned": 4, "seq": 6}
    assert [(e["features"], e["label"]) for e in model.events(after=2)] == [
        ({}, "no"),
        ({"a": 4.0}, "yes"),
        ({"a": 2.0}, "no"),
        ({"a": 2.0}, "yes"),
    ]


def test_a_refused_label_does_not_change_what_the_answers_name(model: RemoteModel) -> None:
    model.learn_many([{"a": 0.0}, {"a": 1.0}], ["0", "1"])
    with pytest.raises(InvalidRequest):
        model.learn_one({"a": 1.0}, 1)  # the model's labels are strings: refused
    model.learn_one({"a": 1.0}, "1")
    assert set(model.predict_proba_one({"a": 1.0})) == {"0", "1"}
    assert model.predict_one({"a": 1.0}) == "1"
    model.delete()
    model.create()
    model.learn_many([{"a": 0.0}, {"a": 1.0}], [0, 1])  # the labels of the new model are integers
    assert set(model.predict_proba_one({"a": 1.0})) == {0, 1}


def test_predictions_and_decisions_in_requests_of_batch_size(tmp_path) -> None:  # type: ignore[no-untyped-def]
    # the client sent 1,000 instances a request whatever the service bounds: a service whose
    # max_answer_values is under 1,000 x labels refused every call, naming how many fit
    from streamtree.client import AsyncClient
    from tests.client.conftest import serve, stop

    labels = [f"l{i}" for i in range(10)]
    X = pd.DataFrame({"x": [float(i % 10) for i in range(150)]})
    costs = {"a": dict.fromkeys(labels, 1.0), "b": dict.fromkeys(labels, 2.0)}
    proc, service = serve(tmp_path / "data", max_answer_values="1000")
    try:
        with Client(service.url) as client:
            m = client.model("m")
            m.create()
            m.learn_many(pd.DataFrame({"x": [float(i) for i in range(10)]}), labels)
            with pytest.raises(InvalidRequest) as exc:
                m.predict_proba_many(X)  # 150 x 10 values in one answer
            assert exc.value.loc == ("body", "instances") and "send at most 100 instances" in str(exc.value)
            proba = m.predict_proba_many(X, batch_size=100)
            assert len(proba) == 150 and list(proba.columns) == labels
            assert list(m.predict_many(X, batch_size=100)) == list(proba.idxmax(axis=1))
            decided = m.decide_many(X, costs, batch_size=83)  # 12 values an instance
            assert len(decided["decisions"]) == 150 and decided["probabilities"][149] == proba.iloc[149].to_dict()
            with pytest.raises(ValueError, match="batch_size: an integer >= 1, got 0"):
                m.predict_proba_many(X, batch_size=0)

        async def the_same_awaited() -> Any:
            async with AsyncClient(service.url) as aclient:
                am = aclient.model("m")
                return await am.predict_proba_many(X, batch_size=100), await am.decide_many(X, costs, batch_size=83)

        aproba, adecided = asyncio.run(the_same_awaited())
        assert aproba.equals(proba) and adecided["decisions"] == decided["decisions"]
    finally:
        stop(proc)
