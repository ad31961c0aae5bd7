"""Compiling the kernels before the first event: :func:`warm_up`, and whether this version's
compiled kernels are on disk already (:func:`kernels_cached`)."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from functools import partial
from pathlib import Path
from typing import Any

from streamtree.forest import METHODS, ProbabilityForest
from streamtree.persistence import load_any
from streamtree.tree import ProbabilityTree

__all__ = ["kernels_cached", "warm_up"]


def kernels_cached() -> bool:
    """Whether this version's compiled kernels are already in the on-disk cache
    (:data:`streamtree.kernels.CACHE_DIR`): if not, :func:`warm_up` compiles them, which takes
    minutes instead of seconds."""
    from streamtree.kernels import CACHE_DIR

    return any(Path(CACHE_DIR).rglob("*.nbi"))


def warm_up(progress: Callable[[int, int, str], None] | None = None) -> None:
    """Compile (or load from the on-disk cache) every kernel a model uses, so the first real
    event does not pay for it: learns and predicts a few synthetic examples on throw-away
    models of every smoothing, with drift detection and the naive-Bayes factor on, on a
    concept that flips after 200 examples (so a change is detected and the kernel that
    compares a background tree with the tree is compiled too), and a small forest of each
    method.

    ``progress(done, total, next_step)``, if given, is called before each step and once at
    the end (``done == total``, ``next_step == ""``).
    """
    rows: list[dict[Hashable, Any]] = [{"a": float(i % 7), "b": "xyz"[i % 3]} for i in range(300)]
    labels = [(i % 7 < 3) == (i < 200) for i in range(300)]

    def tree(smoothing: str) -> None:
        model = ProbabilityTree(smoothing=smoothing, naive_bayes=smoothing == "hgs", grace_period=5, refit_every=10)
        model.learn_many(rows[:20], labels[:20], return_proba=True)
        for x, label in zip(rows[20:], labels[20:]):
            model.predict_proba_one(x)
            model.learn_one(x, label)
        model.predict_proba(rows)
        model.explain_one(rows[0])
        model.summary()
        ProbabilityTree.from_bytes(model.to_bytes())

    def forest(method: str) -> None:  # the randomized splitters and the samplings
        model = ProbabilityForest(n_trees=2, method=method, tree={"grace_period": 5, "refit_every": 10})
        model.learn_many(rows, labels, return_proba=True)
        model.predict_proba_one(rows[0])
        model.learn_one(rows[0], labels[0])
        model.predict_proba(rows)
        model.explain_one(rows[0])
        load_any(model.to_bytes())

    steps: list[tuple[str, Callable[[], None]]] = [
        *((f"tree, smoothing={s!r}", partial(tree, s)) for s in ("hgs", "mbranch", "mestimate", "laplace", "mle")),
        *((f"forest, method={m!r}", partial(forest, m)) for m in METHODS),
    ]
    for done, (name, step) in enumerate(steps):
        if progress is not None:
            progress(done, len(steps), name)
        step()
    if progress is not None:
        progress(len(steps), len(steps), "")
