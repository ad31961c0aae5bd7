"""Per-leaf split statistics ("observers") in dense arrays, and the split search over them.

Each active leaf owns a *slot*. For numeric column ``f`` and class ``k`` a slot keeps the
count, sum and sum of squares of ``x - shift[f]`` (``shift`` is the feature's first value ever
seen, which keeps the variance ``(Q - S^2/n) / (n - 1)`` free of cancellation for features far
from 0), and the feature's minimum and maximum at the leaf; for nominal column ``f`` it keeps
class counts per value code. Updates are plain ``+=`` / ``np.add.at`` in example order, so one
example at a time and a batch at once give bit-identical statistics.

Candidate splits are binary: ``x <= t`` for numeric features, with ``n_split_points``
thresholds evenly spaced between the leaf's minimum and maximum and each class's share on
the left estimated by its Gaussian (as river's Gaussian splitter does); ``x == v`` against
the rest for nominal features.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import ndtr

from streamtree.criteria import CRITERIA
from streamtree.features import NOMINAL, NUMERIC
from streamtree.typing import FloatArray

__all__ = ["LeafStats", "SplitSuggestion"]


@dataclass(frozen=True)
class SplitSuggestion:
    """The best split of a leaf and what the Hoeffding test needs."""

    kind: int  # NUMERIC or NOMINAL
    col: int
    threshold: float  # numeric threshold, or the nominal value code
    merit: float
    second_merit: float  # the best merit among the other features, or 0 (no split)
    left: FloatArray  # (K,) class counts estimated on the left
    right: FloatArray


def _grown(a: np.ndarray, axis: int, size: int, fill: float = 0.0) -> np.ndarray:
    if a.shape[axis] >= size:
        return a
    shape = list(a.shape)
    shape[axis] = max(size, 2 * a.shape[axis])
    out = np.full(shape, fill, dtype=a.dtype)
    out[tuple(slice(0, n) for n in a.shape)] = a
    return out


class LeafStats:
    """Split statistics of every active leaf, one slot each."""

    def __init__(self) -> None:
        self.num_n = np.zeros((4, 0, 0))
        self.num_s = np.zeros((4, 0, 0))
        self.num_q = np.zeros((4, 0, 0))
        self.num_min = np.full((4, 0), np.inf)
        self.num_max = np.full((4, 0), -np.inf)
        self.nom = np.zeros((4, 0, 0, 0))
        self.seen = np.zeros(4)  # examples observed by the slot
        self.last_attempt = np.zeros(4)
        self.shift = np.zeros(0)
        self.n_numeric = 0
        self.n_classes = 0
        self.free: list[int] = [3, 2, 1, 0]  # a stack: the lowest free slot is taken first
        # examples learned one at a time wait here, per slot, until the slot's statistics are
        # read (a split attempt): then they are added as one batch, in arrival order
        self.pending: dict[int, list[tuple[int, list[int], list[float], list[int], list[int]]]] = {}

    # -- shape --------------------------------------------------------------------------
    def resize(self, n_classes: int, n_numeric: int, n_nominal: int, n_values: int) -> None:
        """Make room for more classes, columns or nominal values (never shrinks)."""
        self.num_n = _grown(_grown(self.num_n, 1, n_numeric), 2, n_classes)
        self.num_s = _grown(_grown(self.num_s, 1, n_numeric), 2, n_classes)
        self.num_q = _grown(_grown(self.num_q, 1, n_numeric), 2, n_classes)
        self.num_min = _grown(self.num_min, 1, n_numeric, np.inf)
        self.num_max = _grown(self.num_max, 1, n_numeric, -np.inf)
        self.shift = _grown(self.shift, 0, n_numeric)
        self.nom = _grown(_grown(_grown(self.nom, 1, n_nominal), 2, n_values), 3, n_classes)
        self.n_numeric = n_numeric
        self.n_classes = n_classes

    def set_shift(self, col: int, value: float) -> None:
        self.shift[col] = value

    def allocate(self) -> int:
        """A zeroed slot for a new leaf."""
        if not self.free:
            old = self.seen.shape[0]
            for name in ("num_n", "num_s", "num_q", "nom", "seen", "last_attempt"):
                setattr(self, name, _grown(getattr(self, name), 0, 2 * old))
            self.num_min = _grown(self.num_min, 0, 2 * old, np.inf)
            self.num_max = _grown(self.num_max, 0, 2 * old, -np.inf)
            self.free = list(range(2 * old - 1, old - 1, -1))
        slot = self.free.pop()
        return slot

    def release(self, slot: int) -> None:
        """Zero a slot and make it available again."""
        self.pending.pop(slot, None)
        for a in (self.num_n, self.num_s, self.num_q, self.nom):
            a[slot] = 0.0
        self.num_min[slot] = np.inf
        self.num_max[slot] = -np.inf
        self.seen[slot] = 0.0
        self.last_attempt[slot] = 0.0
        self.free.append(slot)
        self.free.sort(reverse=True)

    @property
    def nbytes(self) -> int:
        return sum(
            a.nbytes
            for a in (self.num_n, self.num_s, self.num_q, self.num_min, self.num_max, self.nom, self.seen)
        )

    # -- updates ------------------------------------------------------------------------
    def update_one(
        self, slot: int, k: int, num_cols: list[int], num_vals: list[float], nom_cols: list[int], nom_codes: list[int]
    ) -> None:
        """Add one example of class ``k`` (each column at most once); applied lazily."""
        self.pending.setdefault(slot, []).append((k, num_cols, num_vals, nom_cols, nom_codes))
        self.seen[slot] += 1.0

    def flush(self, slot: int | None = None) -> None:
        """Apply the examples waiting for ``slot`` (every slot when ``None``)."""
        slots = list(self.pending) if slot is None else [slot]
        for s in slots:
            rows = self.pending.pop(s, None)
            if not rows:
                continue
            num = np.full((len(rows), self.n_numeric), np.nan)
            nom = np.full((len(rows), self.nom.shape[1]), -1, dtype=np.int64)
            for i, (_, num_cols, num_vals, nom_cols, nom_codes) in enumerate(rows):
                if num_cols:
                    num[i, num_cols] = num_vals
                if nom_cols:
                    nom[i, nom_cols] = nom_codes
            ks = np.array([row[0] for row in rows], dtype=np.int64)
            self._add(np.full(len(rows), s, dtype=np.int64), ks, num, nom)

    def update_many(self, slots: np.ndarray, ks: np.ndarray, num: FloatArray, nom: np.ndarray) -> None:
        """Add a batch in order: ``num[i, f]`` (NaN missing), ``nom[i, f]`` codes (-1 missing)."""
        self.flush()
        self._add(slots, ks, num, nom)
        np.add.at(self.seen, slots, 1.0)

    def _add(self, slots: np.ndarray, ks: np.ndarray, num: FloatArray, nom: np.ndarray) -> None:
        rows, cols = np.nonzero(~np.isnan(num))  # row-major: example by example
        if rows.size:
            raw = num[rows, cols]
            v = raw - self.shift[cols]
            s, k = slots[rows], ks[rows]
            np.add.at(self.num_n, (s, cols, k), 1.0)
            np.add.at(self.num_s, (s, cols, k), v)
            np.add.at(self.num_q, (s, cols, k), v * v)
            np.minimum.at(self.num_min, (s, cols), raw)
            np.maximum.at(self.num_max, (s, cols), raw)
        rows, cols = np.nonzero(nom >= 0)
        if rows.size:
            np.add.at(self.nom, (slots[rows], cols, nom[rows, cols], ks[rows]), 1.0)

    # -- split search -------------------------------------------------------------------
    def best_split(
        self, slot: int, criterion: str, n_split_points: int, min_branch_fraction: float
    ) -> SplitSuggestion | None:
        """The best binary split of the slot's leaf, or ``None`` when no split is possible."""
        self.flush(slot)
        crit = CRITERIA[criterion]
        k = self.n_classes
        best_per_feature: list[float] = []
        candidates: list[tuple[float, int, int, float, FloatArray, FloatArray]] = []

        n = self.num_n[slot, : self.n_numeric, :k]
        if n.size:
            total = n.sum(axis=1)
            lo, hi = self.num_min[slot, : self.n_numeric], self.num_max[slot, : self.n_numeric]
            usable = (total > 0) & (hi > lo)
            if usable.any():
                cols = np.flatnonzero(usable)
                n_u = n[cols]
                s = self.num_s[slot, cols, :k]
                q = self.num_q[slot, cols, :k]
                mean = np.divide(s, n_u, out=np.zeros_like(s), where=n_u > 0)
                var = np.divide(q - s * mean, n_u - 1.0, out=np.zeros_like(s), where=n_u > 1)
                std = np.sqrt(np.maximum(var, 0.0))
                mean += self.shift[cols, None]
                frac_pts = np.arange(1, n_split_points + 1) / (n_split_points + 1)
                t = lo[cols, None] + (hi[cols] - lo[cols])[:, None] * frac_pts  # (F, C)
                z = (t[:, :, None] - mean[:, None, :]) / np.where(std > 0, std, 1.0)[:, None, :]
                share = np.where(std[:, None, :] > 0, ndtr(z), (t[:, :, None] >= mean[:, None, :]) * 1.0)
                left = n_u[:, None, :] * share  # (F, C, K)
                merit = self._merit(crit, left, n_u[:, None, :], min_branch_fraction)
                for i, col in enumerate(cols):
                    j = int(np.argmax(merit[i]))
                    m = float(merit[i, j])
                    best_per_feature.append(m)
                    candidates.append((m, NUMERIC, int(col), float(t[i, j]), left[i, j], n_u[i] - left[i, j]))

        counts = self.nom[slot, :, :, :k]
        if counts.size:
            total = counts.sum(axis=1)  # (F, K)
            cols = np.flatnonzero(total.sum(axis=1) > 0)
            if cols.size:
                c = counts[cols]
                merit = self._merit(crit, c, total[cols][:, None, :], min_branch_fraction)
                merit = np.where(c.sum(axis=2) > 0, merit, -np.inf)
                for i, col in enumerate(cols):
                    j = int(np.argmax(merit[i]))
                    m = float(merit[i, j])
                    best_per_feature.append(m)
                    candidates.append((m, NOMINAL, int(col), float(j), c[i, j].copy(), total[col] - c[i, j]))

        if not candidates:
            return None
        best = int(np.argmax([cand[0] for cand in candidates]))
        merit_best, kind, col, thr, left_k, right_k = candidates[best]
        if not math.isfinite(merit_best):
            return None
        others = [m for i, m in enumerate(best_per_feature) if i != best and math.isfinite(m)]
        second = max([0.0, *others])
        return SplitSuggestion(kind, col, thr, merit_best, second, left_k, right_k)

    @staticmethod
    def _merit(crit, left: FloatArray, total: FloatArray, min_branch_fraction: float) -> FloatArray:  # type: ignore[no-untyped-def]
        merit = crit(left, total)
        n = total.sum(axis=-1)
        n_left = left.sum(axis=-1)
        frac = np.divide(n_left, n, out=np.zeros_like(n_left), where=n > 0)
        ok = (frac > min_branch_fraction) & (1.0 - frac > min_branch_fraction)
        return np.where(ok, merit, -np.inf)

    # -- persistence --------------------------------------------------------------------
    ARRAYS = ("num_n", "num_s", "num_q", "num_min", "num_max", "nom", "seen", "last_attempt", "shift")

    def to_state(self) -> dict[str, object]:
        self.flush()
        state: dict[str, object] = {name: getattr(self, name) for name in self.ARRAYS}
        state.update(n_numeric=self.n_numeric, n_classes=self.n_classes, free=list(self.free))
        return state

    @classmethod
    def from_state(cls, state: dict[str, object]) -> LeafStats:
        stats = cls()
        for name in cls.ARRAYS:
            setattr(stats, name, np.array(state[name], dtype=np.float64))
        stats.n_numeric = int(state["n_numeric"])  # type: ignore[call-overload]
        stats.n_classes = int(state["n_classes"])  # type: ignore[call-overload]
        stats.free = [int(i) for i in state["free"]]  # type: ignore[attr-defined]
        return stats
