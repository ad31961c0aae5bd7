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

This class only orchestrates: it encodes examples (:mod:`streamtree.encoding`) into rows and
class ids, keeps the labels and the feature registry, and is the river/numpy/pandas face
(:class:`~streamtree.classifier.Classifier`). The tree itself, its background tree and change
detector are a :class:`~streamtree.tree_state.TreeState` (``state``): plain arrays
(:class:`~streamtree.state.TreeArrays`) that compiled kernels (:mod:`streamtree.kernels`)
learn from, one loop (:func:`~streamtree.kernels.learn.learn_rows`) for every example, one at
a time or in batches.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np

from streamtree import inspection
from streamtree.classifier import Classifier
from streamtree.config import validate_config
from streamtree.dispatch import at_entry
from streamtree.exceptions import ConfigError, FormatError
from streamtree.features import FeatureRegistry
from streamtree.kernels.event import ONCE
from streamtree.persistence import TREE, Capture, TreeHeader, capture, read, register_reader, restore
from streamtree.state import M_NODES, M_STOPPED, PARENT
from streamtree.tree_state import TreeState, registry_shapes
from streamtree.typing import ClassLabel, FloatArray
from streamtree.values import check_mapping, plain

__all__ = ["ProbabilityTree", "class_ids"]

#: learn_one's class id array for each of the first 64 class ids, shared: the loop only reads it
_CLASS_ID = [np.full(1, k, dtype=np.int64) for k in range(64)]


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
        ``grace_period=30``). Why the default: ``docs/decisions/tie-threshold.md``.
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
        ``0.001`` lets a split cut off a small pocket of a rare class, which river's ``0.01``
        does not (``docs/decisions/min-branch-fraction.md``).
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
        block weigh the same; a leaf's statistics when it next learns). ``None`` (the default) keeps every count: forgetting helps under
        drift but costs stationary streams (``docs/decisions/forgetting.md``); abrupt change
        is handled by ``drift_delta``.
    drift_delta
        Change detection, on by default: ADWIN with this confidence watches the tree's error
        (is the top class of the leaf's counts, before the update, wrong?). On a detected rise
        of the error a *background tree* starts from nothing and learns every example beside
        the tree; both predict each example before learning it, and once the background tree's
        log likelihood on at least 10 shared examples beats the tree's by 2 nats, it replaces
        the tree (the drift policy in :mod:`streamtree.kernels.learn`). A stationary stream's
        error does not rise, so there nothing starts (``docs/decisions/drift.md``). ``None``
        turns detection off.
    drift_patience
        A background tree that has not replaced the tree after this many examples is dropped
        (the next detected change starts a new one).
    naive_bayes
        Multiply the smoothed leaf probabilities by a tempered naive-Bayes likelihood of the
        example's features, ``p(y|x) ~ p_tree(y|leaf) * prod_f p(x_f|y)**gamma``, with the
        feature models learned from every example and ``gamma`` in [0, 1] fitted online on
        examples scored before they are learned (:mod:`streamtree.kernels.naive_bayes`). Off by
        default: it helps where features carry information inside a leaf, which the linear
        component covers, and costs where the concept is a few crisp rules
        (``docs/decisions/naive-bayes.md``).
    linear
        Pool the smoothed leaf probabilities with an online multinomial logistic regression on
        the standardised numeric features, ``p(y|x) ~ p_tree(y|leaf)**a * p_lr(y|x)**(b + c u)``
        with ``u = 1 - max p_tree`` the leaf's uncertainty, ``a`` in [0, 1] and ``b, c >= 0``
        fitted by Newton steps on the last 1,000 examples as they were predicted before being
        learned (:mod:`streamtree.kernels.linear`); a detected change resets the pool to the
        tree alone. On by default: where the concept is smooth or linear inside a leaf the
        regression carries it, and where it is not the fitted weights keep the pool near the
        tree alone (``docs/decisions/linear-component.md``). Without numeric features it does
        nothing.
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
    repeats_as_seen
        For an example learned more than once in a row (a bagged forest member's repetitions,
        :class:`~streamtree.forest.ProbabilityForest`): whether each repetition is another
        example seen by its leaf, for the Hoeffding bound's ``n``, the tie threshold and the
        grace period, or only the first is (``False``). The counts and split statistics take
        every repetition either way. A tree alone learns each example once, so it does not
        matter there.

    Attributes
    ----------
    state
        The tree's :class:`~streamtree.tree_state.TreeState`: its arrays, background tree,
        change detector and the kernels' configuration.
    registry
        The features learned (:class:`~streamtree.features.FeatureRegistry`).
    classes_, class_index
        The labels in order of first appearance, and each one's class id.
    n_examples
        Examples learned.

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
        repeats_as_seen: bool = True,
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
        # a copy of a list: the caller's may change later, under the registry made from this one
        self.nominal_features = list(nominal_features) if isinstance(nominal_features, list) else nominal_features
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
        self.repeats_as_seen = repeats_as_seen
        validate_config(self.get_config() | {"nominal_features": nominal_features})  # as given: a str is no list
        self.registry = FeatureRegistry(self.nominal_features or (), self.max_features, self.max_categories)
        self.classes_: list[ClassLabel] = []
        self.class_index: dict[ClassLabel, int] = {}  # label -> class id (a forest's members share one)
        self.n_examples = 0
        self.state = TreeState(self.get_config())

    # -- configuration ------------------------------------------------------------------
    def get_config(self) -> dict[str, Any]:
        """The complete configuration as JSON-able data: ``ProbabilityTree(**config)``."""
        config = {name: plain(getattr(self, name)) for name in self._get_params()}  # a numpy sweep's values too
        config["nominal_features"] = list(self.nominal_features or ())
        return config

    @property
    def n_nodes(self) -> int:
        return int(self.state.tree.meta[M_NODES])

    @property
    def parent_(self) -> np.ndarray:
        """Parent of every node (-1 for the root; a read-only view)."""
        view = self.state.tree.node[: self.n_nodes, PARENT]
        view.flags.writeable = False
        return view

    @property
    def counts_(self) -> FloatArray:
        """``(n_nodes, len(classes_))`` class counts of every node (a read-only view)."""
        view = self.state.tree.counts[: self.n_nodes, : len(self.classes_)]
        view.flags.writeable = False
        return view

    @property
    def growth_stopped(self) -> bool:
        return bool(self.state.tree.meta[M_STOPPED])

    # -- learning -----------------------------------------------------------------------
    def _learn(
        self,
        num: np.ndarray,
        nom: np.ndarray,
        labels: list[ClassLabel],
        first_values: dict[int, float],
        want_proba: bool,
        reps: np.ndarray | None = None,
    ) -> FloatArray | None:
        """Learn encoded, validated rows (:meth:`TreeState.learn`); ``reps[i]`` times row ``i``
        (once each when omitted; see ``learn_rows``)."""
        entry = reps is None and at_entry(num, nom)  # the dispatch would be most of an event's cost
        if reps is None:
            reps = ONCE if len(labels) == 1 else np.ones(len(labels), dtype=np.int64)
        ks = class_ids(self.classes_, self.class_index, labels)
        state = self.state
        state.make_room(self.registry, first_values, registry_shapes(self.registry, len(self.classes_)))
        proba = state.learn(num, nom, ks, reps, self.n_examples, want_proba, entry)
        self.n_examples += len(labels)
        return proba[:, : len(self.classes_)] if want_proba else None

    def _learn_one(self, num: np.ndarray, nom: np.ndarray, y: ClassLabel) -> None:
        """:meth:`_learn` of one event of registered features, its arrays built by
        :class:`~streamtree.classifier.Classifier` (so at the loop's entry point)."""
        k = self.class_index.get(y)
        if k is None or k >= len(_CLASS_ID):
            self._learn(num, nom, [y], {}, want_proba=False)
            return
        state = self.state
        state.make_room(self.registry, {}, registry_shapes(self.registry, len(self.classes_)))
        state.learn_one(num, nom, _CLASS_ID[k], self.n_examples)
        self.n_examples += 1

    def _check_budget(self, shapes: tuple[int, int, int, int]) -> None:
        self.state.check_budget(shapes)

    # -- prediction ---------------------------------------------------------------------
    def _predict(self, num: np.ndarray, nom: np.ndarray) -> FloatArray:
        return self.state.predict(num, nom, at_entry(num, nom))[:, : len(self.classes_)]

    def _predict_one(self, num: np.ndarray, nom: np.ndarray) -> list[float]:
        return self.state.predict_one(num, nom, len(self.classes_))

    # -- introspection (streamtree.inspection) -------------------------------------------
    def summary(self) -> dict[str, Any]:
        """Size and state of the model as JSON-able data."""
        return inspection.summary(self)

    def drift_summary(self) -> dict[str, Any]:
        """Detected changes, the background tree and swaps, as JSON-able data."""
        return inspection.drift_summary(self.state)

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

    # -- persistence (streamtree.persistence) --------------------------------------------
    def header(self) -> TreeHeader:
        """What a saved tree holds besides its state: configuration, classes, registry, count."""
        return TreeHeader(self.get_config(), self.classes_, self.registry, self.n_examples)

    def capture(self) -> Capture:
        """The model's saved form now, not yet encoded: its ``to_bytes()`` gives what this
        model's :meth:`to_bytes` gives now, and may run in another thread while the model learns."""
        return capture(self.state, self.header())

    def to_bytes(self) -> bytes:
        """The model in streamtree's safe, versioned format (no pickle)."""
        return self.capture().to_bytes()

    @classmethod
    def from_bytes(cls, data: bytes) -> ProbabilityTree:
        """Read a model written by :meth:`to_bytes` (or by an earlier streamtree)."""
        saved = read(data)
        try:
            model = cls(**saved.config)
        except (TypeError, ConfigError) as err:  # a parameter this version does not have, or a corrupt value
            raise FormatError(f"Corrupt streamtree model: {err!r}.") from None
        header = restore(saved, model.state)
        model.registry, model.classes_, model.n_examples = header.registry, header.classes, header.n_examples
        model.class_index = {c: i for i, c in enumerate(model.classes_)}
        return model


register_reader(TREE, ProbabilityTree.from_bytes)
