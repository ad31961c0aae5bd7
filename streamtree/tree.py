"""``ProbabilityTree``: an online probability estimation tree with hierarchical smoothing.

Every example increments the class counts of every node on its path, so each internal node
holds an up-to-date estimate; a :class:`~streamtree.smoothing.Smoother` turns those counts
into leaf probabilities (HGS by default: each leaf backed off to all its ancestors at once).
The tree grows Hoeffding-style: a leaf tries to split every ``grace_period`` examples it sees,
and splits when the best split's merit beats the runner-up's by more than the Hoeffding bound
(or the bound falls below the tie threshold, ``tau`` times the criterion's range). A change
detector on the tree's error grows a background
tree after a detected change and swaps it in once it predicts better
(the drift policy in :mod:`streamtree.kernels.learn`); an opt-in naive-Bayes factor adds the features' evidence inside
a leaf (:mod:`streamtree.kernels.naive_bayes`).

This class only orchestrates. The tree is plain data (:class:`~streamtree.state.TreeArrays`),
the work is done by compiled kernels (:mod:`streamtree.kernels`), and one loop
(:func:`~streamtree.kernels.learn.learn_rows`) learns every example, one at a time or in
batches: this class encodes examples (:mod:`streamtree.encoding`), makes room in the arrays,
and holds the tree and the background tree by reference.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from streamtree import growth, inspection
from streamtree.classifier import Classifier
from streamtree.config import validate_config
from streamtree.dispatch import direct
from streamtree.kernels.handle import drift_handle, tree_handle
from streamtree.features import FeatureRegistry, check_mapping
from streamtree.kernels.learn import (
    ADOPT, C_CRITERION, C_DELTA, C_DRIFT, C_GRACE, C_HALF_LIFE, C_HONEST, C_INHERIT, C_LINEAR, C_M, C_MAX_DEPTH,
    C_MAX_NODES, C_MIN_BRANCH, C_NB, C_PATIENCE, C_REFIT_EVERY, C_REFIT_STEPS, C_SEED, C_SMOOTHER, C_SPLIT_POINTS,
    C_SPLITTER, C_SUBSPACE, C_TAU, C_TAU_RANGE, CONFIG_FLOATS, CONFIG_INTS, DONE, GROW, SPLITTER_CODES, START, learn_rows,
    predict_rows,
)
from streamtree.kernels.split import CRITERION_CODES
from streamtree.smoothing import make_smoother
from streamtree.state import (
    D_ACTIVE, D_COMPARED, D_GAP, M_NODES, M_STOPPED, PARENT, DriftArrays, TreeArrays, new_arrays, new_drift,
)
from streamtree.typing import ClassLabel, FloatArray

if TYPE_CHECKING:
    from streamtree.persistence import Capture

__all__ = ["ProbabilityTree", "class_ids"]

_NO_DRIFT = new_drift(0.002)  # what the loop is given (and never reads) when detection is off
_NO_PROBA = np.zeros((0, 0))  # likewise for the predictions, when they are not asked for
_ONCE = np.ones(1, dtype=np.int64)  # learn_one's repetitions: its row, once
#: learn_one's class id array for each of the first 64 class ids, shared: the loop only reads it
_CLASS_ID = [np.full(1, k, dtype=np.int64) for k in range(64)]


def _at_entry(num: np.ndarray, nom: np.ndarray) -> bool:
    """Whether encoded rows go to a kernel's compiled entry point (:mod:`streamtree.dispatch`):
    one event, in matrices of the one type the entry points are resolved for (C-contiguous and
    writable; their dtypes are the encoding's). A batch's row need not be."""
    f, g = num.flags, nom.flags  # spelled out, not a generator: this runs on every event
    plain = f.c_contiguous and f.writeable and g.c_contiguous and g.writeable
    return num.shape[0] == 1 and bool(plain)


def class_ids(classes: list[ClassLabel], index: dict[ClassLabel, int], labels: list[ClassLabel]) -> np.ndarray:
    """The class id of each label (int64), registering new labels in ``classes`` and ``index``
    in order of first appearance: the learning loop counts a class from its first row. A
    forest's members share one ``classes`` and ``index``, so the forest registers once. The
    kernels only read the ids: one known label's array is shared, not built."""
    if len(labels) == 1:  # one event of a known class: a shared array (0.1 against 0.7 us)
        k = index.get(labels[0])
        if k is not None and k < len(_CLASS_ID):
            return _CLASS_ID[k]
    try:  # every label known (the steady state): one pass
        return np.fromiter(map(index.__getitem__, labels), dtype=np.int64, count=len(labels))
    except KeyError:  # new labels: register them in order
        pass
    ids = []
    for label in labels:
        k = index.get(label)
        if k is None:
            k = index[label] = len(classes)
            classes.append(label)
        ids.append(k)
    return np.array(ids, dtype=np.int64)


class ProbabilityTree(Classifier):
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
        Split anyway when the Hoeffding bound falls below the tie threshold (ties): ``tau``
        times the criterion's range ``R`` (``tau_scale="range"``, the default) or ``tau``
        itself (``"absolute"``).
    tau_scale
        ``"range"`` or ``"absolute"`` (river's, and this class's before it had the parameter).
        The bound is ``eps = R sqrt(ln(1/delta) / (2 n))`` with ``R = log2 K`` for information
        gain over ``K`` classes, so an absolute threshold makes a leaf wait longer the more
        classes the stream has: at ``tau=0.2``, ``delta=0.2`` a binary leaf could break a tie at
        21 examples, a 5-class one at 109 and a 10-class one at 222. Relative to ``R`` every
        class count breaks ties at the same count (21: the first attempt at
        ``grace_period=30``). Measured on the 25 streams of ``bench/results/forests.md``: the
        binary streams unchanged to the last digit, the many-class ones lower (RandomRBF -17%,
        RandomRBF-5c -18%, ImageSegments -24%; 10-tree BT+ -22%, -21%, -26%), none higher by
        more than 0.2% (``bench/results/tie_threshold.md``).
    max_depth
        The deepest a leaf may be (the root has depth 0); ``None`` for no limit.
    max_nodes
        Growth stops cleanly at this many nodes: leaves keep learning counts, split
        statistics are freed.
    max_features
        Most distinct features the model learns. An example that would register more is
        refused (:class:`~streamtree.exceptions.InputError` naming ``max_features``) and
        changes nothing; every feature grows each leaf's statistics and the saved model.
    max_categories
        Values a nominal feature keeps apart (``None``: all); later ones share one more code,
        *other*, also an unseen value's at prediction once the feature has it. Each code is a
        row of every growing leaf's statistics: an id-like feature would otherwise grow them
        with every example (:mod:`streamtree.features`). 255: 256 codes with *other*.
    max_bytes
        Budget of the tree's arrays in bytes (``None``: none): growth that would pass it stops
        the tree as ``max_nodes`` does (:mod:`streamtree.growth`). ``summary()`` reports both.
    n_split_points
        Candidate thresholds per numeric feature at each split attempt.
    min_branch_fraction
        A split must send more than this fraction of a leaf's examples each way. The default
        ``0.001`` lets a split cut off a small pocket of a rare class (river's ``0.01`` did
        not: on Shuttle, where the rarer class is 7% of the stream, 0.01 left leaves that
        were 99.99% sure of the wrong class; 0.001 took the log loss from 0.0131 to 0.0059
        and moved no other stream of the 25 by more than 0.1%,
        ``bench/results/min_branch_fraction.md``).
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
        Forget: every count, and every growing leaf's split statistics, lose half their weight
        each ``half_life`` examples (applied at each refit, so examples of one ``refit_every``
        block weigh the same). ``None`` (the default) keeps every count. Forgetting helps
        under drift (-7.5% log loss with ``half_life=2000`` on RandomRBFDrift, -6.9% on
        Agrawal-gradual) but costs a little on stationary streams (up to +2.0%, statistically
        detectable), so it is off unless asked for; abrupt change
        is handled by ``drift_delta``.
    drift_delta
        Change detection, on by default: ADWIN with this confidence watches the tree's error
        (is the top class of the leaf's counts, before the update, wrong?). On a detected rise
        of the error a *background tree* starts from nothing and learns every example beside
        the tree; both predict each example before learning it, and once the background tree's
        log likelihood on at least 10 shared examples beats the tree's by 2 nats, it replaces
        the tree (the drift policy in :mod:`streamtree.kernels.learn`). A stationary stream's error does not rise, so
        there it costs nothing (measured: the same models as with detection off). ``None``
        turns detection off.
    drift_patience
        A background tree that has not replaced the tree after this many examples is dropped
        (the next detected change starts a new one).
    naive_bayes
        Multiply the smoothed leaf probabilities by a tempered naive-Bayes likelihood of the
        example's features, ``p(y|x) ~ p_tree(y|leaf) * prod_f p(x_f|y)**gamma``, with the
        feature models learned from every example and ``gamma`` in [0, 1] fitted online on
        examples scored before they are learned (:mod:`streamtree.kernels.naive_bayes`). Off by
        default: over the counts alone it pays where features carry information inside a leaf
        (measured: log loss -16% on Hyperplane, -17% on Waveform), which the linear component
        now covers; on top of it, it still helps on a few streams (Agrawal -11%) and costs
        where the concept is a few crisp rules (Shuttle +76%).
    linear
        Pool the smoothed leaf probabilities with an online multinomial logistic regression on
        the standardised numeric features, ``p(y|x) ~ p_tree(y|leaf)**a * p_lr(y|x)**(b + c u)``
        with ``u = 1 - max p_tree`` the leaf's uncertainty, ``a`` in [0, 1] and ``b, c >= 0``
        fitted by Newton steps on the last 1,000 examples as they were predicted before being
        learned (:mod:`streamtree.kernels.linear`); a detected change resets the pool to the
        tree alone. On by default: where the concept is smooth or linear inside a leaf the
        regression carries it (measured on 25 streams: log loss -40% on Waveform, -38% on
        Hyperplane, -48% on ImageSegments), and where it is not the fitted weights keep it near
        the tree alone (within 4% of its log loss on every stream). Without numeric features
        it does nothing.
    splitter
        How a leaf chooses its split: ``"hoeffding"`` (the default: the best split by
        ``split_criterion`` once the Hoeffding test is sure of it), ``"subspace"`` (the same
        among ``subspace_size`` features drawn at random at each attempt, as in random
        forests) or ``"random"`` (a random feature and threshold at each attempt, no
        criterion and no test, as in random decision trees; a leaf of one class does not
        split). The randomized splitters are for the members of
        :class:`~streamtree.forest.ProbabilityForest`.
    subspace_size
        Features a ``"subspace"`` attempt draws; ``None``: the square root of the features
        known, rounded (at least 1).
    seed
        The seed of the randomized splitters' draws, a non-negative int: each draw is a hash of
        the seed, the leaf and the attempt (:mod:`streamtree.kernels.randomness`), so the same
        seed and examples give the same tree.

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
        tau_scale: str = "range",
        max_depth: int | None = None,
        max_nodes: int = 20_000,
        max_features: int = 10_000,
        max_categories: int | None = 255,
        max_bytes: int | None = 2**28,
        n_split_points: int = 10,
        min_branch_fraction: float = 0.001,
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
        linear: bool = True,
        splitter: str = "hoeffding",
        subspace_size: int | None = None,
        seed: int = 0,
    ) -> None:
        self.smoothing = smoothing
        self.split_criterion = split_criterion
        self.grace_period = grace_period
        self.delta = delta
        self.tau = tau
        self.tau_scale = tau_scale
        self.max_depth = max_depth
        self.max_nodes = max_nodes
        self.max_features = max_features
        self.max_categories = max_categories
        self.max_bytes = max_bytes
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
        self.linear = linear
        self.splitter = splitter
        self.subspace_size = subspace_size
        self.seed = seed
        validate_config(self.get_config() | {"nominal_features": nominal_features})  # as given: a str is no list
        self._smoother = make_smoother(smoothing, steps=refit_steps, prior_weight=prior_weight, m=m)
        self._cfg_i, self._cfg_f = self._kernel_config()
        self._reset()

    # -- configuration ------------------------------------------------------------------
    def get_config(self) -> dict[str, Any]:
        """The complete configuration as JSON-able data: ``ProbabilityTree(**config)``."""
        config = {name: getattr(self, name) for name in self._get_params()}
        config["nominal_features"] = list(self.nominal_features or ())
        return config

    def _kernel_config(self) -> tuple[np.ndarray, np.ndarray]:
        """The configuration as the kernels read it (``C_*`` indexes of ``kernels.learn``)."""
        cfg_i = np.zeros(CONFIG_INTS, dtype=np.int64)
        cfg_i[C_GRACE] = self.grace_period
        cfg_i[C_MAX_DEPTH] = -1 if self.max_depth is None else self.max_depth
        cfg_i[C_MAX_NODES] = self.max_nodes
        cfg_i[C_SPLIT_POINTS] = self.n_split_points
        cfg_i[C_CRITERION] = CRITERION_CODES[self.split_criterion]
        cfg_i[C_INHERIT] = self.leaf_init == "inherit"
        cfg_i[C_HONEST] = self.loocv_counts == "honest"
        cfg_i[C_REFIT_EVERY] = self.refit_every
        cfg_i[C_REFIT_STEPS] = self.refit_steps
        cfg_i[C_SMOOTHER] = self._smoother.code
        cfg_i[C_NB] = self.naive_bayes
        cfg_i[C_LINEAR] = self.linear
        cfg_i[C_DRIFT] = self.drift_delta is not None
        cfg_i[C_PATIENCE] = self.drift_patience
        cfg_i[C_HALF_LIFE] = -1 if self.half_life is None else self.half_life
        cfg_i[C_SPLITTER] = SPLITTER_CODES[self.splitter]
        cfg_i[C_SEED] = self.seed
        cfg_i[C_SUBSPACE] = 0 if self.subspace_size is None else self.subspace_size
        cfg_i[C_TAU_RANGE] = self.tau_scale == "range"
        cfg_f = np.zeros(CONFIG_FLOATS)
        cfg_f[C_DELTA] = self.delta
        cfg_f[C_TAU] = self.tau
        cfg_f[C_MIN_BRANCH] = self.min_branch_fraction
        cfg_f[C_M] = self.m
        return cfg_i, cfg_f

    def _new_tree(self) -> TreeArrays:
        return new_arrays(naive_bayes=self.naive_bayes, prior_weight=self.prior_weight, linear=self.linear)

    def _reset(self) -> None:
        self.registry = FeatureRegistry(self.nominal_features or (), self.max_features, self.max_categories)
        self.classes_: list[ClassLabel] = []
        self._class_index: dict[ClassLabel, int] = {}
        self.n_examples = 0
        self._tree: TreeArrays = self._new_tree()
        self._background: TreeArrays | None = None
        self._drift: DriftArrays | None = new_drift(self.drift_delta) if self.drift_delta is not None else None
        self._shapes: tuple[int, ...] = ()  # (classes, numeric, nominal, values) the arrays were last fitted to
        self._before: tuple[int, int, int] | None = None  # the registry's sizes before this batch, if it grew
        self._fkeys = np.zeros(0, dtype=np.int64)  # the registry's feature keys, for the randomized splitters
        self._handles: dict[int, tuple[Any, Any]] = {}  # id -> (arrays, their handle): _handle

    def __getstate__(self) -> dict[str, Any]:
        """Pickling and deep copies leave out the compiled handles (made again on first use)."""
        return self.__dict__ | {"_handles": {}}

    def _handle(self, arrays: TreeArrays | DriftArrays) -> Any:
        """The compiled handle of a tree's or a detector's arrays (:mod:`streamtree.kernels.handle`),
        made once per set of arrays: a tree grown, adopted or loaded is a new set (the handles of
        sets no longer held are let go)."""
        held = self._handles.get(id(arrays))
        if held is None or held[0] is not arrays:
            live = {id(a) for a in (self._tree, self._background, self._drift, _NO_DRIFT)}
            self._handles = {i: h for i, h in self._handles.items() if i in live}
            handle = drift_handle(arrays) if isinstance(arrays, DriftArrays) else tree_handle(arrays)
            held = self._handles[id(arrays)] = (arrays, handle)
        return held[1]

    @property
    def n_nodes(self) -> int:
        return int(self._tree.meta[M_NODES])

    @property
    def parent_(self) -> np.ndarray:
        """Parent of every node (-1 for the root; a read-only view)."""
        view = self._tree.node[: self.n_nodes, PARENT]
        view.flags.writeable = False
        return view

    @property
    def counts_(self) -> FloatArray:
        """``(n_nodes, len(classes_))`` class counts of every node (a read-only view)."""
        view = self._tree.counts[: self.n_nodes, : len(self.classes_)]
        view.flags.writeable = False
        return view

    @property
    def growth_stopped(self) -> bool:
        return bool(self._tree.meta[M_STOPPED])

    # -- learning -----------------------------------------------------------------------
    def _learn(
        self, num: np.ndarray, nom: np.ndarray, labels: list[ClassLabel], first_values: dict[int, float], want_proba: bool,
        reps: np.ndarray | None = None,
    ) -> FloatArray | None:
        """Run encoded, validated rows through the learning loop (handling its stops);
        ``reps[i]`` times row ``i`` (once each when omitted; see ``learn_rows``)."""
        at_entry = reps is None and _at_entry(num, nom)  # the dispatch would be most of an event's cost
        if reps is None:
            reps = _ONCE if len(labels) == 1 else np.ones(len(labels), dtype=np.int64)
        ks = class_ids(self.classes_, self._class_index, labels)
        self._make_room(first_values, self._registry_shapes())
        proba = np.zeros((len(labels), self._tree.counts.shape[1])) if want_proba else _NO_PROBA
        drift = self._handle(self._drift if self._drift is not None else _NO_DRIFT)
        start = 0
        reason = -1
        while reason != DONE:
            tree = self._handle(self._tree)
            background = tree if self._background is None else self._handle(self._background)
            args = (tree, background, drift, self._cfg_i, self._cfg_f, num, nom, ks, reps, self._fkeys, start,
                    self.n_examples, proba, want_proba)
            stop, reason = direct(learn_rows, *args) if at_entry else learn_rows(*args)
            self.n_examples += stop - start
            start = stop
            self._resolve(reason, reps, stop, None if reason == DONE else (self._before, num, nom, ks))
        return proba[:, : len(self.classes_)] if want_proba else None

    def _registry_shapes(self) -> tuple[int, ...]:
        """(classes, numeric columns, nominal columns, values) the arrays must hold now."""
        reg = self.registry
        return len(self.classes_), reg.n_numeric, reg.n_nominal, reg.max_values

    def _make_room(self, first_values: dict[int, float], shapes: tuple[int, ...]) -> None:
        """Before a batch (classes registered): when the registry's ``shapes`` changed (new
        classes, features or values) or the arrays were replaced since the last check, fit
        both trees to them (:func:`~streamtree.growth.fit_shapes`), keeping the sizes they grow
        from (:class:`~streamtree.growth.Sizes`), and refresh the feature keys. A forest calls
        it on each member with the shapes of the registry they share."""
        if shapes != self._shapes:
            self._before = growth.registry_sizes(self._tree)
            self._tree = growth.fit_shapes(self._tree, self.registry, len(self.classes_), first_values)
            if self._background is not None:
                self._background = growth.fit_shapes(self._background, self.registry, len(self.classes_), first_values)
            self._shapes = shapes
            self._fkeys = self.registry.feature_keys()
        else:
            self._before = None  # nothing new since the last fit: the sizes are the registry's

    def _resolve(self, reason: int, reps: np.ndarray, row: int, rows: tuple[Any, ...] | None = None) -> None:
        """Do what the learning loop stopped for, before it resumes at ``row``.

        Called after every return of the loop (``DONE`` included): a background tree that was
        adopted becomes the tree (one assignment); one the loop dropped (inactive detector) is
        let go; ``GROW`` makes room for row ``row`` learned ``reps[row]`` times (a split per
        repetition at most, in each tree) within ``max_bytes`` given the batch ``rows``
        (:class:`~streamtree.growth.Sizes`); ``START`` makes a background tree. The tree's path
        and a forest's (:mod:`streamtree.kernels.forest`, one member at a time) share it, so
        a member's arrays evolve exactly as a tree's."""
        if reason == ADOPT:
            assert self._background is not None
            self._tree, self._background = self._background, None  # the swap: one assignment
        elif self._background is not None and self._drift is not None and self._drift.drift_s[D_ACTIVE] == 0.0:
            self._background = None  # dropped
        if reason == DONE:
            return
        if reason == GROW:
            room = 2 * max(int(reps[row]), 1)
            sizes = None if rows is None else growth.Sizes(rows[0] or growth.registry_sizes(self._tree), *rows[1:])
            self._tree = growth.grow_for_row(self._tree, room, self.max_bytes, sizes, row)
            if self._background is not None:
                self._background = growth.grow_for_row(self._background, room, self.max_bytes, sizes, row)
        elif reason == START:
            self._background = self._start_background()
        self._shapes = ()  # a grown or new tree: check every shape again next time

    def _start_background(self) -> TreeArrays:
        """An empty tree with the tree's shapes, classes and shifts; comparison from zero."""
        background = growth.like(self._new_tree(), self._tree)
        assert self._drift is not None
        self._drift.drift_s[D_ACTIVE] = 1.0
        self._drift.drift_s[D_GAP] = 0.0
        self._drift.drift_s[D_COMPARED] = 0.0
        return background

    # -- prediction ---------------------------------------------------------------------
    def _predict(self, num: np.ndarray, nom: np.ndarray) -> FloatArray:
        out = np.empty((num.shape[0], self._tree.counts.shape[1]))
        tree = self._handle(self._tree)
        if _at_entry(num, nom):
            direct(predict_rows, tree, self._cfg_i, self._cfg_f, num, nom, out)
        else:
            predict_rows(tree, self._cfg_i, self._cfg_f, num, nom, out)
        return out[:, : len(self.classes_)]

    # -- introspection (streamtree.inspection) -------------------------------------------
    def summary(self) -> dict[str, Any]:
        """Size and state of the model as JSON-able data."""
        return inspection.summary(self)

    def drift_summary(self) -> dict[str, Any]:
        """Detected changes, the background tree and swaps, as JSON-able data."""
        return inspection.drift_summary(self)

    def explain_one(self, x: Mapping[Hashable, Any]) -> dict[str, Any]:
        """The path ``x`` takes, each node's counts, MLE, weight and share of the probability.

        With HGS the leaf's probability (``smoothed``) is a mixture: the leaf's own relative
        frequencies with share ``n_l / Z``, each ancestor's with share ``alpha_p / Z`` and the
        uniform pseudo-node with share ``alpha0 / Z``, ``Z = n_l + sum alpha_p + alpha0``; the
        shares sum to one. With ``linear=True``, ``linear`` holds the pool's weights ``a``,
        ``b``, ``c``, the leaf's ``uncertainty`` ``u = 1 - max(smoothed)``, the regression's
        ``weight`` ``b + c u`` here, its probabilities ``regression`` and ``pooled``,
        ``smoothed**a * regression**weight`` renormalised (``smoothed`` itself while
        ``(a, b, c)`` is still ``(1, 0, 0)``).
        With ``naive_bayes=True``, ``naive_bayes`` holds ``gamma`` and each class's log
        likelihood ``ll``, and ``proba`` is ``pooled * exp(gamma * ll)`` renormalised (with
        ``pooled`` read as ``smoothed`` when ``linear=False``); otherwise ``proba`` is
        ``pooled``.
        """
        check_mapping(x)
        return inspection.explain(self, x)

    @property
    def tree_(self) -> dict[str, Any]:
        """The tree as plain data (lists), one entry per node."""
        return inspection.tree_as_data(self)

    # -- persistence --------------------------------------------------------------------
    def capture(self) -> Capture:
        """The model's saved form now, not yet encoded: its ``to_bytes()`` gives what this
        model's :meth:`to_bytes` gives now, and may run in another thread while the model learns."""
        from streamtree.persistence import capture

        return capture(self)

    def to_bytes(self) -> bytes:
        """The model in streamtree's safe, versioned format (no pickle)."""
        from streamtree.persistence import dump

        return dump(self)

    @classmethod
    def from_bytes(cls, data: bytes) -> ProbabilityTree:
        """Read a model written by :meth:`to_bytes`."""
        from streamtree.persistence import load

        return load(cls, data)
