"""``max_bytes``: growth that would take a tree's arrays past its budget stops the tree instead,
at the same row whatever the batch boundaries; the bytes are counted without making the arrays."""

from __future__ import annotations

import random

import numpy as np
import pytest

from streamtree import ProbabilityForest, ProbabilityTree
from streamtree.growth import stop_growth
from streamtree.inspection import memory_bytes
from streamtree.state import M_FREE, M_OVER_BUDGET, M_STOPPED, capacities, grow, grown_capacities, nbytes, new_arrays
from tests.batches import learn_in_batches
from tests.test_categories import id_stream
from tests.test_drift import flipping_stream


def wide_stream(n: int, seed: int = 0) -> list[tuple[dict, object]]:
    """Numbers, a nominal feature with a new value every example, a feature and classes that
    first appear mid-stream: every size the budget counts grows within a batch."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        x = {"a": rng.random(), "b": rng.random(), "tag": f"t{i}", "c": rng.choice("pqr")}
        if i > n // 3:
            x["late"] = rng.random()
        y = "hi" if x["a"] > 0.6 else ("lo" if x["b"] < 0.5 or i < n // 2 else f"k{i % 5}")
        out.append((x, y))
    return out


def test_bytes_are_counted_as_grow_makes_the_arrays() -> None:
    rng = random.Random(0)
    for _ in range(200):
        nb, lin = rng.random() < 0.5, rng.random() < 0.5
        t = new_arrays(naive_bayes=nb, linear=lin)
        for _ in range(rng.randrange(1, 4)):
            need = {
                "nodes": rng.randrange(100),
                "slots": rng.randrange(20),
                "classes": rng.randrange(9),
                "numeric": rng.randrange(9),
                "nominal": rng.randrange(5),
                "values": rng.randrange(40),
            }
            caps = grown_capacities(t, **need)
            t = grow(t, **need)
            assert caps == capacities(t)
            assert nbytes(caps, nb, lin) == memory_bytes(t)


def test_a_small_budget_stops_growth_and_the_tree_keeps_counting() -> None:
    data = id_stream(4000)
    model = ProbabilityTree(max_bytes=2**18)
    learn_in_batches(model, data[:3000], [250])
    assert model.growth_stopped
    summary = model.summary()
    assert summary["growth_stop"] == "max_bytes" and summary["max_bytes"] == 2**18
    assert memory_bytes(model.state.tree) <= 2**18
    assert summary["notes"][-1] == (
        "The tree stopped growing rather than pass max_bytes=262,144: leaves keep counting, without split statistics."
    )
    t = model.state.tree
    assert t.meta[M_OVER_BUDGET] == 1 and t.meta[M_STOPPED] == 1 and t.slot_seen.shape[0] == 1
    nodes, counts = model.n_nodes, model.counts_.sum()
    before = model.predict_proba([x for x, _ in data[:20]])
    learn_in_batches(model, data[3000:], [250])
    assert model.n_nodes == nodes and model.counts_.sum() > counts
    assert not np.array_equal(model.predict_proba([x for x, _ in data[:20]]), before)
    assert memory_bytes(model.state.tree) <= 2**18


@pytest.mark.parametrize("budget", [2**19, 2**20, 2**21])
def test_the_budget_stops_at_the_same_row_whatever_the_batch_boundaries(budget: int) -> None:
    """New values, classes and a feature arrive inside batches, so a batch's arrays are larger
    than one example's at the same row: the budget is counted on the rows learned so far, and
    a batch is learned in parts cut where one example at a time would fit the arrays to larger
    capacities (which may stop growth). (At 2**17 this stream's values, without bound, are
    refused before its end: tests/test_budget_shapes.py.)"""
    data = wide_stream(1500)
    config = {"max_categories": None, "max_bytes": budget, "grace_period": 10}
    one = ProbabilityTree(**config)
    for x, y in data:
        one.learn_one(x, y)
    assert one.summary()["growth_stop"] == "max_bytes"
    for sizes in ([500], [37, 250], [1499, 1]):
        many = learn_in_batches(ProbabilityTree(**config), data, sizes)
        assert many.to_bytes() == one.to_bytes(), sizes


def test_a_forest_member_stops_alike() -> None:
    data = wide_stream(1200)
    tree = {"max_categories": None, "max_bytes": 2**19}
    one = ProbabilityForest(n_trees=3, seed=4, tree=tree)
    for x, y in data:
        one.learn_one(x, y)
    many = learn_in_batches(ProbabilityForest(n_trees=3, seed=4, tree=tree), data, [400, 33])
    assert many.to_bytes() == one.to_bytes()
    summary = one.summary()
    assert summary["growth_stop"] == {"max_bytes": 3}
    assert [m["growth_stop"] for m in summary["members"]] == ["max_bytes"] * 3
    assert "3 of 3 trees stopped growing rather than pass max_bytes=524,288" in summary["notes"][-1]


def test_a_stopped_tree_round_trips_and_learns_on_alike() -> None:
    data = id_stream(3000)
    model = learn_in_batches(ProbabilityTree(max_bytes=2**17), data[:2000], [500])
    assert model.summary()["growth_stop"] == "max_bytes"
    again = ProbabilityTree.from_bytes(model.to_bytes())
    assert again.to_bytes() == model.to_bytes() and again.state.tree.meta[M_OVER_BUDGET] == 1
    for m in (model, again):
        learn_in_batches(m, data[2000:], [300])
    assert again.to_bytes() == model.to_bytes()


def test_a_background_tree_has_its_own_budget() -> None:
    """After a change the tree (stopped by its budget) is compared with a background tree that
    grows within the same budget and may replace it; the same bits one example at a time."""
    data = flipping_stream(6000, flip=3000)
    config = {"max_bytes": 2**17, "grace_period": 10}
    one = ProbabilityTree(**config)
    for x, y in data:
        one.learn_one(x, y)
    assert one.drift_summary()["n_detections"] >= 1
    many = learn_in_batches(ProbabilityTree(**config), data, [500])
    assert many.to_bytes() == one.to_bytes()
    assert memory_bytes(one.state.tree) <= 2**17


def test_the_default_budget_changes_nothing_on_an_ordinary_stream() -> None:
    data = wide_stream(2000)
    budget = learn_in_batches(ProbabilityTree(max_categories=None), data, [400])
    none = learn_in_batches(ProbabilityTree(max_categories=None, max_bytes=None), data, [400])
    for a, b in zip(budget.state.tree, none.state.tree):
        assert np.array_equal(a, b)


def test_a_tree_stopped_at_max_nodes_says_so_and_is_not_shrunk() -> None:
    model = learn_in_batches(ProbabilityTree(max_nodes=15, max_bytes=2**22), id_stream(3000), [300])
    summary = model.summary()
    assert summary["growth_stop"] == "max_nodes"
    assert summary["notes"][-1] == (
        "The tree stopped growing at max_nodes=15: leaves keep counting, without split statistics."
    )
    assert model.state.tree.meta[M_OVER_BUDGET] == 0


def test_stop_growth_frees_every_slot() -> None:
    t = grow(new_arrays(), nodes=64, slots=16, classes=3, numeric=4, nominal=2, values=9)
    stopped = stop_growth(t)
    assert stopped.meta[M_FREE] == 1 and stopped.free_slots.tolist() == [0]
    assert (stopped.node[: int(t.meta[0]), 6] == -1).all()
    assert capacities(stopped)[1:] == (1, *capacities(t)[2:])
    assert t.meta[M_STOPPED] == 0  # the arrays it was given are left as they were


def test_a_tree_stopped_at_max_nodes_saves_no_split_statistics() -> None:
    """Its slots are all free (an empty slot's statistics): the file stops the slots' statistics
    after the last slot a leaf holds, so it has none, and loads to the same arrays, bit for bit."""
    import io
    import json
    import struct

    from streamtree.persistence import MAGIC

    data = id_stream(4000)
    model = learn_in_batches(ProbabilityTree(max_nodes=15), data[:3000], [300])
    assert model.summary()["growth_stop"] == "max_nodes"
    saved = model.to_bytes()
    (size,) = struct.unpack(">I", saved[len(MAGIC) : len(MAGIC) + 4])
    assert json.loads(saved[len(MAGIC) + 4 : len(MAGIC) + 4 + size])["version"] == 4
    with np.load(io.BytesIO(saved[len(MAGIC) + 4 + size :])) as archive:
        assert [archive[f"tree.{name}"].shape[0] for name in ("num_stats", "num_range", "nom_stats")] == [0, 0, 0]
        assert archive["tree.slot_seen"].shape[0] == model.state.tree.slot_seen.shape[0]
    again = ProbabilityTree.from_bytes(saved)
    for a, b in zip(model.state.tree, again.state.tree, strict=True):
        assert a.dtype == b.dtype and np.array_equal(a, b, equal_nan=a.dtype.kind == "f")
    for m in (model, again):
        learn_in_batches(m, data[3000:], [250])
    assert again.to_bytes() == model.to_bytes()
