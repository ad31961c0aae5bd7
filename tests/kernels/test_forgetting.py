"""Forgetting (``half_life``): every refit scales the counts; a growing leaf's split statistics
miss the passes until the leaf next learns (``slot_seen[slot, BEHIND]``), and ``catch_up``
then applies them at once."""

from __future__ import annotations

import math

import numpy as np

from streamtree import ProbabilityTree
from streamtree.kernels.handle import tree_handle
from streamtree.kernels.refit import catch_up
from streamtree.state import BEHIND, KIND, LEAF, N_, Q_, S_, SLOT

REFIT, HALF_LIFE = 50, 100
FACTOR = 0.5 ** (REFIT / HALF_LIFE)  # one pass


def forgetting(**config: object) -> ProbabilityTree:
    return ProbabilityTree(refit_every=REFIT, half_life=HALF_LIFE, linear=False, drift_delta=None, **config)  # type: ignore[arg-type]


def growing_slots(model: ProbabilityTree) -> list[int]:
    t = model.state.tree
    n = model.summary()["n_nodes"]
    return [int(t.node[i, SLOT]) for i in range(n) if t.node[i, KIND] == LEAF and t.node[i, SLOT] >= 0]


def test_catch_up_applies_the_missed_passes_at_once() -> None:
    model = forgetting(grace_period=10**6)
    for i in range(30):
        model.learn_one({"a": float(i % 7), "b": float(i % 3)}, i % 2 == 0)
    t = model.state.tree
    (slot,) = growing_slots(model)
    before_num, before_nom = t.num_stats[slot].copy(), t.nom_stats[slot].copy()
    assert before_num.any()
    t.slot_seen[slot, BEHIND] = 3.0
    catch_up(tree_handle(t), model.state.cfg_i, slot)
    scale = math.pow(FACTOR, 3.0)
    assert t.num_stats[slot].tobytes() == (before_num * scale).tobytes()
    assert t.nom_stats[slot].tobytes() == (before_nom * scale).tobytes()
    assert t.slot_seen[slot, BEHIND] == 0.0
    again = t.num_stats[slot].copy()
    catch_up(tree_handle(t), model.state.cfg_i, slot)  # nothing missed: nothing changes
    assert t.num_stats[slot].tobytes() == again.tobytes()


def test_a_leaf_that_learns_after_every_pass_has_the_eager_bits() -> None:
    """One leaf that never splits learns every example: each pass is applied at the next
    example, one factor at a time, exactly as scaling the statistics at the pass would."""
    model = forgetting(grace_period=10**6)
    rng = np.random.default_rng(3)
    xs = rng.normal(size=350)
    expected = np.zeros(3)  # N, S, Q of feature "a", class True, scaled at each pass
    shift = None
    for m, x in enumerate(xs, start=1):
        model.learn_one({"a": float(x)}, True)
        if shift is None:
            shift = float(model.state.tree.shift[0])
        v = float(x) - shift
        expected += [1.0, v, v * v]
        if m % REFIT == 0:
            expected *= FACTOR
    (slot,) = growing_slots(model)
    t = model.state.tree
    assert t.slot_seen[slot, BEHIND] == 1.0  # the pass after the last example: not applied yet
    k = model.class_index[True]
    catch_up(tree_handle(t), model.state.cfg_i, slot)
    got = t.num_stats[slot, 0, k, [N_, S_, Q_]]
    assert got.tobytes() == expected.tobytes()


def test_a_leaf_that_waits_gets_its_passes_with_its_next_example() -> None:
    model = forgetting(grace_period=20)
    for i in range(200):  # a pure split on "a", then two pure leaves that never split again
        a = 0.2 if i % 2 else 0.8
        model.learn_one({"a": a}, a > 0.5)
    assert model.summary()["n_nodes"] == 3
    for _ in range(3 * REFIT):  # three passes, and only the left leaf learns
        model.learn_one({"a": 0.2}, False)
    t = model.state.tree
    # the right leaf missed the pass at 200 (its last example was the 199th) and the three
    # since; the left one only the pass after its last example
    assert sorted(t.slot_seen[s, BEHIND] for s in growing_slots(model)) == [1.0, 4.0]
    (slot,) = [s for s in growing_slots(model) if t.slot_seen[s, BEHIND] == 4.0]
    k = model.class_index[True]
    expected = t.num_stats[slot].copy() * math.pow(FACTOR, 4.0)
    v = 0.8 - float(t.shift[0])
    expected[0, k] += [1.0, v, v * v]
    model.learn_one({"a": 0.8}, True)
    assert t.slot_seen[slot, BEHIND] == 0.0
    assert t.num_stats[slot].tobytes() == expected.tobytes()


def test_without_half_life_no_pass_is_counted() -> None:
    model = ProbabilityTree(refit_every=REFIT, linear=False)
    for i in range(300):
        model.learn_one({"a": float(i % 11)}, i % 3 == 0)
    t = model.state.tree
    assert not t.slot_seen[:, BEHIND].any()
