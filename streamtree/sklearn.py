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

try:
    from sklearn.base import BaseEstimator, ClassifierMixin, clone
    from sklearn.model_selection import KFold, StratifiedKFold, train_test_split
    from sklearn.tree import DecisionTreeClassifier
    from sklearn.utils import get_tags
    from sklearn.utils.multiclass import check_classification_targets
    from sklearn.utils.validation import check_is_fitted, check_random_state, validate_data
except ImportError as exc:  # not installed, or older than 1.6 (no validate_data, get_tags)
    raise ImportError(
        f'streamtree.sklearn needs scikit-learn 1.6 or later (streamtree\'s "sklearn" extra): pip install "scikit-learn>=1.6" ({exc})'
    ) from exc

from streamtree.batch import clone_smoother, make_smoother
from streamtree.exceptions import ConfigError
from streamtree.smoothing import HGS, Smoother
from streamtree.topology import Topology
from streamtree.typing import FloatArray, IntArray

__all__ = ["SmoothedTreeClassifier", "node_counts", "tree_parent"]

Honest = Literal["auto", "none", "split", "crossfit", "cv"]

#: HGS weights tried by ``honest="cv"``: one weight for every ancestor, and the uniform
#: pseudo-node's weight (1e-4 is HGS's floor, i.e. practically no pseudo-node)
CV_WEIGHTS: tuple[float, ...] = tuple(2.0 ** np.arange(-3, 6))
CV_PRIOR_WEIGHTS: tuple[float, ...] = (1e-4, 1.0)


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


def fixed_hgs(n_nodes: int, weight: float, prior_weight: float) -> HGS:
    """An HGS smoother whose every ancestor weighs ``weight`` and whose uniform pseudo-node
    weighs ``prior_weight`` (Eq. 4 with tied weights), set through its persisted state.

    Examples
    --------
    Leaf ``[6, 0]`` under a root ``[6, 2]``: ``(6 + 2 * 0.75 + 1 / 2) / (6 + 2 + 1) = 8 / 9``.

    >>> from streamtree.topology import Topology
    >>> t = Topology.from_parent(np.array([-1, 0, 0]))
    >>> hgs = fixed_hgs(3, 2.0, 1.0)
    >>> hgs.node_proba(t, np.array([[6., 2.], [6., 0.], [0., 2.]]))[1].round(4).tolist()
    [0.8889, 0.1111]
    """
    hgs = HGS()
    state = hgs.get_state()
    state.update(
        theta=np.full(n_nodes, np.log(weight)),
        step=np.full(n_nodes, 0.1),
        grad=np.zeros(n_nodes),
        theta0=float(np.log(prior_weight)),
    )
    hgs.set_state(state)
    return hgs


def node_counts(
    estimator: Any, X: Any, y_codes: IntArray, n_classes: int, sample_weight: FloatArray | None = None
) -> FloatArray:
    """``(S, K)`` class counts of every node of a fitted tree, from the decision paths of ``X``.

    Every node counts every example whose path passes through it (weighted by
    ``sample_weight`` if given).
    """
    paths = estimator.decision_path(X)  # (n, S) 0/1 indicator
    weight = np.ones(len(y_codes)) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    onehot = sparse.csr_matrix((weight, (np.arange(len(y_codes)), y_codes)), shape=(len(y_codes), n_classes))
    return np.asarray((paths.T @ onehot).todense(), dtype=np.float64)


def _weights(sample_weight: Any, n: int) -> FloatArray:
    """``sample_weight`` as one finite weight >= 0 per row of ``n`` (a scalar: the same for
    every row); ``ValueError`` naming it otherwise."""
    try:
        w = np.asarray(sample_weight, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"sample_weight must be numbers; got {type(sample_weight).__name__}") from None
    if w.ndim == 0:
        w = np.full(n, float(w))
    if w.shape != (n,):
        raise ValueError(f"sample_weight must hold one weight per row of X ({n}); got shape {w.shape}")
    if not (np.isfinite(w).all() and (w >= 0).all()):
        raise ValueError("sample_weight must be finite and >= 0")
    with np.errstate(over="ignore"):
        total = w.sum()
    if not np.isfinite(total):  # the counts would overflow: NaN or zero probabilities
        raise ValueError(f"sample_weight must sum to a finite number; got weights up to {w.max():g} summing past it")
    return w


