"""ProbabilityForest's ``variants``: members that differ in some parameters, cycled over the
members, kept through configs and saved bytes, refused with the parameter named."""

from __future__ import annotations

from typing import Any

import pytest

from streamtree import ConfigError, ProbabilityForest
from streamtree.forest import METHOD_VARIANTS, METHODS
from streamtree.persistence import FOREST, Capture
from tests.test_forest import FAST, fitted, probas
from tests.test_tree import stream


def test_bt_plus_members_differ_in_growth_forgetting_and_the_linear_component() -> None:
    forest = ProbabilityForest()
    kinds = [(m.linear, m.grace_period, m.tau, m.half_life) for m in forest.members]
    assert kinds == ([(True, 5, 0.6, 2000), (False, 15, 0.2, None), (True, 15, 0.2, None)] * 4)[:10]
    assert forest.get_config()["variants"] == METHOD_VARIANTS["bt+"]
    assert forest.get_config()["tree"]["linear"] is True


@pytest.mark.parametrize("method", [m for m in METHODS if m not in METHOD_VARIANTS])
def test_other_methods_members_are_alike(method: str) -> None:
    forest = ProbabilityForest(n_trees=3, method=method)
    assert forest.get_config()["variants"] == [{}]
    configs = [{k: v for k, v in m.get_config().items() if k != "seed"} for m in forest.members]
    assert configs[0] == configs[1] == configs[2]


def test_variants_cycle_over_the_members_on_top_of_tree() -> None:
    forest = ProbabilityForest(n_trees=5, tree={"grace_period": 7}, variants=[{"grace_period": 3, "linear": False}, {}])
    assert [(m.grace_period, m.linear) for m in forest.members] == [(3, False), (7, True)] * 2 + [(3, False)]
    config = forest.get_config()
    # the forest's tree config is its own, not member 0's variant of it
    assert config["tree"]["grace_period"] == 7 and config["tree"]["linear"] is True
    assert ProbabilityForest(**config).get_config() == config


def test_a_forest_of_variants_round_trips_and_learns_on_identically() -> None:
    forest = fitted("bt+", variants=[{"linear": False}, {"naive_bayes": True}, {}])
    loaded = ProbabilityForest.from_bytes(forest.to_bytes())
    assert loaded.get_config() == forest.get_config()
    assert [(m.linear, m.naive_bayes) for m in loaded.members] == [(m.linear, m.naive_bayes) for m in forest.members]
    assert probas(loaded) == probas(forest)
    for x, y in stream(100, seed=5):
        loaded.learn_one(x, y)
        forest.learn_one(x, y)
    assert loaded.to_bytes() == forest.to_bytes()


def test_variants_change_the_forest_and_alike_members_are_one_variant() -> None:
    alike = fitted("bt+", variants=[{}])
    assert probas(fitted("bt+", variants=[{}, {}])) == probas(alike)
    assert probas(fitted("bt+")) != probas(alike)


def test_a_forest_saved_before_variants_is_read_with_its_members_alike() -> None:
    forest = fitted("bt+", variants=[{}])
    config = {k: v for k, v in forest.get_config().items() if k != "variants"}
    legacy = Capture(
        {"format": FOREST, "version": 2, "config": config, "n_examples": forest.n_examples},
        {f"member.{i}": m.capture() for i, m in enumerate(forest.members)} | {"loss": forest.loss_},
    ).to_bytes()
    loaded = ProbabilityForest.from_bytes(legacy)
    assert loaded.get_config()["variants"] == [{}] and all(m.linear for m in loaded.members)
    assert probas(loaded) == probas(forest)


@pytest.mark.parametrize(
    ("variants", "param"),
    [
        ([], "variants"),
        ({"linear": False}, "variants"),
        ([{}, "linear"], "variants.1"),
        ([{"linear": 3}], "variants.0.linear"),
        ([{"depth": 3}], "variants.0.depth"),
        ([{}, {"seed": 3}], "variants.1.seed"),
        ([{"splitter": "random"}], "variants.0.splitter"),
        ([{"max_bytes": 2**20}], "variants.0.max_bytes"),
        ([{"nominal_features": ["a"]}], "variants.0.nominal_features"),
    ],
)
def test_invalid_variants_name_the_parameter(variants: Any, param: str) -> None:
    with pytest.raises(ConfigError) as info:
        ProbabilityForest(tree=FAST, variants=variants)
    assert info.value.param == param
    assert "variants" in str(info.value)


