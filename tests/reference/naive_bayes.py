"""A tempered naive-Bayes factor on top of the smoothed leaf probabilities.

A tree's leaf knows only which region an example fell in; inside the region every feature
still carries information (on a linear concept, a lot). The factor adds it:

.. math::

    p(y \\mid x) \\;\\propto\\; p_{\\text{tree}}(y \\mid \\text{leaf}(x))
    \\prod_f p(x_f \\mid y)^{\\gamma}

with class-conditional feature models learned from *every* example (one set of statistics for
the whole tree, so they are estimated from thousands of examples, not the few of a leaf):
a Gaussian per numeric feature and class, its variance shrunk towards the feature's pooled
variance with ``NU`` pseudo-examples, and add-one value frequencies per nominal feature and
class. A feature whose statistics a class lacks is left out for that example.

The exponent ``gamma`` in ``[0, 1]`` tempers the factor: the features are not independent and
the leaf already used some of them, so the full product (``gamma = 1``) would be overconfident,
and ``gamma = 0`` is the tree alone. It is fitted, not set: every ``SAMPLE_EVERY``-th example is
scored *before* it is learned (the tree's log probabilities ``a`` and the factor's log
likelihoods ``b``), the last ``BUFFER`` of those are kept, and each refit takes Newton steps on
their log loss

.. math::

    L(\\gamma) = \\sum_i \\operatorname{logsumexp}_k(a_{ik} + \\gamma b_{ik}) - a_{iy_i} - \\gamma b_{iy_i},
    \\quad L' = \\sum_i \\mathbb{E}_{q_i}[b_i] - b_{iy_i}, \\quad L'' = \\sum_i \\operatorname{Var}_{q_i}[b_i] \\ge 0,

which is convex in ``gamma`` (``q_i`` the tempered prediction), so the steps are safe. Where the
factor does not help (e.g. SEA, whose concept is a threshold on a sum of two features), the
fitted ``gamma`` stays near 0.

The feature models' parameters are recomputed from the statistics at each refit
(:meth:`NaiveBayesFactor.refresh`) and kept, so a prediction costs a few array operations.

Examples
--------
>>> import numpy as np
>>> nb = NaiveBayesFactor()
>>> nb.resize(n_classes=2, n_numeric=1, n_nominal=0, n_values=0)
>>> for v, k in [(0.0, 0), (0.2, 0), (1.0, 1), (1.2, 1)]:
...     nb.stats.update_one(0, k, [0], [v], [], [])
>>> nb.refresh(2)
>>> ll = nb.row_loglik([0.1], [], n_classes=2)
>>> ll[0] > ll[1]  # 0.1 is likelier under class 0
True
>>> bool(np.allclose(nb.loglik(np.array([[0.1]]), np.zeros((1, 0), dtype=np.int64), n_classes=2), [ll]))
True
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from streamtree.typing import FloatArray, IntArray
from tests.reference.observers import LeafStats

__all__ = ["NaiveBayesFactor"]

NU = 2.0  # pseudo-examples of the pooled variance in each class's variance
SAMPLE_EVERY = 8  # score every this many-th example before learning it
BUFFER = 512  # scored examples kept for fitting gamma
MIN_SAMPLES = 64  # gamma stays 0 until this many examples were scored
NEWTON_STEPS = 5
MIN_PROBA = 1e-15  # the floor of a tempered probability (the model's served floor)
_LOG_2PI = math.log(2.0 * math.pi)


class NaiveBayesFactor:
    """Whole-tree class-conditional feature statistics, and the fitted exponent ``gamma``."""

    def __init__(self) -> None:
        self.stats = LeafStats()
        self.stats.allocate()  # slot 0: every example
        self.gamma = 0.0
        self.a = np.zeros((BUFFER, 0))  # the tree's log probabilities of each scored example
        self.b = np.zeros((BUFFER, 0))  # the factor's log likelihoods, minus their maximum
        self.y = np.zeros(BUFFER, dtype=np.int64)
        self.n_scored = 0
        # parameters as of the last refresh: per numeric column and class the mean (of the
        # shifted values), 1 / (2 var) and -log(2 pi var) / 2 (all 0 where unusable); per
        # nominal column, value and class the log probability (last value row: any unseen
        # value; NaN for a column with no statistics)
        self.mean = np.zeros((0, 0))
        self.inv2var = np.zeros((0, 0))
        self.const = np.zeros((0, 0))
        self.table = np.zeros((0, 1, 0))
        self.shift = np.zeros(0)
        self._numeric: list[tuple[int, float, list[float], list[float], list[float]]] = []
        self._nominal: list[tuple[int, list[list[float]]]] = []

    def resize(self, n_classes: int, n_numeric: int, n_nominal: int, n_values: int) -> None:
        self.stats.resize(n_classes, n_numeric, n_nominal, n_values)
        grow = n_classes - self.a.shape[1]
        if grow > 0:  # a class unknown when an example was scored had probability 0 for it
            self.a = np.pad(self.a, ((0, 0), (0, grow)), constant_values=math.log(1e-15))
            self.b = np.pad(self.b, ((0, 0), (0, grow)))

    # -- the feature models -------------------------------------------------------------
    def refresh(self, n_classes: int) -> None:
        """Recompute the feature models' parameters from the statistics."""
        stats = self.stats
        stats.flush()
        k, f = n_classes, stats.n_numeric
        n = stats.num_n[0, :f, :k]
        s = stats.num_s[0, :f, :k]
        q = stats.num_q[0, :f, :k]
        total_n, total_s, total_q = n.sum(axis=1), s.sum(axis=1), q.sum(axis=1)
        pooled = np.divide(
            total_q - total_s * total_s / np.maximum(total_n, 1.0), total_n - 1.0, out=np.zeros(f), where=total_n > 1
        )
        mean = np.divide(s, n, out=np.zeros_like(s), where=n > 0)
        spread = np.maximum(q - s * mean, 0.0)  # (n - 1) * the class's variance
        var = (spread + NU * pooled[:, None]) / np.maximum(n - 1.0 + NU, 1e-12)
        usable = ((n > 0).all(axis=1) & (pooled > 0))[:, None] & (var > 0)
        safe = np.where(usable, var, 1.0)
        # an unusable column gets all-zero parameters: its term is exactly 0
        self.mean = np.where(usable, mean, 0.0)
        self.inv2var = np.where(usable, 0.5 / safe, 0.0)
        self.const = np.where(usable, -0.5 * (_LOG_2PI + np.log(safe)), 0.0)
        self.shift = stats.shift[:f].copy()
        c, v = stats.n_nominal, stats.n_values
        counts = stats.nom[0, :c, :v, :k]  # (C, V, K)
        per_class = counts.sum(axis=1)  # (C, K)
        seen_values = (counts.sum(axis=2) > 0).sum(axis=1)  # (C,)
        denominator = per_class + seen_values[:, None] + 1.0
        table = np.log(np.concatenate([counts + 1.0, np.ones((c, 1, k))], axis=1) / denominator[:, None, :])
        known = per_class.sum(axis=1) > 0
        self.table = np.where(known[:, None, None], table, np.nan)
        self._cache_rows()

    def _cache_rows(self) -> None:
        """The parameters as plain lists, for scoring one example without numpy overhead."""
        usable = np.flatnonzero(self.inv2var.any(axis=1)) if self.inv2var.size else np.zeros(0, dtype=np.int64)
        self._numeric = [
            (
                int(col),
                float(self.shift[col]),
                self.mean[col].tolist(),
                self.inv2var[col].tolist(),
                self.const[col].tolist(),
            )
            for col in usable
        ]
        self._nominal = [(col, rows) for col, rows in enumerate(self.table.tolist()) if rows[-1][0] == rows[-1][0]]

    def loglik(self, num: FloatArray, nom: IntArray, n_classes: int) -> FloatArray:
        """``(n, n_classes)`` log likelihood of each row under each class (0 where nothing is
        known), from numeric (NaN missing) and nominal (code, -1 missing) matrices. A class
        newer than the parameters gets the row's largest value: no evidence against it.

        Only the columns known at the last refresh are read, so wider matrices (columns
        registered later) give the same result. Agrees with :meth:`row_loglik` up to rounding."""
        k = self._n_classes
        out = np.zeros((num.shape[0], k))
        f = min(self.mean.shape[0], num.shape[1])
        if f:
            x = num[:, :f] - self.shift[:f]
            present = x == x
            d = np.where(present, x, 0.0)[:, :, None] - self.mean[None, :f]
            with np.errstate(over="ignore", invalid="ignore"):
                term = self.const[None, :f] - d * d * self.inv2var[None, :f]
            # a value whose term is not finite for some class (its square overflows) adds nothing
            used = present & np.isfinite(term).all(axis=2)
            out += np.where(used[:, :, None], term, 0.0).sum(axis=1)
        c = min(self.table.shape[0], nom.shape[1])
        if c:
            codes = nom[:, :c]
            last = self.table.shape[1] - 1
            rows = self.table[np.arange(c)[None, :], np.where((codes >= 0) & (codes < last), codes, last)]
            rows = np.where((codes >= 0)[:, :, None] & ~np.isnan(rows), rows, 0.0)
            out += rows.sum(axis=1)
        top = out.max(axis=1, keepdims=True) if k else np.zeros((num.shape[0], 1))
        return np.concatenate([out, np.repeat(top, n_classes - k, axis=1)], axis=1)

    @property
    def _n_classes(self) -> int:
        """Classes the parameters know (classes seen since the last refresh are not among them)."""
        return self.mean.shape[1] if self.mean.shape[0] else self.table.shape[2]

    def row_loglik(self, values: list[float], codes: list[int], n_classes: int) -> list[float]:
        """:meth:`loglik` of one example given as lists indexed by column (NaN, -1: missing),
        in plain floats, columns in order: numpy's per-call overhead would dominate."""
        k = self._n_classes
        out = [0.0] * k
        for col, shift, mean, inv2var, const in self._numeric:
            v = values[col]
            if v != v:
                continue
            x = v - shift
            terms = []
            for j in range(k):
                d = x - mean[j]
                terms.append(const[j] - d * d * inv2var[j])
            if not all(map(math.isfinite, terms)):
                continue  # the square overflows for some class: the column adds nothing
            for j in range(k):
                out[j] += terms[j]
        for col, rows in self._nominal:
            code = codes[col]
            if code < 0:
                continue
            row = rows[code] if code < len(rows) - 1 else rows[-1]
            for j in range(k):
                out[j] += row[j]
        return out + [max(out, default=0.0)] * (n_classes - k)

    def temper(self, proba: list[float], loglik: list[float]) -> list[float]:
        """One example: ``proba * exp(gamma * loglik)`` renormalised."""
        if self.gamma == 0.0 or not loglik:
            return proba
        top = max(loglik)
        z = [math.log(p) + self.gamma * (v - top) for p, v in zip(proba, loglik)]
        peak = max(z)
        e = [math.exp(v - peak) for v in z]
        total = sum(e)
        q = [v / total for v in e]
        if min(q) >= MIN_PROBA:
            return q
        q = [max(v, MIN_PROBA) for v in q]  # the model's floor: every probability positive
        total = sum(q)
        return [v / total for v in q]

    def apply(self, proba: FloatArray, loglik: FloatArray) -> FloatArray:
        """:meth:`temper` for a batch of ``(n, K)`` probabilities and log likelihoods."""
        if self.gamma == 0.0 or not loglik.shape[1]:
            return proba
        z = np.log(proba) + self.gamma * (loglik - loglik.max(axis=-1, keepdims=True))
        z = np.exp(z - z.max(axis=-1, keepdims=True))
        q = z / z.sum(axis=-1, keepdims=True)
        floored = (q < MIN_PROBA).any(axis=-1, keepdims=True)
        q_floor = np.maximum(q, MIN_PROBA)
        return np.where(floored, q_floor / q_floor.sum(axis=-1, keepdims=True), q)

    # -- fitting gamma ------------------------------------------------------------------
    def score(self, proba: FloatArray, loglik: list[float], k: int) -> None:
        """Keep one example's pre-update tree probabilities and log likelihoods."""
        i = self.n_scored % BUFFER
        self.a[i] = np.log(np.maximum(proba, 1e-15))
        top = max(loglik, default=0.0)
        self.b[i] = [v - top for v in loglik]
        self.y[i] = k
        self.n_scored += 1

    def fit(self) -> None:
        """Newton steps on the kept examples' log loss over ``gamma`` in [0, 1]."""
        m = min(self.n_scored, BUFFER)
        if m < MIN_SAMPLES:
            return
        a, b, rows = self.a[:m], self.b[:m], np.arange(m)
        y = self.y[:m]
        gamma = self.gamma
        for _ in range(NEWTON_STEPS):
            z = a + gamma * b
            q = np.exp(z - z.max(axis=1, keepdims=True))
            q /= q.sum(axis=1, keepdims=True)
            mean_b = (q * b).sum(axis=1)
            grad = float((mean_b - b[rows, y]).sum())
            hess = float(((q * b * b).sum(axis=1) - mean_b * mean_b).sum())
            if hess <= 1e-12:
                break
            step = min(max(gamma - grad / hess, 0.0), 1.0)
            if step == gamma:
                break
            gamma = step
        self.gamma = gamma

    # -- state --------------------------------------------------------------------------
    _PARAMS = ("mean", "inv2var", "const", "table", "shift")

    def to_state(self) -> dict[str, Any]:
        m = min(self.n_scored, BUFFER)
        return {
            "gamma": self.gamma,
            "n_scored": self.n_scored,
            "a": self.a[:m],
            "b": self.b[:m],
            "y": self.y[:m],
            **{name: getattr(self, name) for name in self._PARAMS},
            **{f"stats.{key}": value for key, value in self.stats.to_state().items()},
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> NaiveBayesFactor:
        nb = cls()
        nb.stats = LeafStats.from_state(
            {key[len("stats.") :]: v for key, v in state.items() if key.startswith("stats.")}
        )
        nb.gamma = float(state["gamma"])
        nb.n_scored = int(state["n_scored"])
        a, b = np.asarray(state["a"], dtype=np.float64), np.asarray(state["b"], dtype=np.float64)
        width = nb.stats.n_classes
        nb.a = np.full((BUFFER, width), math.log(1e-15))
        nb.b = np.zeros((BUFFER, width))
        nb.a[: a.shape[0], : a.shape[1]], nb.b[: b.shape[0], : b.shape[1]] = a, b
        nb.y[: a.shape[0]] = np.asarray(state["y"], dtype=np.int64)
        for name in cls._PARAMS:
            setattr(nb, name, np.asarray(state[name], dtype=np.float64))
        nb._cache_rows()
        return nb
