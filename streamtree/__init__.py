"""streamtree: calibrated class probabilities from a single online decision tree.

>>> from streamtree import ProbabilityTree
>>> model = ProbabilityTree()
>>> model.learn_one({"x": 1.0}, "a")
>>> model.predict_proba_one({"x": 1.0})
{'a': 1.0}
"""

from collections.abc import Hashable
from typing import Any

from streamtree.decision import CostMatrix, Decision, Decisions, decide, decide_many
from streamtree.exceptions import ConfigError, DecisionError, FormatError, InputError, StreamtreeError
from streamtree.forest import METHODS, ProbabilityForest
from streamtree.tree import ProbabilityTree

__all__ = ["ConfigError", "CostMatrix", "Decision", "DecisionError", "Decisions", "FormatError", "InputError",
           "ProbabilityForest", "ProbabilityTree", "StreamtreeError", "decide", "decide_many", "load", "warm_up"]
__version__ = "0.1.0"


def warm_up() -> None:
    """Compile (or load from the on-disk cache) every kernel a model uses, so the first real
    event does not pay for it: learns and predicts a few synthetic examples on throw-away
    models of every smoothing, with drift detection and the naive-Bayes factor on, on a
    concept that flips after 200 examples (so a change is detected and the kernel that
    compares a background tree with the tree is compiled too), and a small forest of each
    method."""
    rows: list[dict[Hashable, Any]] = [{"a": float(i % 7), "b": "xyz"[i % 3]} for i in range(300)]
    labels = [(i % 7 < 3) == (i < 200) for i in range(300)]
    for smoothing in ("hgs", "mbranch", "mestimate", "laplace", "mle"):
        model = ProbabilityTree(smoothing=smoothing, naive_bayes=smoothing == "hgs", grace_period=5, refit_every=10)
        model.learn_many(rows[:20], labels[:20], return_proba=True)
        for x, label in zip(rows[20:], labels[20:]):
            model.predict_proba_one(x)
            model.learn_one(x, label)
        model.predict_proba(rows)
        model.explain_one(rows[0])
        model.summary()
        ProbabilityTree.from_bytes(model.to_bytes())
    for method in METHODS:  # the randomized splitters and the samplings
        forest = ProbabilityForest(n_trees=2, method=method, tree={"grace_period": 5, "refit_every": 10})
        forest.learn_many(rows, labels, return_proba=True)
        forest.predict_proba_one(rows[0])
        forest.learn_one(rows[0], labels[0])
        forest.predict_proba(rows)
        forest.explain_one(rows[0])
        load(forest.to_bytes())


def load(data: bytes) -> ProbabilityTree | ProbabilityForest:
    """Read a model written by ``to_bytes`` of a :class:`ProbabilityTree` or a
    :class:`ProbabilityForest`, whichever it is (:class:`FormatError` for anything else)."""
    from streamtree.persistence import load_any

    return load_any(data)
