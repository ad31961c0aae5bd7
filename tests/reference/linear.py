"""The linear component in plain Python: the slow twin of :mod:`streamtree.kernels.linear`.

One multinomial logistic regression on the standardised numeric features, learned by AdaGrad
from every example, and a log-linear pool of the tree's probabilities with the regression's,

.. math::

    p_k \\propto \\exp(a \\log p^{tree}_k + (b + c u) \\log p^{lr}_k), \\qquad u = 1 - \\max_j p^{tree}_j,

whose weights are fitted by projected Newton steps on the last ``WINDOW`` examples as they were
predicted before being learned, pulled toward ``(1, 0, 0)`` (the tree alone). Lists of floats and
``math`` only, operation for operation as the kernels do them, so the two agree bit for bit.

Examples
--------
>>> lc = LinearComponent(n_numeric=1, n_classes=2)
>>> for i in range(200):
...     x = [float(i % 10)]
...     lc.learn(x, int(x[0] >= 5))
>>> p = lc.proba([9.0])
>>> p[1] > 0.9
True
"""

from __future__ import annotations

import math

from streamtree.kernels.linear import (
    CLIP,
    ETA,
    L2,
    MIX_EVERY,
    MIX_EVERY_SETTLED,
    MIX_SETTLE,
    NEWTON_STEPS,
    PRIOR,
    RIDGE,
)
from streamtree.state import WINDOW


def softmax(s: list[float]) -> list[float]:
    top = max(s)
    e = [math.exp(v - top) for v in s]
    total = 0.0
    for v in e:
        total += v
    return [v / total for v in e]


