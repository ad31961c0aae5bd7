"""The drift policy: when a background tree starts, replaces the tree, or is dropped."""

from __future__ import annotations

import json
import math

from streamtree import ProbabilityTree
from streamtree.adaptation import MARGIN, MIN_COMPARE, Adaptation


def started(patience: int = 500) -> Adaptation:
    adaptation = Adaptation(delta=0.002, patience=patience)
    assert adaptation.decide(detected=True, at=1000) == "start"
    adaptation.started(ProbabilityTree(drift_delta=None))
    return adaptation


def test_nothing_happens_without_a_detection() -> None:
    adaptation = Adaptation(delta=0.002, patience=500)
    assert [adaptation.decide(detected=False, at=i) for i in range(100)] == [None] * 100
    assert adaptation.summary()["n_detections"] == 0


def test_the_background_tree_is_adopted_only_after_enough_examples_where_it_is_better() -> None:
    adaptation = started()
    for i in range(MIN_COMPARE - 1):
        adaptation.compare(p_tree=0.2, p_background=0.8)
        assert adaptation.decide(detected=False, at=1001 + i) is None  # too few examples yet
    adaptation.compare(p_tree=0.2, p_background=0.8)
    assert adaptation.decide(detected=False, at=1100) == "adopt"
    adaptation.background.n_examples = 100  # type: ignore[union-attr]
    adaptation.adopted(at=1100)
    summary = adaptation.summary()
    assert summary["n_swaps"] == 1 and summary["tree_since"] == 1000 and summary["background"] is None
    assert adaptation.detector.width == 0  # a new tree: a new error stream


def test_a_slightly_better_background_tree_must_first_clear_the_margin() -> None:
    adaptation = started()
    per_example = math.log(0.55 / 0.5)
    needed = math.floor(MARGIN / per_example) + 1  # the first count whose gap exceeds the margin
    actions = []
    for i in range(needed):
        adaptation.compare(p_tree=0.5, p_background=0.55)
        actions.append(adaptation.decide(detected=False, at=1001 + i))
    assert actions[-1] == "adopt" and set(actions[:-1]) == {None}
    assert adaptation.gap > MARGIN


def test_a_worse_background_tree_is_dropped_after_patience_and_a_new_detection_restarts_one() -> None:
    adaptation = started(patience=300)
    actions = []
    for i in range(300):
        adaptation.compare(p_tree=0.9, p_background=0.5)
        actions.append(adaptation.decide(detected=False, at=1001 + i))
    assert actions[-1] == "drop" and set(actions[:-1]) == {None}
    assert adaptation.background is None and adaptation.summary()["n_dropped"] == 1
    assert adaptation.decide(detected=True, at=2000) == "start"


def test_a_detection_while_a_background_tree_runs_is_counted_but_keeps_it() -> None:
    adaptation = started()
    assert adaptation.decide(detected=True, at=1050) is None
    assert adaptation.summary()["n_detections"] == 2
    assert adaptation.background is not None


def test_events_are_bounded_and_the_state_round_trips_through_json() -> None:
    adaptation = started()
    for i in range(40):
        adaptation.decide(detected=True, at=2000 + i)
    assert len(adaptation.summary()["events"]) == 20
    state = adaptation.to_state()
    scalars = json.loads(json.dumps({k: v for k, v in state.items() if not hasattr(v, "shape")}))
    again = Adaptation(delta=0.002, patience=500)
    again.set_state({**scalars, **{k: v for k, v in state.items() if hasattr(v, "shape")}})
    again.background = adaptation.background
    assert again.summary() == adaptation.summary()
