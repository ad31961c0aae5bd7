"""HDP, HGS and the other smoothers for scikit-learn's decision trees.

:class:`SmoothedTreeClassifier` fits any scikit-learn tree classifier, counts the training
examples' classes at every node from their decision paths, and serves the chosen smoother's
leaf probabilities. Optionally *honest*: the structure is chosen on one part of the data and the
smoother's parameters are fitted on the counts of the other part, which did not choose it.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
from scipy import sparse
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.model_selection import train_test_split
from sklearn.tree import DecisionTreeClassifier
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, check_random_state, validate_data

from streamtree.batch import make_smoother
from streamtree.exceptions import ConfigError
from streamtree.smoothing import Smoother
from streamtree.topology import Topology
from streamtree.typing import FloatArray, IntArray

__all__ = ["SmoothedTreeClassifier", "tree_parent", "node_counts"]

Honest = Literal["none", "split", "crossfit"]


def tree_parent(tree: Any) -> IntArray:
    """The ``parent`` array of a fitted scikit-learn tree (``estimator.tree_``).

    scikit-learn numbers nodes depth-first, so every parent precedes its children.

    Examples
    --------
    >>> from sklearn.tree import DecisionTreeClassifier
    >>> t = DecisionTreeClassifier(max_depth=1).fit([[0], [1], [2], [3]], [0, 0, 1, 1])
    >>> tree_parent(t.tree_).tolist()
    [-1, 0, 0]
    """
    left, right = tree.children_left, tree.children_right
    parent = np.full(tree.node_count, -1, dtype=np.int64)
    for side in (left, right):
        has = side >= 0
        parent[side[has]] = np.flatnonzero(has)
    return parent


def node_counts(estimator: Any, X: Any, y_codes: IntArray, n_classes: int, sample_weight: FloatArray | None = None) -> FloatArray:
    """``(S, K)`` class counts of every node of a fitted tree, from the decision paths of ``X``.

    Every node counts every example whose path passes through it (weighted by
    ``sample_weight`` if given).
    """
    paths = estimator.decision_path(X)  # (n, S) 0/1 indicator
    weight = np.ones(len(y_codes)) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    onehot = sparse.csr_matrix((weight, (np.arange(len(y_codes)), y_codes)), shape=(len(y_codes), n_classes))
    return np.asarray((paths.T @ onehot).todense(), dtype=np.float64)


class SmoothedTreeClassifier(ClassifierMixin, BaseEstimator):
    """A scikit-learn tree whose leaf probabilities come from a streamtree smoother.

    Parameters
    ----------
    estimator
        An unfitted scikit-learn tree classifier (anything with ``tree_``, ``apply`` and
        ``decision_path`` once fitted); it is cloned. ``None`` for an unpruned
        ``DecisionTreeClassifier(criterion="entropy", min_samples_leaf=2)``, the trees of the
        HGS paper's experiments.
    smoothing
        ``"hgs"`` (default), ``"hdp"``, ``"mbranch"``, ``"mestimate"``, ``"laplace"``,
        ``"mle"`` or a :class:`~streamtree.smoothing.Smoother` instance (cloned per fit).
    smoothing_params
        Keyword arguments of the smoother, e.g. ``{"mode": "paper"}`` for HGS's Algorithm 1.
    honest
        ``"none"``: structure, fitted parameters and predictions from all the data.
        ``"split"``: the tree is grown on a fraction ``honest_fraction`` of the data, the
        smoother's parameters are fitted on the counts of the rest (examples that did not
        choose the structure), and predictions use the counts of all examples.
        ``"crossfit"``: ``"split"`` both ways round (two trees, each honest), probabilities
        averaged.
    honest_fraction
        Share of the data that grows the structure when honest (stratified split).
    random_state
        Seeds the honest split, and the tree's own randomness when the tree's
        ``random_state`` is ``None``.

    Attributes
    ----------
    classes_, n_features_in_
        As in scikit-learn.
    estimators_
        The fitted tree(s): one, or two when ``honest="crossfit"``.
    smoothers_
        The fitted smoother of each tree.
    leaf_proba_
        Per tree, ``(S, K)`` probabilities at every node.

    Examples
    --------
    >>> from sklearn.datasets import load_breast_cancer
    >>> from sklearn.model_selection import cross_val_score
    >>> X, y = load_breast_cancer(return_X_y=True)
    >>> clf = SmoothedTreeClassifier(smoothing="hgs", honest="split", random_state=0)
    >>> score = cross_val_score(clf, X, y, cv=5, scoring="neg_brier_score").mean()
    >>> bool(-score < 0.1)
    True
    """

    def __init__(
        self,
        estimator: Any = None,
        smoothing: str | Smoother = "hgs",
        smoothing_params: dict[str, Any] | None = None,
        honest: Honest = "none",
        honest_fraction: float = 0.5,
        random_state: int | np.random.RandomState | None = None,
    ) -> None:
        self.estimator = estimator
        self.smoothing = smoothing
        self.smoothing_params = smoothing_params
        self.honest = honest
        self.honest_fraction = honest_fraction
        self.random_state = random_state

    def _validate_params_(self) -> None:
        if self.honest not in ("none", "split", "crossfit"):
            raise ConfigError(
                f"The 'honest' parameter of SmoothedTreeClassifier must be 'none', 'split' or 'crossfit'. "
                f"Got {self.honest!r} instead."
            )
        frac = self.honest_fraction
        if not (isinstance(frac, (int, float)) and not isinstance(frac, bool) and 0.0 < frac < 1.0):
            raise ConfigError(
                "The 'honest_fraction' parameter of SmoothedTreeClassifier must be a float in (0, 1). "
                f"Got {frac!r} instead."
            )
        make_smoother(self.smoothing, self.smoothing_params)  # raises ConfigError if invalid

    def _new_smoother(self) -> Smoother:
        if isinstance(self.smoothing, Smoother):
            return clone_smoother(self.smoothing)
        return make_smoother(self.smoothing, self.smoothing_params)

    def _fit_one(
        self, X: Any, y: IntArray, w: FloatArray | None, grow: IntArray, fit: IntArray | None, k: int, seed: int
    ) -> tuple[Any, Smoother, FloatArray]:
        base = DecisionTreeClassifier(criterion="entropy", min_samples_leaf=2) if self.estimator is None else self.estimator
        tree = clone(base)
        if "random_state" in tree.get_params() and tree.get_params()["random_state"] is None:
            tree.set_params(random_state=seed)  # the tree's randomness follows ours
        tree.fit(X[grow], y[grow], sample_weight=None if w is None else w[grow])
        topology = Topology.from_parent(tree_parent(tree.tree_))
        counts = node_counts(tree, X, y, k, w)
        fit_counts = None if fit is None else node_counts(tree, X[fit], y[fit], k, None if w is None else w[fit])
        smoother = self._new_smoother()
        smoother.refit(topology, counts, fit_counts)
        return tree, smoother, smoother.node_proba(topology, counts)

    def fit(self, X: Any, y: Any, sample_weight: Any = None) -> SmoothedTreeClassifier:
        """Grow the tree(s), count every node's classes and fit the smoother."""
        self._validate_params_()
        X, y = validate_data(self, X, y)
        check_classification_targets(y)
        self.classes_, codes = np.unique(y, return_inverse=True)
        k = len(self.classes_)
        w = None if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
        everything = np.arange(len(codes))
        rng = check_random_state(self.random_state)
        seeds = rng.randint(np.iinfo(np.int32).max, size=2)
        if self.honest == "none" or len(codes) < 4:
            parts = [(everything, None)]
        else:
            stratify = codes if np.bincount(codes).min() >= 2 else None
            grow, fit = train_test_split(
                everything, train_size=self.honest_fraction, stratify=stratify, random_state=rng
            )
            grow, fit = np.sort(grow), np.sort(fit)
            parts = [(grow, fit)] if self.honest == "split" else [(grow, fit), (fit, grow)]
        fitted = [self._fit_one(X, codes, w, g, f, k, int(seed)) for (g, f), seed in zip(parts, seeds)]
        self.estimators_ = [f[0] for f in fitted]
        self.smoothers_ = [f[1] for f in fitted]
        self.leaf_proba_ = [f[2] for f in fitted]
        return self

    def predict_proba(self, X: Any) -> FloatArray:
        """Class probabilities, columns in the order of ``classes_``."""
        check_is_fitted(self)
        X = validate_data(self, X, reset=False)
        proba = sum(p[t.apply(X)] for t, p in zip(self.estimators_, self.leaf_proba_))
        return np.asarray(proba, dtype=np.float64) / len(self.estimators_)

    def predict(self, X: Any) -> Any:
        """The most probable class."""
        check_is_fitted(self)
        return self.classes_[np.argmax(self.predict_proba(X), axis=1)]

    def predict_log_proba(self, X: Any) -> FloatArray:
        with np.errstate(divide="ignore"):
            return np.log(self.predict_proba(X))


def clone_smoother(smoother: Smoother) -> Smoother:
    """An unfitted copy of a smoother (its constructor parameters, no fitted state)."""
    import copy

    fresh = copy.deepcopy(smoother)
    cls = type(smoother)
    try:
        import inspect

        names = [p for p in inspect.signature(cls.__init__).parameters if p != "self"]
        return cls(**{n: getattr(smoother, n) for n in names if hasattr(smoother, n)})
    except TypeError:  # a constructor that does not store its arguments under their names
        return fresh
