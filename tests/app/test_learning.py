"""The one predict-then-learn step, and replay through it: any batching gives the same state."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from app.learning import REPLAY_PAGE, bad_row, encode_event, learn_scored, restore, split_config
from app.prequential import Prequential
from app.settings import Settings
from app.storage import open_store
from streamtree import ProbabilityTree
from streamtree.exceptions import InputError
from tests.app.conftest import make_stream


def per_event(events: list[tuple[dict[str, Any], Any]]) -> tuple[ProbabilityTree, Prequential]:
    """The obvious loop: predict, score, learn, one event at a time."""
    model, preq = ProbabilityTree(grace_period=20), Prequential(100, 10)
    for x, y in events:
        preq.update(model.predict_proba_one(x), y)
        model.learn_one(x, y)
    return model, preq


def in_batches(events: list[tuple[dict[str, Any], Any]], cuts: list[int]) -> tuple[ProbabilityTree, Prequential]:
    model, preq = ProbabilityTree(grace_period=20), Prequential(100, 10)
    for a, b in zip([0, *cuts], [*cuts, len(events)], strict=True):
        if b > a:
            learn_scored(model, preq, [x for x, _ in events[a:b]], [y for _, y in events[a:b]])
    return model, preq


@pytest.mark.parametrize("cuts", [[], [1, 2, 3], [5, 150, 151], list(range(7, 400, 7))])
def test_any_batching_equals_the_per_event_loop(cuts: list[int]) -> None:
    events = make_stream(400, seed=3)
    ref_model, ref_preq = per_event(events)
    model, preq = in_batches(events, cuts)
    assert model.to_bytes() == ref_model.to_bytes()
    assert preq.state() == ref_preq.state()


def test_a_refused_batch_changes_nothing() -> None:
    events = make_stream(50, seed=4)
    model, preq = in_batches(events, [])
    before, state = model.to_bytes(), preq.state()
    xs = [x for x, _ in make_stream(5, seed=5)]
    xs[3] = xs[3] | {"a": "text"}  # "a" is numeric in this model
    with pytest.raises(InputError) as info:
        learn_scored(model, preq, xs, ["low"] * 5)
    assert model.to_bytes() == before and preq.state() == state
    assert bad_row(model, xs, info.value) == 3


def test_bad_row_within_the_batch_itself() -> None:
    model = ProbabilityTree()
    xs: list[dict[str, Any]] = [{"new": 1.0}, {"other": "x"}, {"new": "now a string"}, {"new": 2.0}]
    with pytest.raises(InputError) as info:
        model.learn_many(xs, ["p"] * 4, return_proba=True)
    assert bad_row(model, xs, info.value) == 2


def test_restore_replays_the_log_in_pages(tmp_path: Path) -> None:
    events = make_stream(2 * REPLAY_PAGE + 37, seed=6)
    store = open_store(tmp_path)
    store.create_model("m", "{}")
    store.append("m", 1, [encode_event(x, y) for x, y in events])
    settings = Settings(data_dir=tmp_path, metrics_window=100)
    restored = restore(store, "m", {"grace_period": 20}, ProbabilityTree, settings)
    model, preq = per_event(events)
    assert restored.seq == len(events) and restored.snapshot_seq == 0
    assert restored.model.to_bytes() == model.to_bytes()
    assert restored.prequential.state() == preq.state()
    store.close()


COSTS = {"act": {"low": 5, "mid": 1, "high": 0}, "wait": {"low": 0, "mid": 1, "high": 8}}


def test_restore_with_costs_replays_the_cost_metrics(tmp_path: Path) -> None:
    """``costs`` in a config is the service's: the model is built without it, the metrics with it."""
    events = make_stream(700, seed=8)
    store = open_store(tmp_path)
    store.create_model("m", "{}")
    store.append("m", 1, [encode_event(x, y) for x, y in events])
    restored = restore(
        store,
        "m",
        {"grace_period": 20, "costs": COSTS},
        ProbabilityTree,
        Settings(data_dir=tmp_path, metrics_window=100),
    )
    model, preq = ProbabilityTree(grace_period=20), Prequential(100, 10, costs=COSTS)
    for x, y in events:
        preq.update(model.predict_proba_one(x), y)
        model.learn_one(x, y)
    assert restored.model.to_bytes() == model.to_bytes()
    assert restored.prequential.state() == preq.state()
    assert preq.report()["all"]["costed"] == 699
    store.close()


def test_a_config_stored_before_the_linear_component_rebuilds_the_model_it_described(tmp_path: Path) -> None:
    """A model created before ``linear`` existed has a complete stored config without it; its
    snapshots load with ``linear=False`` (format 3), and so must its log alone, or a restart
    from a snapshot and a replay from the log would give two different models."""
    from streamtree.estimators import ESTIMATORS

    events = make_stream(300, seed=9)
    legacy = {k: v for k, v in ESTIMATORS.config_of(ProbabilityTree(grace_period=20)).items() if k != "linear"}
    store = open_store(tmp_path)
    store.create_model("m", "{}")
    store.append("m", 1, [encode_event(x, y) for x, y in events])
    settings = Settings(data_dir=tmp_path, metrics_window=100)
    restored = restore(store, "m", ESTIMATORS.from_stored(legacy), ESTIMATORS, settings)
    model = ProbabilityTree(grace_period=20, linear=False)
    for x, y in events:
        model.learn_one(x, y)
    assert restored.model.to_bytes() == model.to_bytes()
    forest = {"estimator": "forest", "n_trees": 2, "method": "bt+", "seed": 0, "tree": dict(legacy)}
    assert ESTIMATORS.from_stored(forest)["tree"]["linear"] is False
    assert ESTIMATORS.from_stored(forest)["weighted"] is False  # a forest stored before weighting averaged
    assert ESTIMATORS.from_stored({**forest, "weighted": True})["weighted"] is True
    assert ESTIMATORS.from_stored({**legacy, "linear": True})["linear"] is True  # a stored value is kept
    store.close()


def test_split_config() -> None:
    assert split_config({"grace_period": 5, "costs": COSTS}) == ({"grace_period": 5}, {"costs": COSTS})
    assert split_config({"grace_period": 5}) == ({"grace_period": 5}, {})
