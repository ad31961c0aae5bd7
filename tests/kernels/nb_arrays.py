"""Naive-Bayes kernel arrays with capacities larger than their logical sizes, a random
stream to fill them, and the oracle (:class:`tests.reference.naive_bayes.NaiveBayesFactor`)
fed alongside: the fixtures of ``test_naive_bayes.py``."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from streamtree.kernels.naive_bayes import BUFFER, nb_loglik, nb_refresh
from streamtree.state import MAX, MIN, N_, Q_, S_, SEEN
from tests.reference.naive_bayes import NaiveBayesFactor

LOG_FLOOR = math.log(1e-15)


@dataclass
class Arrays:
    """The ``nb_*`` arrays of :mod:`streamtree.state` with room for ``f`` numeric and ``c``
    nominal columns, ``v`` value codes and ``k`` classes."""

    f: int
    c: int
    v: int
    k: int
    nb_num: np.ndarray = field(init=False)
    nb_range: np.ndarray = field(init=False)
    nb_nom: np.ndarray = field(init=False)
    nb_seen: np.ndarray = field(init=False)
    shift: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        f, c, v, k = self.f, self.c, self.v, self.k
        self.nb_num = np.zeros((1, f, k, 3))
        self.nb_range = np.empty((1, f, 2))
        self.nb_range[..., MIN], self.nb_range[..., MAX] = np.inf, -np.inf
        self.nb_nom = np.zeros((1, c, v, k))
        self.nb_seen = np.zeros((1, 2))
        self.shift = np.zeros(f)
        # parameters filled with junk: a refresh must write every entry it is asked for
        self.nb_mean = np.full((f, k), 7.0)
        self.nb_inv2var = np.full((f, k), 7.0)
        self.nb_const = np.full((f, k), 7.0)
        self.nb_table = np.full((c, v + 1, k), 7.0)
        self.nb_a = np.full((BUFFER, k), LOG_FLOOR)
        self.nb_b = np.zeros((BUFFER, k))
        self.nb_y = np.zeros(BUFFER, dtype=np.int64)

    def add(self, k: int, num: np.ndarray, nom: np.ndarray) -> None:
        """One example, with LeafStats._add's arithmetic (NaN / -1: missing)."""
        for col, raw in enumerate(num.tolist()):
            if raw != raw:
                continue
            x = raw - self.shift[col]
            self.nb_num[0, col, k, N_] += 1.0
            self.nb_num[0, col, k, S_] += x
            self.nb_num[0, col, k, Q_] += x * x
            self.nb_range[0, col, MIN] = min(self.nb_range[0, col, MIN], raw)
            self.nb_range[0, col, MAX] = max(self.nb_range[0, col, MAX], raw)
        for col, code in enumerate(nom.tolist()):
            if code >= 0:
                self.nb_nom[0, col, code, k] += 1.0
        self.nb_seen[0, SEEN] += 1.0

    def refresh(self, n_classes: int, n_numeric: int, n_nominal: int, n_values: int) -> None:
        nb_refresh(
            self.nb_num,
            self.nb_nom,
            n_classes,
            n_numeric,
            n_nominal,
            n_values,
            self.nb_mean,
            self.nb_inv2var,
            self.nb_const,
            self.nb_table,
        )

    def loglik(
        self,
        nb_classes: int,
        n_numeric: int,
        n_nominal: int,
        n_values: int,
        num: np.ndarray,
        nom: np.ndarray,
        n_classes: int,
    ) -> np.ndarray:
        out = np.full(n_classes + 2, 99.0)
        nb_loglik(
            self.nb_mean,
            self.nb_inv2var,
            self.nb_const,
            self.nb_table,
            self.shift,
            nb_classes,
            n_numeric,
            n_nominal,
            n_values,
            num,
            nom,
            n_classes,
            out,
        )
        assert (out[n_classes:] == 99.0).all(), "nothing past n_classes is written"
        return out[:n_classes]


