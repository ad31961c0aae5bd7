"""The forest as it learned before its compiled path: one call per member (a slow reference).

:class:`LoopForest` is :class:`~streamtree.ProbabilityForest` with its learning, prediction
and sampling as they were when each member learned and predicted in its own call (each
member's ``ProbabilityTree._learn`` and ``_predict``, probabilities summed in numpy, the
repetitions drawn with numpy's ``searchsorted``), and the members weighed row by row in
Python from their prequential predictions. The compiled path (:mod:`streamtree.kernels.forest`)
must give the same bits.
"""

from __future__ import annotations

import math

import numpy as np

from streamtree import ProbabilityForest
from streamtree.forest import WEIGHT_DECAY, WEIGHT_FLOOR, poisson_cdf
from streamtree.kernels.forest import BAGGING_STREAM, DISJOINT_STREAM
from streamtree.kernels.randomness import uniforms
from streamtree.typing import ClassLabel, FloatArray


class LoopForest(ProbabilityForest):
    """A forest whose members learn and predict one Python call each."""

    def repetitions(self, n: int) -> np.ndarray:
        first = self.n_examples
        if self._sampling == "all":
            return np.ones((self.n_trees, n), dtype=np.int64)
        if self._sampling == "disjoint":
            owner = np.minimum(
                (uniforms(self.seed, 0, first, n, DISJOINT_STREAM) * self.n_trees).astype(np.int64), self.n_trees - 1
            )
            return (owner[None, :] == np.arange(self.n_trees)[:, None]).astype(np.int64)
        reps = np.empty((self.n_trees, n), dtype=np.int64)
        for t in range(self.n_trees):
            reps[t] = np.searchsorted(
                poisson_cdf(self.get_config()["poisson_rate"]),
                uniforms(self.seed, t + 1, first, n, BAGGING_STREAM),
                side="right",
            )
        return reps

    def _weights(self) -> tuple[list[float], float]:
        low = min(self.loss_.tolist())
        weights = [math.exp(-self._eta * (loss - low)) for loss in self.loss_.tolist()]
        total = 0.0
        for w in weights:
            total += w
        return weights, total

    def _learn(
        self,
        num: np.ndarray,
        nom: np.ndarray,
        labels: list[ClassLabel],
        first_values: dict[int, float],
        want_proba: bool,
    ) -> FloatArray | None:
        reps = self.repetitions(len(labels))
        probas = []
        for member, member_reps in zip(self.members, reps):
            proba = member._learn(num, nom, labels, first_values, True, member_reps)
            assert proba is not None
            probas.append(proba)
        self.n_examples += len(labels)
        column = {c: i for i, c in enumerate(self.classes_)}
        out = np.empty((len(labels), len(self.classes_)))
        for r, label in enumerate(labels):
            weights, total = self._weights()
            for c in range(len(self.classes_)):
                acc = 0.0
                for w, proba in zip(weights, probas):
                    acc += w * float(proba[r, c])
                out[r, c] = acc / total
            if self.weighted:
                # each learner's loss relative to the weighted mean of the learners', capped
                learners = [m for m in range(len(probas)) if reps[m][r] > 0]
                if learners:
                    acc = learned = 0.0
                    for m in learners:
                        acc += weights[m] * float(probas[m][r, column[label]])
                        learned += weights[m]
                    q = max(acc / learned, 1e-15)
                    for m in learners:
                        p = float(probas[m][r, column[label]])
                        relative = -math.log(max(p / q, WEIGHT_FLOOR))
                        self.loss_[m] = WEIGHT_DECAY * self.loss_[m] + (1.0 - WEIGHT_DECAY) * relative
        return out if want_proba else None

    def _predict(self, num: np.ndarray, nom: np.ndarray) -> FloatArray:
        weights, total = self._weights()
        acc = weights[0] * self.members[0]._predict(num, nom)
        for w, member in zip(weights[1:], self.members[1:]):
            acc = acc + w * member._predict(num, nom)
        return acc / total
