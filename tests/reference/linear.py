"""The linear component in plain Python: the slow twin of :mod:`streamtree.kernels.linear`.

One multinomial logistic regression on the standardised numeric features, learned by AdaGrad
from every example, and a log-linear pool of the tree's probabilities with the regression's,

.. math::

    p_k \\propto \\exp(a \\log p^{tree}_k + b \\log p^{lr}_k),

whose weights are fitted by projected Newton steps on the last ``WINDOW`` examples as they were
predicted before being learned, pulled toward ``(1, 0)`` (the tree alone). Lists of floats and
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

from streamtree.kernels.linear import CLIP, ETA, L2, MIX_EVERY, NEWTON_STEPS, PRIOR, RIDGE
from streamtree.state import WINDOW


class LinearComponent:
    """The regression's weights, the running scales and the pool's window."""

    def __init__(self, n_numeric: int, n_classes: int) -> None:
        self.n_numeric, self.n_classes = n_numeric, n_classes
        self.w = [[0.0] * n_numeric for _ in range(n_classes)]
        self.g = [0.0] * n_numeric  # one AdaGrad accumulator a column
        self.bias = [0.0] * n_classes
        self.bias_g = [0.0] * n_classes
        self.scale = [[0.0, 0.0, 0.0] for _ in range(n_numeric)]  # n, mean, m2
        self.window: list[tuple[list[float], list[float], int] | None] = [None] * WINDOW
        self.n_scored = 0
        self.a, self.b = 1.0, 0.0

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
        top = max(s)
        e = [math.exp(v - top) for v in s]
        total = 0.0
        for v in e:
            total += v
        return [v / total for v in e]

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
            self.scale[f][0] = n
            self.scale[f][1] += d / n
            self.scale[f][2] += d * (x[f] - self.scale[f][1])

    @staticmethod
    def pool(p_tree: list[float], p_lr: list[float], a: float, b: float) -> list[float]:
        s = [a * math.log(max(pt, 1e-15)) + b * math.log(max(pl, 1e-15)) for pt, pl in zip(p_tree, p_lr)]
        top = max(s)
        e = [math.exp(v - top) for v in s]
        total = 0.0
        for v in e:
            total += v
        return [v / total for v in e]

    def score(self, p_tree: list[float], p_lr: list[float], y: int) -> None:
        """Keep a prequential example in the window; refit every ``MIX_EVERY``."""
        self.window[self.n_scored % WINDOW] = ([math.log(max(p, 1e-15)) for p in p_tree],
                                               [math.log(max(p, 1e-15)) for p in p_lr], y)
        self.n_scored += 1
        if self.n_scored % MIX_EVERY == 0:
            self.a, self.b = self.fit(self.a, self.b)

    def fit(self, a: float, b: float) -> tuple[float, float]:
        rows = [r for r in self.window[: min(self.n_scored, WINDOW)] if r is not None]
        m = len(rows)
        if m == 0:
            return a, b
        for _ in range(NEWTON_STEPS):
            ga = gb = haa = hab = hbb = 0.0
            for la, lb, y in rows:
                s = [a * u + b * v for u, v in zip(la, lb)]
                top = max(s)
                e = [math.exp(v - top) for v in s]
                total = 0.0
                for v in e:
                    total += v
                ea = eb = eaa = eab = ebb = 0.0
                for k in range(len(s)):
                    p = e[k] / total
                    ea += p * la[k]
                    eb += p * lb[k]
                    eaa += p * la[k] * la[k]
                    eab += p * la[k] * lb[k]
                    ebb += p * lb[k] * lb[k]
                ga += ea - la[y]
                gb += eb - lb[y]
                haa += eaa - ea * ea
                hab += eab - ea * eb
                hbb += ebb - eb * eb
            ga += PRIOR * (a - 1.0)
            gb += PRIOR * b
            haa += PRIOR + RIDGE * m
            hbb += PRIOR + RIDGE * m
            det = haa * hbb - hab * hab
            a, b = a - (hbb * ga - hab * gb) / det, b - (haa * gb - hab * ga) / det
            a = min(max(a, 0.0), 1.0)
            b = max(b, 0.0)
        return a, b