@dataclass
class Stream:
    """Examples with class-dependent numeric means and nominal frequencies, missing values, a
    numeric and a nominal column that are always missing (no statistics), and new classes,
    columns and value codes appearing late."""

    n_numeric: int = 4
    n_nominal: int = 3
    n_values: int = 5
    n_classes: int = 3
    seed: int = 0

    def __post_init__(self) -> None:
        rng = np.random.default_rng(self.seed)
        self.rng = rng
        self.means = (
            rng.normal(0.0, 1.5, size=(self.n_numeric, self.n_classes))
            + 1e3 * (rng.random(self.n_numeric) < 0.3)[:, None]
        )
        self.scales = rng.uniform(0.3, 2.0, size=(self.n_numeric, self.n_classes))
        self.freqs = rng.dirichlet(np.ones(self.n_values), size=(self.n_nominal, self.n_classes))

    def row(self, k: int, numeric: int, nominal: int, values: int) -> tuple[np.ndarray, np.ndarray]:
        """One example of class ``k`` over the first ``numeric``/``nominal`` columns and codes
        below ``values``."""
        rng = self.rng
        num = rng.normal(self.means[:numeric, k], self.scales[:numeric, k])
        num[rng.random(numeric) < 0.15] = np.nan
        if numeric > 1:
            num[1] = np.nan  # never observed: no statistics
        nom = np.array([rng.choice(self.n_values, p=self.freqs[c, k]) for c in range(nominal)], dtype=np.int64)
        nom = np.where(nom < values, nom, values - 1) if values else np.full(nominal, -1, dtype=np.int64)
        nom[rng.random(nominal) < 0.15] = -1
        if nominal > 2:
            nom[2] = -1  # never observed
        return num, nom


def feed(nb: NaiveBayesFactor, arrays: Arrays, k: int, num: np.ndarray, nom: np.ndarray, numeric: int) -> None:
    """One example into both (the oracle as the tree feeds it: column lists, lazily)."""
    num_cols = [c for c in range(numeric) if num[c] == num[c]]
    nom_cols = [c for c in range(nom.size) if nom[c] >= 0]
    nb.stats.update_one(0, k, num_cols, [float(num[c]) for c in num_cols], nom_cols, [int(nom[c]) for c in nom_cols])
    arrays.add(k, num, nom)


def filled(stream: Stream, n: int, classes: int | None = None) -> tuple[NaiveBayesFactor, Arrays]:
    """Oracle and arrays after ``n`` examples over every column."""
    k = classes or stream.n_classes
    nb, arrays = NaiveBayesFactor(), Arrays(stream.n_numeric + 2, stream.n_nominal + 1, stream.n_values + 3, k + 3)
    nb.resize(k, stream.n_numeric, stream.n_nominal, stream.n_values)
    for i in range(n):
        y = i % k
        num, nom = stream.row(y, stream.n_numeric, stream.n_nominal, stream.n_values)
        if i == 0:
            for col in range(stream.n_numeric):
                value = num[col] if num[col] == num[col] else 0.0
                nb.stats.set_shift(col, float(value))
                arrays.shift[col] = value
        feed(nb, arrays, y, num, nom, stream.n_numeric)
    return nb, arrays


def oracle_params_into(nb: NaiveBayesFactor, arrays: Arrays) -> None:
    """The oracle's parameters copied into the arrays (capacity beyond: cleared)."""
    f, k = nb.mean.shape
    c, rows, kt = nb.table.shape
    arrays.nb_mean[:], arrays.nb_inv2var[:], arrays.nb_const[:] = 0.0, 0.0, 0.0
    arrays.nb_table[:] = np.nan
    arrays.nb_mean[:f, :k], arrays.nb_inv2var[:f, :k], arrays.nb_const[:f, :k] = nb.mean, nb.inv2var, nb.const
    arrays.nb_table[:c, :rows, :kt] = nb.table