def _not_a_tree(estimator: Any) -> ConfigError:
    return ConfigError(
        "The 'estimator' parameter of SmoothedTreeClassifier must be a scikit-learn tree classifier "
        f"(a DecisionTreeClassifier or ExtraTreeClassifier). Got {type(estimator).__name__} instead."
    )


def _structure(fitted: Any) -> Any:
    """The ``tree_`` of a fitted estimator; :class:`ConfigError` if it has none (a forest, say:
    it has ``apply`` and ``decision_path`` too)."""
    structure = getattr(fitted, "tree_", None)
    if structure is None:
        raise _not_a_tree(fitted)
    return structure


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
        ``"auto"`` (default): ``"cv"`` for ``smoothing="hgs"`` with no ``smoothing_params``
        (measured best on the HGS paper's datasets: ``docs/decisions/batch-weights.md``),
        ``"none"`` otherwise (``"cv"`` chooses HGS's weights
        itself, so it would ignore a configured smoother). See :attr:`honest_`.
        ``"none"``: structure, fitted parameters and predictions from all the data.
        ``"split"``: the tree is grown on a fraction ``honest_fraction`` of the data, the
        smoother's parameters are fitted on the counts of the rest (examples that did not
        choose the structure), and predictions use the counts of all examples.
        ``"crossfit"``: ``"split"`` both ways round (two trees, each honest), probabilities
        averaged.
        ``"cv"`` (HGS only): structure and counts from all the data; HGS's weights tied to one
        value for every ancestor plus the uniform pseudo-node's, chosen from
        :data:`CV_WEIGHTS` x :data:`CV_PRIOR_WEIGHTS` by ``cv_folds``-fold cross-validation:
        trees grown on the other folds, the held-out examples scored by their squared error
        (Brier). The weights are honest (chosen on examples the scoring tree did not see) while
        the served tree keeps all the data.
    honest_fraction
        Share of the data that grows the structure when honest (stratified split).
    cv_folds
        Folds of ``honest="cv"``.
    random_state
        Seeds the honest split, and the tree's own randomness when the tree's
        ``random_state`` is ``None``.

    Attributes
    ----------
    classes_, n_features_in_
        As in scikit-learn.
    honest_
        The ``honest`` mode the fit used (``"auto"`` resolved).
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
        honest: Honest = "auto",
        honest_fraction: float = 0.5,
        cv_folds: int = 3,
        random_state: int | np.random.RandomState | None = None,
    ) -> None:
        self.estimator = estimator
        self.smoothing = smoothing
        self.smoothing_params = smoothing_params
        self.honest = honest
        self.honest_fraction = honest_fraction
        self.cv_folds = cv_folds
        self.random_state = random_state

    def _base_tree(self) -> Any:
        if self.estimator is None:
            return DecisionTreeClassifier(criterion="entropy", min_samples_leaf=2)
        return self.estimator

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        # missing values (NaN) are accepted exactly when the tree accepts them
        tags.input_tags.allow_nan = get_tags(self._base_tree()).input_tags.allow_nan
        return tags

    def _finite(self) -> bool | str:
        return "allow-nan" if get_tags(self).input_tags.allow_nan else True

    def _resolved_honest(self) -> str:
        """``honest`` with ``"auto"`` resolved (see the class docstring)."""
        if self.honest != "auto":
            return str(self.honest)
        return (
            "cv"
            if isinstance(self.smoothing, str) and self.smoothing == "hgs" and not self.smoothing_params
            else "none"
        )

    def _validate_params_(self) -> None:
        if self.honest not in ("auto", "none", "split", "crossfit", "cv"):
            raise ConfigError(
                "The 'honest' parameter of SmoothedTreeClassifier must be 'auto', 'none', 'split', 'crossfit' or "
                f"'cv'. Got {self.honest!r} instead."
            )
        is_hgs = self.smoothing == "hgs" or isinstance(self.smoothing, HGS)
        if self.honest == "cv" and not is_hgs:
            raise ConfigError(
                "The 'smoothing' parameter of SmoothedTreeClassifier must be 'hgs' when honest='cv'. "
                f"Got {self.smoothing!r} instead."
            )
        folds = self.cv_folds
        if not (isinstance(folds, (int, np.integer)) and not isinstance(folds, bool) and folds >= 2):
            raise ConfigError(
                f"The 'cv_folds' parameter of SmoothedTreeClassifier must be an int >= 2. Got {folds!r} instead."
            )
        frac = self.honest_fraction
        if not (isinstance(frac, (int, float)) and not isinstance(frac, bool) and 0.0 < frac < 1.0):
            raise ConfigError(
                "The 'honest_fraction' parameter of SmoothedTreeClassifier must be a float in (0, 1). "
                f"Got {frac!r} instead."
            )
        make_smoother(self.smoothing, self.smoothing_params)  # raises ConfigError if invalid
        tree = self._base_tree()
        if not all(hasattr(tree, name) for name in ("fit", "apply", "decision_path")):
            raise _not_a_tree(tree)  # a linear model failed after fitting, on its missing tree_

    def _new_smoother(self) -> Smoother:
        if isinstance(self.smoothing, Smoother):
            return clone_smoother(self.smoothing)
        return make_smoother(self.smoothing, self.smoothing_params)

    def _fit_one(
        self, X: Any, y: IntArray, w: FloatArray | None, grow: IntArray, fit: IntArray | None, k: int, seed: int
    ) -> tuple[Any, Smoother, FloatArray]:
        tree = clone(self._base_tree())
        if "random_state" in tree.get_params() and tree.get_params()["random_state"] is None:
            tree.set_params(random_state=seed)  # the tree's randomness follows ours
        tree.fit(X[grow], y[grow], sample_weight=None if w is None else w[grow])
        topology = Topology.from_parent(tree_parent(_structure(tree)))
        counts = node_counts(tree, X, y, k, w)
        fit_counts = None if fit is None else node_counts(tree, X[fit], y[fit], k, None if w is None else w[fit])
        smoother = self._new_smoother()
        smoother.refit(topology, counts, fit_counts)
        return tree, smoother, smoother.node_proba(topology, counts)

    def fit(self, X: Any, y: Any, sample_weight: Any = None) -> SmoothedTreeClassifier:
        """Grow the tree(s), count every node's classes and fit the smoother."""
        self._validate_params_()
        X, y = validate_data(self, X, y, ensure_all_finite=self._finite())
        check_classification_targets(y)
        self.classes_, codes = np.unique(y, return_inverse=True)
        k = len(self.classes_)
        w = None if sample_weight is None else _weights(sample_weight, len(codes))
        everything = np.arange(len(codes))
        rng = check_random_state(self.random_state)
        seeds = rng.randint(np.iinfo(np.int32).max, size=2)
        self.honest_ = honest = self._resolved_honest()
        if honest == "cv":
            weight, prior = self._cv_weights(X, codes, w, k, int(seeds[1]))
            self.cv_weights_ = (weight, prior)
            tree = clone(self._base_tree())
            if "random_state" in tree.get_params() and tree.get_params()["random_state"] is None:
                tree.set_params(random_state=int(seeds[0]))
            tree.fit(X, codes, sample_weight=w)
            topology = Topology.from_parent(tree_parent(_structure(tree)))
            smoother = fixed_hgs(topology.n_nodes, weight, prior)
            self.estimators_ = [tree]
            self.smoothers_: list[Smoother] = [smoother]
            self.leaf_proba_ = [smoother.node_proba(topology, node_counts(tree, X, codes, k, w))]
            return self
        parts: list[tuple[IntArray, IntArray | None]]
        if honest == "none" or len(codes) < 4:
            parts = [(everything, None)]
        else:
            n_grow = int(self.honest_fraction * len(codes))  # sklearn's rule for a float size
            if not 0 < n_grow < len(codes):
                raise ConfigError(
                    f"The 'honest_fraction' parameter of SmoothedTreeClassifier ({self.honest_fraction!r}) "
                    f"leaves {n_grow} of the {len(codes)} samples to grow the tree on and "
                    f"{len(codes) - n_grow} to fit its probabilities; each needs at least one."
                )
            # stratified when each part can hold every class (and each class has two samples)
            enough = min(n_grow, len(codes) - n_grow) >= k and np.bincount(codes).min() >= 2
            grow, fit = train_test_split(
                everything, train_size=n_grow, stratify=codes if enough else None, random_state=rng
            )
            grow, fit = np.sort(grow), np.sort(fit)
            parts = [(grow, fit)] if honest == "split" else [(grow, fit), (fit, grow)]
        fitted = [self._fit_one(X, codes, w, g, f, k, int(seed)) for (g, f), seed in zip(parts, seeds)]
        self.estimators_ = [f[0] for f in fitted]
        self.smoothers_ = [f[1] for f in fitted]
        self.leaf_proba_ = [f[2] for f in fitted]
        return self

    def _cv_weights(self, X: Any, y: IntArray, w: FloatArray | None, k: int, seed: int) -> tuple[float, float]:
        """The (weight, prior weight) pair with the lowest cross-validated squared error."""
        grid = [(a, a0) for a in CV_WEIGHTS for a0 in CV_PRIOR_WEIGHTS]
        if len(y) < 2 * self.cv_folds:
            return 1.0, 1.0  # too few examples to hold any out: the paper's starting weights
        stratify = np.bincount(y, minlength=k)
        splitter = (
            StratifiedKFold(self.cv_folds, shuffle=True, random_state=seed)
            if stratify[stratify > 0].min() >= self.cv_folds
            else KFold(self.cv_folds, shuffle=True, random_state=seed)
        )
        loss = np.zeros(len(grid))
        for j, (train, val) in enumerate(splitter.split(X, y)):
            tree = clone(self._base_tree())
            if "random_state" in tree.get_params() and tree.get_params()["random_state"] is None:
                tree.set_params(random_state=seed + j)
            tree.fit(X[train], y[train], sample_weight=None if w is None else w[train])
            topology = Topology.from_parent(tree_parent(_structure(tree)))
            counts = node_counts(tree, X[train], y[train], k, None if w is None else w[train])
            leaves = tree.apply(X[val])
            onehot = np.eye(k)[y[val]]
            wv = np.ones(len(val)) if w is None else w[val]
            for g, (a, a0) in enumerate(grid):
                proba = fixed_hgs(topology.n_nodes, a, a0).node_proba(topology, counts)[leaves]
                loss[g] += float(wv @ ((proba - onehot) ** 2).sum(axis=1))
        return grid[int(np.argmin(loss))]

    def predict_proba(self, X: Any) -> FloatArray:
        """Class probabilities, columns in the order of ``classes_``."""
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, ensure_all_finite=self._finite())
        proba = sum(p[t.apply(X)] for t, p in zip(self.estimators_, self.leaf_proba_))
        return np.asarray(proba, dtype=np.float64) / len(self.estimators_)

    def predict(self, X: Any) -> Any:
        """The most probable class."""
        check_is_fitted(self)
        return self.classes_[np.argmax(self.predict_proba(X), axis=1)]

    def predict_log_proba(self, X: Any) -> FloatArray:
        with np.errstate(divide="ignore"):
            return np.log(self.predict_proba(X))
