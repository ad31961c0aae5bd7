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

from dataclasses import dataclass

import numpy as np
from scipy.special import ndtr

from streamtree.typing import FloatArray
from streamtree.values import NOMINAL, NUMERIC
from tests.reference.criteria import CRITERIA

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
        # logical sizes: the arrays may be larger (capacity doubles as they grow)
        self.n_numeric = 0
        self.n_classes = 0
        self.n_nominal = 0
        self.n_values = 0
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
        self.n_nominal = n_nominal
        self.n_values = n_values

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
        """Bytes of the statistics at their logical sizes (what :meth:`to_state` saves)."""
        return sum(np.asarray(v).nbytes for v in self.to_state().values() if isinstance(v, np.ndarray))

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
        self,
        slot: int,
        criterion: str,
        n_split_points: int,
        min_branch_fraction: float,
        keys: np.ndarray,
    ) -> SplitSuggestion | None:
        """The best binary split of the slot's leaf, or ``None`` when no split is possible.
        Features of equal merit go to the smallest of ``keys`` (one per feature, numeric then
        nominal)."""
        feature_keys: list[np.ndarray] = []
        self.flush(slot)
        crit = CRITERIA[criterion]
        k = self.n_classes
        merits: list[np.ndarray] = []  # best merit per feature, numeric then nominal
        picks: list[tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []

        n = self.num_n[slot, : self.n_numeric, :k]
        lo, hi = self.num_min[slot, : self.n_numeric], self.num_max[slot, : self.n_numeric]
        cols = np.flatnonzero((n.sum(axis=1) > 0) & (hi > lo))
        if cols.size:
            n_u = n[cols]
            s = self.num_s[slot, cols, :k]
            q = self.num_q[slot, cols, :k]
            mean = np.divide(s, n_u, out=np.zeros_like(s), where=n_u > 0)
            var = np.divide(q - s * mean, n_u - 1.0, out=np.zeros_like(s), where=n_u > 1)
            std = np.sqrt(np.maximum(var, 0.0))[:, None, :]
            mean = (mean + self.shift[cols, None])[:, None, :]
            t = lo[cols, None] + (hi[cols] - lo[cols])[:, None] * (
                np.arange(1, n_split_points + 1) / (n_split_points + 1)
            )
            tt = t[:, :, None]
            # each class's share left of t under its Gaussian; a class with one value is a step
            share = np.where(std > 0, ndtr((tt - mean) / np.where(std > 0, std, 1.0)), (tt >= mean) * 1.0)
            left = n_u[:, None, :] * share  # (F, C, K)
            merit = self._merit(crit, left, n_u[:, None, :], min_branch_fraction)
            j = merit.argmax(axis=1)
            f = np.arange(cols.size)
            merits.append(merit[f, j])
            feature_keys.append(keys[cols])
            picks.append((NUMERIC, cols, t[f, j], left[f, j], n_u - left[f, j], merit[f, j]))

        counts = self.nom[slot, : self.n_nominal, : self.n_values, :k]
        total = counts.sum(axis=1)  # (F, K)
        cols = np.flatnonzero(total.sum(axis=1) > 0)
        if cols.size:
            c = counts[cols]
            merit = self._merit(crit, c, total[cols][:, None, :], min_branch_fraction)
            merit = np.where(c.sum(axis=2) > 0, merit, -np.inf)  # a value never seen here
            j = merit.argmax(axis=1)
            f = np.arange(cols.size)
            merits.append(merit[f, j])
            feature_keys.append(keys[self.n_numeric + cols])
            picks.append((NOMINAL, cols, j.astype(np.float64), c[f, j], total[cols] - c[f, j], merit[f, j]))

        if not merits:
            return None
        every = np.concatenate(merits)
        tied = np.flatnonzero(every == every.max())
        best = int(tied[np.argmin(np.concatenate(feature_keys)[tied])])
        if not np.isfinite(every[best]):
            return None
        rest = np.delete(every, best)
        rest = rest[np.isfinite(rest)]
        second = max(0.0, float(rest.max())) if rest.size else 0.0  # 0: the merit of not splitting
        for kind, cols, thresholds, lefts, rights, m in picks:
            if best < cols.size:
                return SplitSuggestion(
                    kind,
                    int(cols[best]),
                    float(thresholds[best]),
                    float(m[best]),
                    second,
                    lefts[best].copy(),
                    rights[best].copy(),
                )
            best -= cols.size
        raise AssertionError("unreachable: best indexes one of the picks")

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
        """Arrays cut to their logical sizes (capacity depends on growth history, not data)."""
        self.flush()
        f, k, c, v = self.n_numeric, self.n_classes, self.n_nominal, self.n_values
        state: dict[str, object] = {
            "num_n": self.num_n[:, :f, :k],
            "num_s": self.num_s[:, :f, :k],
            "num_q": self.num_q[:, :f, :k],
            "num_min": self.num_min[:, :f],
            "num_max": self.num_max[:, :f],
            "nom": self.nom[:, :c, :v, :k],
            "seen": self.seen,
            "last_attempt": self.last_attempt,
            "shift": self.shift[:f],
        }
        state.update(free=list(self.free))
        return state

    @classmethod
    def from_state(cls, state: dict[str, object]) -> LeafStats:
        stats = cls()
        for name in cls.ARRAYS:
            setattr(stats, name, np.array(state[name], dtype=np.float64))
        stats.n_numeric, stats.n_classes = stats.num_n.shape[1:]
        stats.n_nominal, stats.n_values = stats.nom.shape[1:3]
        stats.free = [int(i) for i in state["free"]]  # type: ignore[attr-defined]
        return stats
