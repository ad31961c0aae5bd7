"""How every model's predictions are scored, identically.

A prediction is a dict ``{label: p}``. River's trees can return 0 for a class (and leave out
classes a leaf never saw), which makes log loss infinite; so for *every* model: the
probabilities of all labels the stream has shown so far are read (absent ones as 0), clipped
at 1e-15, and renormalised. The first example of each label is unpredictable for every model
and is not scored (it is counted). Log loss is in nats; Brier is the sum over the known labels
of ``(p_k - [y = k])^2``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

EPS = 1e-15


@dataclass
class Score:
    labels: list = field(default_factory=list)
    n: int = 0
    unscored: int = 0
    log_loss: float = 0.0
    brier: float = 0.0
    correct: int = 0
    # per scored example, for reliability diagrams and windowed curves; scored_at is the
    # example's index in the stream (unscored examples leave gaps)
    losses: list[float] = field(default_factory=list)
    scored_at: list[int] = field(default_factory=list)
    top_p: list[float] = field(default_factory=list)
    top_hit: list[bool] = field(default_factory=list)

    def update(self, y: object, proba: dict) -> None:
        if y not in self.labels:
            self.labels.append(y)
            self.unscored += 1
            return
        p = np.array([max(float(proba.get(label, 0.0)), EPS) for label in self.labels])
        p /= p.sum()
        i = self.labels.index(y)
        loss = -math.log(p[i])
        self.n += 1
        self.log_loss += loss
        target = np.zeros(len(p))
        target[i] = 1.0
        self.brier += float(((p - target) ** 2).sum())
        top = int(np.argmax(p))
        self.correct += top == i
        self.losses.append(loss)
        self.scored_at.append(self.n + self.unscored - 1)
        self.top_p.append(float(p[top]))
        self.top_hit.append(top == i)

    def per_example_losses(self) -> np.ndarray:
        """Log loss of every example seen, in stream order; NaN where it was not scored."""
        out = np.full(self.n + self.unscored, np.nan)
        out[np.array(self.scored_at, dtype=int)] = self.losses
        return out

    def result(self) -> dict[str, float]:
        n = max(self.n, 1)
        return {
            "log_loss": self.log_loss / n,
            "brier": self.brier / n,
            "accuracy": self.correct / n,
            "scored": self.n,
            "unscored": self.unscored,
        }