def test_poisson_rate_draws_each_members_repetitions_with_that_mean() -> None:
    from tests.reference.forest import LoopForest

    forest = ProbabilityForest(n_trees=20, poisson_rate=6.0, tree=FAST)
    reps = LoopForest(n_trees=20, poisson_rate=6.0, tree=FAST).repetitions(5000)
    assert abs(reps.mean() - 6.0) < 0.1 and abs(reps.var() - 6.0) < 0.3
    assert (reps == 0).mean() < 0.01  # e**-6: a member skips one example in 400
    for x, y in stream(300):
        forest.learn_one(x, y)
    loaded = ProbabilityForest.from_bytes(forest.to_bytes())
    assert loaded.poisson_rate == 6.0 and loaded.get_config() == forest.get_config()


def test_a_higher_poisson_rate_is_the_per_member_loop_bit_for_bit() -> None:
    from tests.reference.forest import LoopForest

    fast = ProbabilityForest(n_trees=4, poisson_rate=3.0, tree=FAST)
    loop = LoopForest(n_trees=4, poisson_rate=3.0, tree=FAST)
    for x, y in stream(400):
        fast.learn_one(x, y)
        loop.learn_one(x, y)
    assert fast.to_bytes() == loop.to_bytes()
    assert probas(fitted("bt+", poisson_rate=3.0)) != probas(fitted("bt+"))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"poisson_rate": 0}, "in (0, 16]"),
        ({"poisson_rate": 17.0}, "in (0, 16]"),
        ({"poisson_rate": float("nan")}, "in (0, 16]"),
        ({"poisson_rate": True}, "in (0, 16]"),
        ({"poisson_rate": "6"}, "in (0, 16]"),
        ({"poisson_rate": 2.0, "method": "rd"}, "bagging methods"),
        ({"poisson_rate": 2.0, "method": "dst"}, "bagging methods"),
    ],
)
def test_an_invalid_poisson_rate_names_the_parameter(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match="poisson_rate") as info:
        ProbabilityForest(**kwargs)
    assert info.value.param == "poisson_rate" and message in str(info.value)


def test_bt_plus_members_learn_at_rate_2_counting_each_example_once_among_those_seen() -> None:
    forest = ProbabilityForest()
    assert forest.get_config()["poisson_rate"] == 2.0 and forest.poisson_rate is None
    assert forest.get_config()["tree"]["repeats_as_seen"] is False
    assert all(not m.repeats_as_seen for m in forest.members)
    rf = ProbabilityForest(method="rf+")
    assert rf.get_config()["poisson_rate"] == 1.0 and rf.members[0].repeats_as_seen is True


def test_repeats_as_seen_changes_a_bagged_forest_but_not_a_tree() -> None:
    counted = ProbabilityForest(n_trees=4, poisson_rate=2.0, tree={**FAST, "repeats_as_seen": True})
    once = ProbabilityForest(n_trees=4, poisson_rate=2.0, tree={**FAST, "repeats_as_seen": False})
    for x, y in stream(600):
        counted.learn_one(x, y)
        once.learn_one(x, y)
    assert probas(counted) != probas(once)
    # an example counted once among those seen: a leaf attempts a split after grace_period
    # distinct examples, so the members grow less than when every repetition counts
    assert once.n_nodes < counted.n_nodes
    from streamtree import ProbabilityTree

    trees = [ProbabilityTree(grace_period=20, repeats_as_seen=flag) for flag in (True, False)]
    for x, y in stream(600):
        for tree in trees:
            tree.learn_one(x, y)
    assert trees[0].state.tree.counts.tolist() == trees[1].state.tree.counts.tolist()
    assert probas(trees[0]) == probas(trees[1])


def test_a_tree_saved_before_repeats_as_seen_counts_repeats_as_it_did() -> None:
    from streamtree.estimators import ESTIMATORS

    assert ESTIMATORS.from_stored({"grace_period": 30})["repeats_as_seen"] is True
    stored = ESTIMATORS.from_stored({"estimator": "forest", "n_trees": 3, "tree": {"grace_period": 30}})
    assert stored["poisson_rate"] == 1.0 and stored["variants"] == [{}] and stored["tree"]["repeats_as_seen"] is True
    with pytest.raises(ConfigError, match="repeats_as_seen"):
        ProbabilityForest(tree={"repeats_as_seen": "no"})
