"""The river face beyond river's own checks (tests/test_tree.py, tests/test_forest.py): a
caller's config objects are copied, ``clone(include_attributes=True)`` copies a learned model
that continues bit for bit, and a sample weight is refused, not dropped."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
from river import compose, preprocessing

import streamtree
from streamtree import ProbabilityForest, ProbabilityTree
from streamtree.exceptions import ConfigError, InputError


def stream(n: int, seed: int = 0) -> list[tuple[dict[str, Any], str]]:
    rng = random.Random(seed)
    return [({"a": rng.random(), "b": rng.random()}, rng.choice("AB")) for _ in range(n)]


def test_a_callers_config_objects_edited_later_change_nothing() -> None:
    # one config dict reused in a sweep: the forest read the edited dict in get_config() while
    # its members kept the old values, and its save did not load ("not made by the config")
    config: dict[str, Any] = {"grace_period": 10}
    forest = ProbabilityForest(n_trees=3, method="rf+", tree=config, variants=[{"grace_period": 5}, {}])
    config["grace_period"] = 20
    assert forest.get_config()["tree"]["grace_period"] == 10
    for x, y in stream(300):
        forest.learn_one(x, y)
    assert streamtree.load(forest.to_bytes()).to_bytes() == forest.to_bytes()
    assert [m.grace_period for m in forest.clone().members] == [m.grace_period for m in forest.members] == [5, 10, 5]
    names = ["b"]
    tree = ProbabilityTree(nominal_features=names)
    names.append("a")
    assert tree.get_config()["nominal_features"] == ["b"] == tree.clone().get_config()["nominal_features"]


@pytest.mark.parametrize("make", [lambda: ProbabilityTree(), lambda: ProbabilityForest(n_trees=3, method="rd", seed=1)])
def test_clone_with_attributes_continues_bit_for_bit(make: Any) -> None:
    # river deep-copied each attribute on its own: a forest's typed lists could not be copied,
    # and without them the twin's registry and classes were no longer its members'
    model = make()
    events = stream(400)
    for x, y in events[:200]:
        model.learn_one(x, y)
    twin = model.clone(include_attributes=True)
    for x, y in events[200:]:
        x = x | {"c": x["a"]}  # a new feature, and a new class
        y = y + "x" if x["a"] > 0.9 else y
        model.learn_one(x, y)
        twin.learn_one(x, y)
    assert twin.to_bytes() == model.to_bytes()
    assert model.clone().n_examples == 0
    with pytest.raises(ConfigError, match="new_params") as caught:
        model.clone({"seed": 3}, include_attributes=True)
    assert caught.value.param == "new_params"


@pytest.mark.parametrize("w", [3.0, 0, 0.5, True, np.array([1.0]), "1", None])
def test_a_sample_weight_other_than_1_is_refused_naming_w_and_changes_nothing(w: Any) -> None:
    model = ProbabilityTree()
    for x, y in stream(50):
        model.learn_one(x, y, w=1)
    model.learn_one({"a": 0.5, "b": 0.5}, "A", w=1.0)
    model.learn_one({"a": 0.5, "b": 0.5}, "A", w=np.float64(1))
    before = model.to_bytes()
    with pytest.raises(InputError, match="'w' parameter of learn_one must be 1") as caught:
        model.learn_one({"a": 0.5, "b": 0.5}, "A", w=w)
    assert caught.value.field == "w" and model.to_bytes() == before


def test_a_river_pipeline_hands_the_weight_over_instead_of_dropping_it() -> None:
    # river routes to a step only the parameters its learn_one names: without w, an example
    # weighted 0 was learned once without a word
    pipeline = compose.Pipeline(preprocessing.StandardScaler(), ProbabilityTree())
    pipeline.learn_one({"a": 1.0}, "A", w=1.0)
    with pytest.raises(InputError, match="'w'"):
        pipeline.learn_one({"a": 1.0}, "A", w=0.0)
    assert pipeline[-1].n_examples == 1