class LinearComponent:
    """The regression's weights, the running scales and the pool's window."""

    def __init__(self, n_numeric: int, n_classes: int) -> None:
        self.n_numeric, self.n_classes = n_numeric, n_classes
        self.w = [[0.0] * n_numeric for _ in range(n_classes)]
        self.g = [0.0] * n_numeric  # one AdaGrad accumulator a column
        self.bias = [0.0] * n_classes
        self.bias_g = [0.0] * n_classes
        self.scale = [[0.0, 0.0, 0.0] for _ in range(n_numeric)]  # n, mean, m2
        self.window: list[tuple[list[float], list[float], int, float] | None] = [None] * WINDOW
        self.n_scored = 0
        self.a, self.b, self.c = 1.0, 0.0, 0.0

    def standardise(self, x: list[float]) -> list[float]:
        z = []
        for f in range(self.n_numeric):
            n, mean, m2 = self.scale[f]
            v = 0.0
            if not math.isnan(x[f]) and n > 1.0 and m2 > 0.0:
                v = min(max((x[f] - mean) / math.sqrt(m2 / (n - 1.0)), -CLIP), CLIP)
            z.append(v)
        return z

    def proba(self, x: list[float], z: list[float] | None = None) -> list[float]:
        """The regression's probabilities."""
        z = self.standardise(x) if z is None else z
        s = []
        for k in range(self.n_classes):
            v = self.bias[k]
            for f in range(self.n_numeric):
                v += self.w[k][f] * z[f]
            s.append(v)
        return softmax(s)

    def learn(self, x: list[float], y: int) -> None:
        """One AdaGrad step on ``(x, y)``, then Welford's update of the scales."""
        z = self.standardise(x)
        q = self.proba(x, z)
        for k in range(self.n_classes):
            r = q[k] - (1.0 if k == y else 0.0)
            self.bias_g[k] += r * r
            self.bias[k] -= ETA * r / math.sqrt(self.bias_g[k] + 1e-8)
        for f in range(self.n_numeric):
            grads = [(q[k] - (1.0 if k == y else 0.0)) * z[f] + L2 * self.w[k][f] for k in range(self.n_classes)]
            total = 0.0
            for g in grads:
                total += g * g
            self.g[f] += total / self.n_classes
            step = ETA / math.sqrt(self.g[f] + 1e-8)
            for k in range(self.n_classes):
                self.w[k][f] -= step * grads[k]
        for f in range(self.n_numeric):
            if math.isnan(x[f]):
                continue
            n = self.scale[f][0] + 1.0
            d = x[f] - self.scale[f][1]
            mean = self.scale[f][1] + d / n
            m2 = self.scale[f][2] + d * (x[f] - mean)
            if not (math.isfinite(mean) and math.isfinite(m2)):  # an overflow: the value is left out
                continue
            self.scale[f] = [n, mean, m2]

    @staticmethod
    def uncertainty(p_tree: list[float]) -> float:
        return 1.0 - max([0.0, *p_tree])

    def pool(self, p_tree: list[float], p_lr: list[float]) -> list[float]:
        a, b = self.a, self.b
        if (a, b, self.c) != (1.0, 0.0, 0.0):
            b = b + self.c * self.uncertainty(p_tree)
        return softmax([a * math.log(max(pt, 1e-15)) + b * math.log(max(pl, 1e-15)) for pt, pl in zip(p_tree, p_lr)])

    def score(self, p_tree: list[float], p_lr: list[float], y: int) -> None:
        """Keep a prequential example in the window; refit every ``MIX_EVERY`` for the first
        ``MIX_SETTLE``, then every ``MIX_EVERY_SETTLED``."""
        self.window[self.n_scored % WINDOW] = (
            [math.log(max(p, 1e-15)) for p in p_tree],
            [math.log(max(p, 1e-15)) for p in p_lr],
            y,
            self.uncertainty(p_tree),
        )
        self.n_scored += 1
        every = MIX_EVERY if self.n_scored <= MIX_SETTLE else MIX_EVERY_SETTLED
        if self.n_scored % every == 0:
            self.a, self.b, self.c = self.fit(self.a, self.b, self.c)

    def fit(self, a: float, b: float, c: float) -> tuple[float, float, float]:
        """Newton steps over the features ``(A, B, u B)``; the 3x3 system by cofactors."""
        rows = [r for r in self.window[: min(self.n_scored, WINDOW)] if r is not None]
        m = len(rows)
        if m == 0:
            return a, b, c
        for _ in range(NEWTON_STEPS):
            g0 = g1 = g2 = h00 = h01 = h02 = h11 = h12 = h22 = 0.0
            for la, lb, y, unc in rows:
                q = softmax([a * u + (b + c * unc) * v for u, v in zip(la, lb)])
                e0 = e1 = e00 = e01 = e11 = 0.0
                for k in range(len(q)):
                    p = q[k]
                    e0 += p * la[k]
                    e1 += p * lb[k]
                    e00 += p * la[k] * la[k]
                    e01 += p * la[k] * lb[k]
                    e11 += p * lb[k] * lb[k]
                g0 += e0 - la[y]
                g1 += e1 - lb[y]
                g2 += unc * (e1 - lb[y])
                v00, v01, v11 = e00 - e0 * e0, e01 - e0 * e1, e11 - e1 * e1
                h00 += v00
                h01 += v01
                h02 += unc * v01
                h11 += v11
                h12 += unc * v11
                h22 += unc * unc * v11
            g0 += PRIOR * (a - 1.0)
            g1 += PRIOR * b
            g2 += PRIOR * c
            ridge = PRIOR + RIDGE * m
            h00 += ridge
            h11 += ridge
            h22 += ridge
            c00, c01, c02 = h11 * h22 - h12 * h12, h02 * h12 - h01 * h22, h01 * h12 - h11 * h02
            c11, c12, c22 = h00 * h22 - h02 * h02, h01 * h02 - h00 * h12, h00 * h11 - h01 * h01
            det = h00 * c00 + h01 * c01 + h02 * c02
            a = a - (c00 * g0 + c01 * g1 + c02 * g2) / det
            b = b - (c01 * g0 + c11 * g1 + c12 * g2) / det
            c = c - (c02 * g0 + c12 * g1 + c22 * g2) / det
            a = min(max(a, 0.0), 1.0)
            b = max(b, 0.0)
            c = max(c, 0.0)
        return a, b, c
