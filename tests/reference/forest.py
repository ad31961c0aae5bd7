"""The forest as it learned before its compiled path: one call per member (a slow reference).

:class:`LoopForest` is :class:`~streamtree.ProbabilityForest` with its learning, prediction
and sampling as they were when each member learned and predicted in its own call (each
member's ``ProbabilityTree._learn`` and ``_predict``, probabilities summed in numpy, the
repetitions drawn with numpy's ``searchsorted``). The compiled path
(:mod:`streamtree.kernels.forest`) must give the same bits.
"""

from __future__ import annotations

import numpy as np

from streamtree import ProbabilityForest
from streamtree.forest import _BAGGING, _DISJOINT, _POISSON_CDF
from streamtree.kernels.randomness import uniforms
from streamtree.typing import ClassLabel, FloatArray


class LoopForest(ProbabilityForest):
    """A forest whose members learn and predict one Python call each."""

    def _reps(self, n: int) -> np.ndarray:
        first = self.n_examples
        if self._sampling == "all":
            return np.ones((self.n_trees, n), dtype=np.int64)
        if self._sampling == "disjoint":
            owner = np.minimum((uniforms(self.seed, 0, first, n, _DISJOINT) * self.n_trees).astype(np.int64),
                               self.n_trees - 1)
            return (owner[None, :] == np.arange(self.n_trees)[:, None]).astype(np.int64)
        reps = np.empty((self.n_trees, n), dtype=np.int64)
        for t in range(self.n_trees):
            reps[t] = np.searchsorted(_POISSON_CDF, uniforms(self.seed, t + 1, first, n, _BAGGING), side="right")
        return reps

    def _learn(self, num: np.ndarray, nom: np.ndarray, labels: list[ClassLabel], first_values: dict[int, float],
               want_proba: bool) -> FloatArray | None:
        reps = self._reps(len(labels))
        total: FloatArray | None = None
        for member, member_reps in zip(self.members, reps):
            proba = member._learn(num, nom, labels, first_values, want_proba, member_reps)
            if want_proba:
                assert proba is not None
                total = proba if total is None else total + proba
        self.n_examples += len(labels)
        return total / self.n_trees if total is not None else None

    def _predict(self, num: np.ndarray, nom: np.ndarray) -> FloatArray:
        total = self.members[0]._predict(num, nom)
        for member in self.members[1:]:
            total = total + member._predict(num, nom)
        return total / self.n_trees
