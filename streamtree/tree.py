"""``ProbabilityTree``: an online probability estimation tree with hierarchical smoothing.

Every example increments the class counts of every node on its path, so each internal node
holds an up-to-date estimate; a :class:`~streamtree.smoothing.Smoother` turns those counts
into leaf probabilities (HGS by default: each leaf backed off to all its ancestors at once).
The tree grows Hoeffding-style: a leaf tries to split every ``grace_period`` examples it sees,
and splits when the best split's merit beats the runner-up's by more than the Hoeffding bound
(or the bound falls below ``tau``). A change detector on the tree's error grows a background
tree after a detected change and swaps it in once it predicts better
(:mod:`streamtree.adaptation`); an opt-in naive-Bayes factor adds the features' evidence inside
a leaf (:mod:`streamtree.naive_bayes`).

The structure is a set of parallel arrays (``parent``, ``left``, ``right``, split feature and
threshold, ``counts[node, class]``); the per-event paths walk Python lists mirrored from them,
batch paths use numpy over whole levels.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from river import base

from streamtree.adaptation import OFF, Adaptation
from streamtree.config import validate_config
from streamtree.criteria import RANGES, hoeffding_bound
from streamtree.exceptions import InputError
from streamtree.features import NOMINAL, NUMERIC, EncodedRow, FeatureRegistry, check_mapping
from streamtree.minibatch import encode_batch, encode_for_prediction, encode_one, learn_encoded
from streamtree.naive_bayes import SAMPLE_EVERY, NaiveBayesFactor
from streamtree.observers import LeafStats, SplitSuggestion
from streamtree.smoothing import HGS, SMOOTHERS, MEstimate, Smoother
from streamtree.topology import Topology
from streamtree.typing import ClassLabel, FloatArray, IntArray

__all__ = ["ProbabilityTree"]

LEAF = -1
_MIN_PROBA = 1e-15  # only MLE can produce exact zeros; a served 0 makes log loss infinite


def _check_label(y: Any) -> ClassLabel:
    if isinstance(y, np.generic):
        y = y.item()
    if isinstance(y, (bool, str)):
        return y
    if isinstance(y, numbers.Integral):
        return int(y)
    if isinstance(y, float) and y.is_integer():
        return int(y)
    raise InputError(f"The label must be a str, an int or a bool. Got {y!r} instead.", field="label")


class ProbabilityTree(base.MiniBatchClassifier):
    """Online decision tree with calibrated, hierarchically smoothed class probabilities.

    Parameters
    ----------
    smoothing
        How node counts become leaf probabilities: ``"hgs"`` (hierarchical gradient smoothing,
        the default), ``"mbranch"``, ``"mestimate"``, ``"laplace"`` or ``"mle"``.
    split_criterion
        ``"info_gain"``, ``"gini"`` or ``"hellinger"``.
    grace_period
        Examples a leaf sees between split attempts.
    delta
        Allowed probability that the Hoeffding test picks the wrong split, in (0, 1).
    tau
        Split anyway when the Hoeffding bound falls below ``tau`` (ties).
    max_depth
        The deepest a leaf may be (the root has depth 0); ``None`` for no limit.
    max_nodes
        Growth stops cleanly at this many nodes: leaves keep learning counts, split
        statistics are freed.
    n_split_points
        Candidate thresholds per numeric feature at each split attempt.
    min_branch_fraction
        A split must send more than this fraction of a leaf's examples each way.
    nominal_features
        Names of features whose numbers are categories, not quantities (``None``: none).
    leaf_init
        What a new leaf's counts start from: ``"inherit"`` (the split statistics' estimate of
        the examples that would have reached it) or ``"zero"``.
    loocv_counts
        Which counts the HGS objective reads: ``"honest"`` (only examples a node saw after it
        was created, never the ones that chose its split) or ``"all"``.
    refit_every
        Smoothing parameters are refreshed every this many examples.
    refit_steps
        Optimiser steps per refresh (HGS).
    prior_weight
        HGS: initial weight of the uniform pseudo-node above the root.
    m
        M-estimation: weight of the base rate, in pseudo-examples.
    half_life
        Forget: every count loses half its weight each ``half_life`` examples (applied at each
        refit, so examples of one ``refit_every`` block weigh the same). ``None`` (the
        default) keeps every count. Forgetting helps under slow, gradual drift (-4.5% log loss
        with ``half_life=2000`` on RandomRBFDrift) but costs a little on stationary streams
        (up to +1.3%, statistically detectable), so it is off unless asked for; abrupt change
        is handled by ``drift_delta``.
    drift_delta
        Change detection, on by default: ADWIN (:class:`~streamtree.drift.Adwin`) with this
        confidence watches the tree's error (is the top class of the leaf's counts, before
        the update, wrong?). On a detected rise of the error a *background tree* starts from
        nothing and learns every example beside the tree; both predict each example before
        learning it, and once the background tree's log likelihood on at least 10 shared
        examples beats the tree's by 2 nats, it replaces the tree
        (:mod:`streamtree.adaptation`). A stationary
        stream's error does not rise, so there it costs nothing (measured: the same models as
        with detection off). ``None`` turns detection off.
    drift_patience
        A background tree that has not replaced the tree after this many examples is dropped
        (the next detected change starts a new one).
    naive_bayes
        Multiply the smoothed leaf probabilities by a tempered naive-Bayes likelihood of the
        example's features, ``p(y|x) ~ p_tree(y|leaf) * prod_f p(x_f|y)**gamma``, with the
        feature models learned from every example and ``gamma`` in [0, 1] fitted online on
        examples scored before they are learned (:mod:`streamtree.naive_bayes`). Off by
        default: it pays where features carry information inside a leaf (measured: log loss
        -16% on Hyperplane, -17% on Waveform) and costs where they do not (+38% on Shuttle),
        and it makes each event about 1.5x as slow.

    Examples
    --------
    >>> from river import datasets, metrics
    >>> from streamtree import ProbabilityTree
    >>> model = ProbabilityTree()
    >>> metric = metrics.LogLoss()
    >>> for x, y in datasets.Phishing():
    ...     metric.update(y, model.predict_proba_one(x))
    ...     model.learn_one(x, y)
    >>> metric.get() < 0.4
    True
    """

    def __init__(
        self,
        *,
        smoothing: str = "hgs",
        split_criterion: str = "info_gain",
        grace_period: int = 30,
        delta: float = 0.2,
        tau: float = 0.2,
        max_depth: int | None = None,
        max_nodes: int = 20_000,
        n_split_points: int = 10,
        min_branch_fraction: float = 0.01,
        nominal_features: Sequence[Hashable] | None = None,
        leaf_init: str = "inherit",
        loocv_counts: str = "honest",
        refit_every: int = 500,
        refit_steps: int = 3,
        prior_weight: float = 1.0,
        m: float = 1.0,
        half_life: int | None = None,
        drift_delta: float | None = 0.002,
        drift_patience: int = 2000,
        naive_bayes: bool = False,
    ) -> None:
        self.smoothing = smoothing
        self.split_criterion = split_criterion
        self.grace_period = grace_period
        self.delta = delta
        self.tau = tau
        self.max_depth = max_depth
        self.max_nodes = max_nodes
        self.n_split_points = n_split_points
        self.min_branch_fraction = min_branch_fraction
        self.nominal_features = nominal_features
        self.leaf_init = leaf_init
        self.loocv_counts = loocv_counts
        self.refit_every = refit_every
        self.refit_steps = refit_steps
        self.prior_weight = prior_weight
        self.m = m
        self.half_life = half_life
        self.drift_delta = drift_delta
        self.drift_patience = drift_patience
        self.naive_bayes = naive_bayes
        validate_config(self.get_config())
        self._reset()

    # -- configuration ------------------------------------------------------------------
    def get_config(self) -> dict[str, Any]:
        """The complete configuration as JSON-able data: ``ProbabilityTree(**config)``."""
        config = {name: getattr(self, name) for name in self._get_params()}
        config["nominal_features"] = list(self.nominal_features or ())
        return config

    @property
    def _multiclass(self) -> bool:
        return True

    def _make_smoother(self) -> Smoother:
        if self.smoothing == "hgs":
            return HGS(steps=self.refit_steps, prior_weight=self.prior_weight)
        if self.smoothing == "mestimate":
            return MEstimate(m=self.m)
        return SMOOTHERS[self.smoothing]()

    def _reset(self) -> None:
        self.registry = FeatureRegistry(self.nominal_features or ())
        self.classes_: list[ClassLabel] = []
        self._class_index: dict[ClassLabel, int] = {}
        self.n_examples = 0
        # structure: Python lists for the per-event walk, mirrored in numpy on demand
        self._parent: list[int] = [-1]
        self._left: list[int] = [LEAF]
        self._right: list[int] = [LEAF]
        self._kind: list[int] = [LEAF]  # LEAF, NUMERIC or NOMINAL
        self._col: list[int] = [0]
        self._thr: list[float] = [0.0]
        self._depth: list[int] = [0]
        self._slot: list[int] = [-1]
        self._parent_arr = np.full(16, -1, dtype=np.int64)
        self.counts_ = np.zeros((16, 0))
        self._inherited = np.zeros((16, 0))
        self._stats = LeafStats()
        self._slot[0] = self._stats.allocate()
        self._smoother = self._make_smoother()
        self._nb = NaiveBayesFactor() if self.naive_bayes else None
        self._topology: Topology | None = None
        self.growth_stopped = False
        self._drift = Adaptation(self.drift_delta, self.drift_patience) if self.drift_delta is not None else None

    @property
    def _background(self) -> ProbabilityTree | None:
        return self._drift.background if self._drift is not None else None

    @property
    def n_nodes(self) -> int:
        return len(self._parent)

    @property
    def parent_(self) -> IntArray:
        """Parent of every node (-1 for the root)."""
        return self._parent_arr[: self.n_nodes]

    @property
    def topology_(self) -> Topology:
        if self._topology is None:
            self._topology = Topology.from_parent(self.parent_)
        return self._topology

    def _node_counts(self) -> FloatArray:
        return self.counts_[: self.n_nodes, : len(self.classes_)]

    # -- learning -----------------------------------------------------------------------
    def _class_id(self, y: ClassLabel) -> int:
        k = self._class_index.get(y)
        if k is None:
            k = len(self.classes_)
            self.classes_.append(y)
            self._class_index[y] = k
            self.counts_ = np.pad(self.counts_, ((0, 0), (0, 1)))
            self._inherited = np.pad(self._inherited, ((0, 0), (0, 1)))
            self._sync_stats_shape()
            if self._background is not None:
                self._background._class_id(y)  # same class order in both trees
        return k

    def _sync_stats_shape(self) -> None:
        reg = self.registry
        self._stats.resize(len(self.classes_), reg.n_numeric, reg.n_nominal, reg.max_values)
        if self._nb is not None:
            self._nb.resize(len(self.classes_), reg.n_numeric, reg.n_nominal, reg.max_values)
        if self._background is not None:
            self._background.registry = reg  # one registry: both trees read the same encoding
            self._background._sync_stats_shape()

    def _set_shift(self, col: int, value: float) -> None:
        self._stats.set_shift(col, value)
        if self._nb is not None:
            self._nb.stats.set_shift(col, value)
        if self._background is not None:
            self._background._set_shift(col, value)

    def learn_one(self, x: Mapping[Hashable, Any], y: ClassLabel) -> None:
        """Learn one labelled example. Raises :class:`InputError` and changes nothing when the
        label or a feature value cannot be used."""
        y = _check_label(y)
        reg = self.registry
        shape = (reg.n_numeric, reg.n_nominal, reg.max_values)
        row = reg.encode(x, learn=True)  # validates before it registers anything
        k = self._class_id(y)
        if (reg.n_numeric, reg.n_nominal, reg.max_values) != shape:
            self._sync_stats_shape()
            for col, value in zip(row.num_cols, row.num_vals):
                if col >= shape[0]:
                    self._set_shift(col, value)
        path = self._route(x)
        node = path[-1]
        counts = self.counts_
        drift = self._drift
        background = drift.background if drift is not None else None
        # scores first: each reads the models as they were before this example
        nb = self._nb
        if nb is not None and (self.n_examples + 1) % SAMPLE_EVERY == 0:
            nb.score(self._smoothed(path), nb.row_loglik(*self._row_lists(row), len(self.classes_)), k)
        if drift is not None:
            error = drift.error(counts[node, : len(self.classes_)].tolist(), k)
            if background is not None:
                self._compare(path, background._route(x), *self._row_lists(row), k)
        if nb is not None:
            nb.stats.update_one(0, k, row.num_cols, row.num_vals, row.nom_cols, row.nom_codes)
        for n in path:
            counts[n, k] += 1.0
        self.n_examples += 1
        slot = self._slot[node]
        if self._kind[node] == LEAF and slot >= 0:
            self._stats.update_one(slot, k, row.num_cols, row.num_vals, row.nom_cols, row.nom_codes)
            if self._stats.seen[slot] - self._stats.last_attempt[slot] >= self.grace_period:
                self._attempt_split(node)
        if background is not None:
            background.learn_one(x, y)
        if self.n_examples % self.refit_every == 0:
            self._refit()
        if drift is not None:
            self._watch(drift.error_rose(error))

    def _route(self, x: Mapping[Hashable, Any]) -> list[int]:
        """Root-to-node path of ``x``; it stops where the split feature is missing."""
        kind, col, thr, left, right = self._kind, self._col, self._thr, self._left, self._right
        reg = self.registry
        names, codes, value_of = reg.names_by_kind, reg.codes, reg.value_of
        node = 0
        path = [0]
        while True:
            kd = kind[node]
            if kd == LEAF:
                return path
            c = col[node]
            v: Any = x.get(names[kd][c])
            t = type(v)
            # the common exact types inline; anything else through value_of (same semantics)
            if kd == NUMERIC and (t is float or t is int):
                if v != v:
                    return path
                go_left = v <= thr[node]
            elif kd == NOMINAL and (t is str or t is bool):
                go_left = codes[c].get(v, -1) == thr[node]
            else:
                v = value_of(kd, c, v)
                if v is None:
                    return path
                go_left = v <= thr[node] if kd == NUMERIC else v == thr[node]
            node = left[node] if go_left else right[node]
            path.append(node)

    def _attempt_split(self, node: int) -> None:
        stats = self._stats
        slot = self._slot[node]
        stats.last_attempt[slot] = stats.seen[slot]
        suggestion = stats.best_split(slot, self.split_criterion, self.n_split_points, self.min_branch_fraction)
        if suggestion is None or suggestion.merit <= 0:
            return
        eps = hoeffding_bound(RANGES[self.split_criterion](len(self.classes_)), self.delta, stats.seen[slot])
        if suggestion.merit - suggestion.second_merit > eps or eps < self.tau:
            self._split(node, suggestion)

    def _split(self, node: int, suggestion: SplitSuggestion) -> None:
        if self.n_nodes + 2 > self.max_nodes:
            self._stop_growth()
            return
        depth = self._depth[node] + 1
        children = []
        for counts in (suggestion.left, suggestion.right):
            child = self.n_nodes
            self._parent.append(node)
            self._left.append(LEAF)
            self._right.append(LEAF)
            self._kind.append(LEAF)
            self._col.append(0)
            self._thr.append(0.0)
            self._depth.append(depth)
            can_grow = self.max_depth is None or depth < self.max_depth
            self._slot.append(self._stats.allocate() if can_grow else -1)
            if child >= self._parent_arr.shape[0]:
                grow = self._parent_arr.shape[0]
                self._parent_arr = np.concatenate([self._parent_arr, np.full(grow, -1, dtype=np.int64)])
                self.counts_ = np.concatenate([self.counts_, np.zeros_like(self.counts_)])
                self._inherited = np.concatenate([self._inherited, np.zeros_like(self._inherited)])
            self._parent_arr[child] = node
            if self.leaf_init == "inherit":
                self.counts_[child, : len(counts)] = counts
                self._inherited[child, : len(counts)] = counts
            children.append(child)
        self._left[node], self._right[node] = children
        self._kind[node] = suggestion.kind
        self._col[node] = suggestion.col
        self._thr[node] = suggestion.threshold
        self._stats.release(self._slot[node])
        self._slot[node] = -1
        self._topology = None

    def _stop_growth(self) -> None:
        """Free every leaf's split statistics: the tree keeps counting but no longer splits."""
        self._slot = [-1] * self.n_nodes
        self._stats = LeafStats()
        self._sync_stats_shape()
        self.growth_stopped = True

    def _refit(self) -> None:
        if self._nb is not None:
            self._nb.refresh(len(self.classes_))
            self._nb.fit()
        if self.half_life is not None:
            # forget: every count loses half its weight each half_life examples, applied per
            # refit block so that every example within a block weighs the same
            factor = 0.5 ** (self.refit_every / self.half_life)
            self.counts_[: self.n_nodes] *= factor
            self._inherited[: self.n_nodes] *= factor
        counts = self._node_counts()
        fit_counts = counts - self._inherited[: self.n_nodes, : counts.shape[1]] if self.loocv_counts == "honest" else counts
        self._smoother.refit(self.topology_, counts, fit_counts)

    # -- drift (policy and state: streamtree.adaptation) ---------------------------------
    def _compare(self, path: Sequence[int], background_path: Sequence[int], values: list[float], codes: list[int], k: int) -> None:
        """Score the tree and the background tree on one example, before either learns it."""
        drift, background = self._drift, self._background
        assert drift is not None and background is not None
        drift.compare(self._proba_on_path(path, values, codes)[k], background._proba_on_path(background_path, values, codes)[k])

    def _watch(self, detected: bool) -> None:
        """After an example: start, adopt or drop the background tree."""
        drift = self._drift
        assert drift is not None
        if detected and self._nb is not None:
            # the feature models describe the concept that just failed: until the next refit
            # (or a swap), predict from the counts alone
            self._nb.gamma = 0.0
        action = drift.decide(detected, self.n_examples)
        if action == "start":
            drift.started(self._new_background())
        elif action == "adopt":
            background = drift.background
            assert background is not None
            for name in self._TREE_STATE:
                setattr(self, name, getattr(background, name))
            drift.adopted(self.n_examples)

    _TREE_STATE = (
        "_parent", "_left", "_right", "_kind", "_col", "_thr", "_depth", "_slot",
        "_parent_arr", "counts_", "_inherited", "_stats", "_smoother", "_nb", "_topology", "growth_stopped",
    )
    """What a background tree hands over when it replaces the tree (the example counter, the
    registry, the classes and the drift history stay)."""

    def _new_background(self) -> ProbabilityTree:
        """An empty tree of the same configuration that reads this tree's encoding and classes."""
        background = ProbabilityTree(**{**self.get_config(), "drift_delta": None})
        background.registry = self.registry
        for label in self.classes_:
            background._class_id(label)
        background._stats.shift[:] = self._stats.shift[: background._stats.shift.shape[0]]
        if self._nb is not None and background._nb is not None:
            background._nb.stats.shift[:] = self._nb.stats.shift[: background._nb.stats.shift.shape[0]]
        return background

    def drift_summary(self) -> dict[str, Any]:
        """Detected changes, the background tree and swaps, as JSON-able data."""
        return self._drift.summary() if self._drift is not None else dict(OFF)

    # -- prediction ---------------------------------------------------------------------
    def _path_of(self, x: Mapping[Hashable, Any]) -> list[int]:
        check_mapping(x)
        return self._route(x)

    def _smoothed(self, path: Sequence[int]) -> FloatArray:
        """The smoother's probabilities at the end of ``path`` (strictly positive)."""
        return self._finish(self._smoother.path_proba(self.parent_, self._node_counts(), path))

    def _row_lists(self, row: EncodedRow) -> tuple[list[float], list[int]]:
        """One encoded example as values and codes by column (NaN and -1 where missing)."""
        reg = self.registry
        values = [math.nan] * reg.n_numeric
        for col, value in zip(row.num_cols, row.num_vals):
            values[col] = value
        codes = [-1] * reg.n_nominal
        for col, code in zip(row.nom_cols, row.nom_codes):
            codes[col] = code
        return values, codes

    def _proba_on_path(self, path: Sequence[int], values: list[float], codes: list[int]) -> list[float]:
        """What :meth:`predict_proba_one` serves for an example with this path and features."""
        proba: list[float] = self._smoothed(path).tolist()
        nb = self._nb
        if nb is not None and nb.gamma:
            proba = nb.temper(proba, nb.row_loglik(values, codes, len(proba)))
        return proba

    def _finish(self, proba: FloatArray) -> FloatArray:
        """Strictly positive rows summing to one: only MLE needs the floor (``_MIN_PROBA``)."""
        if self._smoother.strictly_positive:
            return proba
        proba = np.maximum(proba, _MIN_PROBA)
        return proba / proba.sum(axis=-1, keepdims=True)

    def predict_proba_one(self, x: Mapping[Hashable, Any], **kwargs: Any) -> dict[ClassLabel, float]:
        """Probability of every class seen so far (``{}`` before any label); each > 0."""
        if not self.classes_:
            return {}
        path = self._path_of(x)
        if self._nb is not None and self._nb.gamma:
            return dict(zip(self.classes_, self._proba_on_path(path, *encode_one(self.registry, x))))
        return dict(zip(self.classes_, self._smoothed(path).tolist()))

    def predict_one(self, x: Mapping[Hashable, Any], **kwargs: Any) -> ClassLabel | None:
        proba = self.predict_proba_one(x)
        return max(proba, key=proba.__getitem__) if proba else None

    # -- batches ------------------------------------------------------------------------
    def learn_many(self, X: Any, y: Any, *, return_proba: bool = False) -> FloatArray | None:
        """Learn a batch: exactly the model that :meth:`learn_one` on each row in order gives.

        ``X`` is a pandas DataFrame, a 2-D numpy array (features named 0, 1, ...) or a list of
        dicts. The whole batch is validated first: a bad value raises :class:`InputError` and
        nothing of the batch is learned.

        With ``return_proba=True`` it returns the prequential (test-then-train) predictions:
        row ``i`` is what :meth:`predict_proba_one` gave for ``X[i]`` just before it was
        learned, in columns following :attr:`classes_` as they are after the batch (0 for a
        class the model had not seen yet at that row).
        """
        if return_proba:
            return self._learn_scored(X, y)
        labels = [_check_label(v) for v in (y.tolist() if hasattr(y, "tolist") else y)]
        registry, num, nom, first_values = encode_batch(self.registry, X)
        if len(labels) != num.shape[0]:
            raise InputError(f"X and y must have the same length. Got {num.shape[0]} and {len(labels)}.", field="y")
        self.registry = registry
        self._sync_stats_shape()
        for col, value in first_values.items():
            self._set_shift(col, value)
        learn_encoded(self, num, nom, labels)
        return None

    def _learn_scored(self, X: Any, y: Any) -> FloatArray:
        labels = [_check_label(v) for v in (y.tolist() if hasattr(y, "tolist") else y)]
        _, num, _, _ = encode_batch(self.registry, X)  # validates the whole batch first
        if len(labels) != num.shape[0]:
            raise InputError(f"X and y must have the same length. Got {num.shape[0]} and {len(labels)}.", field="y")
        if isinstance(X, pd.DataFrame):
            rows = X.to_dict("records")
        elif isinstance(X, np.ndarray):
            rows = [dict(enumerate(row)) for row in X.tolist()]
        else:
            rows = list(X)
        probas = []
        for x, label in zip(rows, labels):
            probas.append(self.predict_proba_one(x))
            self.learn_one(x, label)
        out = np.zeros((len(rows), len(self.classes_)))
        for i, proba in enumerate(probas):
            for k, label in enumerate(self.classes_):
                out[i, k] = proba.get(label, 0.0)
        return out

    def predict_proba(self, X: Any) -> FloatArray:
        """``(n, len(classes_))`` probabilities; columns follow :attr:`classes_`."""
        nb = self._nb if self._nb is not None and self._nb.gamma else None
        if nb is None and isinstance(X, list) and all(isinstance(x, Mapping) for x in X):
            # dicts: walking each down its path beats encoding every feature of every row
            nodes = np.array([self._route(x)[-1] for x in X], dtype=np.int64)
        else:
            num, nom = encode_for_prediction(self.registry, X)
            nodes = self._route_matrix(num, nom, 0)
        if not self.classes_:
            return np.zeros((nodes.shape[0], 0))
        proba = self._finish(self._smoother.predict(self.topology_, self._node_counts(), nodes))
        return proba if nb is None else nb.apply(proba, nb.loglik(num, nom, proba.shape[1]))

    def predict_proba_many(self, X: Any) -> pd.DataFrame:
        """:meth:`predict_proba` as a DataFrame indexed like ``X``, one column per class."""
        index = X.index if isinstance(X, pd.DataFrame) else None
        return pd.DataFrame(self.predict_proba(X), columns=list(self.classes_), index=index)

    def predict_many(self, X: Any) -> pd.Series:
        proba = self.predict_proba_many(X)
        if proba.shape[1] == 0:
            return pd.Series([None] * len(proba), index=proba.index, dtype=object)
        return proba.idxmax(axis=1)

    def _route_matrix(self, num: FloatArray, nom: IntArray, start: int) -> IntArray:
        """The node each encoded row ends at, from ``start``: one numpy pass per depth level."""
        s = self.n_nodes
        kind = np.array(self._kind)
        col = np.array(self._col)
        thr = np.array(self._thr)
        left = np.array(self._left)
        right = np.array(self._right)
        node = np.full(num.shape[0], start, dtype=np.int64)
        active = np.flatnonzero(kind[node] != LEAF)
        while active.size and s > 1:
            nd = node[active]
            kd = kind[nd]
            c = col[nd]
            is_num = kd == NUMERIC
            v_num = np.where(is_num, num[active, np.where(is_num, c, 0)] if num.shape[1] else np.nan, np.nan)
            v_nom = np.where(~is_num, nom[active, np.where(~is_num, c, 0)] if nom.shape[1] else -1, -1)
            missing = np.where(is_num, np.isnan(v_num), v_nom < 0)
            go_left = np.where(is_num, v_num <= thr[nd], v_nom == thr[nd])
            nxt = np.where(go_left, left[nd], right[nd])
            moving = ~missing
            node[active[moving]] = nxt[moving]
            active = active[moving]
            active = active[kind[node[active]] != LEAF]
        return node

    # -- introspection ------------------------------------------------------------------
    def summary(self) -> dict[str, Any]:
        """Size and state of the model as JSON-able data."""
        n_leaves = sum(1 for k in self._kind if k == LEAF)
        out: dict[str, Any] = {
            "n_nodes": self.n_nodes,
            "n_leaves": n_leaves,
            "depth": max(self._depth),
            "n_examples": self.n_examples,
            "classes": list(self.classes_),
            "n_features": len(self.registry.names),
            "smoothing": self.smoothing,
            "growth_stopped": self.growth_stopped,
            # logical sizes, not capacity: the same model reports the same number after a reload
            "memory_bytes": self._memory_bytes(),
            "drift": self.drift_summary(),
        }
        if isinstance(self._smoother, HGS):
            out["hgs"] = {"prior_weight": self._smoother.alpha0, "n_refits": self._smoother.n_refits}
        if self._nb is not None:
            out["naive_bayes"] = {"gamma": self._nb.gamma, "n_scored": self._nb.n_scored}
        return out

    def _memory_bytes(self) -> int:
        """Counts, split statistics, the naive-Bayes statistics and any background tree."""
        size = 2 * self._node_counts().nbytes + self._stats.nbytes
        if self._nb is not None:
            size += self._nb.stats.nbytes
        if self._background is not None:
            size += self._background._memory_bytes()
        return int(size)

    def _split_description(self, node: int) -> dict[str, Any] | None:
        kind = self._kind[node]
        if kind == LEAF:
            return None
        feature = self.registry.feature_of(kind, self._col[node])
        if kind == NUMERIC:
            return {"feature": feature, "operator": "<=", "value": self._thr[node]}
        value = self.registry.values[self._col[node]][int(self._thr[node])]
        return {"feature": feature, "operator": "==", "value": value}

    def explain_one(self, x: Mapping[Hashable, Any]) -> dict[str, Any]:
        """The path ``x`` takes, each node's counts, MLE, weight and share of the probability.

        With HGS the leaf's probability (``smoothed``) is a mixture: the leaf's own relative
        frequencies with share ``n_l / Z``, each ancestor's with share ``alpha_p / Z`` and the
        uniform pseudo-node with share ``alpha0 / Z``, ``Z = n_l + sum alpha_p + alpha0``; the
        shares sum to one. With ``naive_bayes=True``, ``naive_bayes`` holds ``gamma`` and each
        class's log likelihood ``ll``, and ``proba`` is ``smoothed * exp(gamma * ll)``
        renormalised; otherwise ``proba`` is ``smoothed``.
        """
        proba = self.predict_proba_one(x)  # first: it also sizes the smoother to the tree
        path = self._path_of(x) if self.classes_ else [0]
        counts = self._node_counts()
        totals = counts[path].sum(axis=1)
        shares: list[float | None] = [None] * len(path)
        prior_share = None
        if isinstance(self._smoother, HGS) and self.classes_:
            alpha = self._smoother.alpha
            # ancestors weigh alpha (0 without counts), the node itself its own count
            weights = [float(alpha[p]) if totals[i] > 0 else 0.0 for i, p in enumerate(path[:-1])]
            weights.append(float(totals[-1]))
            z = sum(weights) + self._smoother.alpha0
            if z > 0:
                shares = [w / z for w in weights]
                prior_share = self._smoother.alpha0 / z
        nodes = [
            {
                "node": node,
                "depth": self._depth[node],
                "split": self._split_description(node),
                "counts": dict(zip(self.classes_, counts[node].tolist())),
                "mle": dict(zip(self.classes_, (counts[node] / totals[i]).tolist())) if totals[i] > 0 else None,
                "alpha": float(self._smoother.alpha[node]) if isinstance(self._smoother, HGS) and i < len(path) - 1 else None,
                "share": shares[i],
            }
            for i, node in enumerate(path)
        ]
        return {
            "path": nodes,
            "leaf": path[-1],
            "stopped_early": self._kind[path[-1]] != LEAF,
            "prior_share": prior_share,
            "smoothed": dict(zip(self.classes_, self._smoothed(path).tolist())) if self.classes_ else {},
            "naive_bayes": self._explain_factor(x),
            "proba": proba,
            "drift": self.drift_summary(),
        }

    def _explain_factor(self, x: Mapping[Hashable, Any]) -> dict[str, Any] | None:
        nb = self._nb
        if nb is None or not self.classes_:
            return None
        loglik = nb.row_loglik(*encode_one(self.registry, x), len(self.classes_))
        return {"gamma": nb.gamma, "loglik": dict(zip(self.classes_, loglik))}

    @property
    def tree_(self) -> dict[str, Any]:
        """The tree as plain data (lists), one entry per node."""
        alpha = None
        if isinstance(self._smoother, HGS):
            self._smoother.grow(self.parent_)  # nodes created since the last refit get their weight
            alpha = self._smoother.alpha[: self.n_nodes].tolist()
        return {
            "classes": list(self.classes_),
            "parent": list(self._parent),
            "left": [c if c != LEAF else None for c in self._left],
            "right": [c if c != LEAF else None for c in self._right],
            "depth": list(self._depth),
            "split": [self._split_description(i) for i in range(self.n_nodes)],
            "counts": self._node_counts().tolist(),
            "alpha": alpha,
            "prior_weight": self._smoother.alpha0 if isinstance(self._smoother, HGS) else None,
        }

    # -- persistence --------------------------------------------------------------------
    def to_bytes(self) -> bytes:
        """The model in streamtree's safe, versioned format (no pickle)."""
        from streamtree.persistence import dump

        return dump(self)

    @classmethod
    def from_bytes(cls, data: bytes) -> ProbabilityTree:
        """Read a model written by :meth:`to_bytes`."""
        from streamtree.persistence import load

        return load(cls, data)
