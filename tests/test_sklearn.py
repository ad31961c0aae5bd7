"""The scikit-learn adapter: scikit-learn's own estimator checks, then what users rely on."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys

import numpy as np
import pytest
from sklearn.datasets import make_classification
from sklearn.tree import DecisionTreeClassifier, ExtraTreeClassifier
from sklearn.utils.estimator_checks import parametrize_with_checks

from streamtree.exceptions import ConfigError
from streamtree.sklearn import (
    CV_PRIOR_WEIGHTS,
    CV_WEIGHTS,
    SmoothedTreeClassifier,
    fixed_hgs,
    node_counts,
    tree_parent,
)
from streamtree.smoothing import HGS, MBranch
from streamtree.topology import Topology


def _expected_failures(estimator: SmoothedTreeClassifier) -> dict[str, str]:
    return {
        "check_sample_weight_equivalence_on_dense_data": (
            "min_samples_leaf=2, and the folds and halves of honest='cv', 'split' and 'crossfit', "
            "count rows, not weight: a row of weight 2 and two copies of it can grow different trees "
            "or fall in different folds; DecisionTreeClassifier(min_samples_leaf=2) fails this check too"
        )
    }


@parametrize_with_checks(
    [
        SmoothedTreeClassifier(),
        SmoothedTreeClassifier(smoothing="hdp", smoothing_params={"iterations": 30}),
        SmoothedTreeClassifier(smoothing="laplace", honest="split", random_state=0),
        SmoothedTreeClassifier(smoothing="hgs", honest="crossfit", random_state=0),
        SmoothedTreeClassifier(smoothing="hgs", honest="cv", random_state=0),
    ],
    expected_failed_checks=_expected_failures,
)
def test_sklearn_estimator_checks(estimator, check) -> None:  # type: ignore[no-untyped-def]
    check(estimator)


def _data(n: int = 400, k: int = 3, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    return make_classification(
        n_samples=n, n_features=6, n_informative=4, n_classes=k, n_clusters_per_class=1, flip_y=0.1, random_state=seed
    )


def test_node_counts_follow_decision_paths() -> None:
    X, y = _data()
    tree = DecisionTreeClassifier(min_samples_leaf=3, random_state=0).fit(X, y)
    parent = tree_parent(tree.tree_)
    assert parent[0] == -1 and np.all(parent[1:] < np.arange(1, len(parent)))
    counts = node_counts(tree, X, y, 3)
    np.testing.assert_array_equal(counts[0], np.bincount(y))
    leaves = tree.apply(X)
    for leaf in np.unique(leaves):
        np.testing.assert_array_equal(counts[leaf], np.bincount(y[leaves == leaf], minlength=3))
    internal = np.flatnonzero(tree.tree_.children_left >= 0)
    children_sum = counts[tree.tree_.children_left[internal]] + counts[tree.tree_.children_right[internal]]
    np.testing.assert_array_equal(counts[internal], children_sum)


def test_mle_reproduces_the_plain_tree_and_laplace_its_formula() -> None:
    X, y = _data()
    tree = DecisionTreeClassifier(min_samples_leaf=2, random_state=0)
    mle = SmoothedTreeClassifier(estimator=tree, smoothing="mle").fit(X, y)
    np.testing.assert_allclose(mle.predict_proba(X), tree.fit(X, y).predict_proba(X))
    lap = SmoothedTreeClassifier(estimator=tree, smoothing="laplace").fit(X, y)
    leaf_counts = node_counts(tree, X, y, 3)[tree.apply(X)]
    np.testing.assert_allclose(lap.predict_proba(X), (leaf_counts + 1) / (leaf_counts.sum(axis=1, keepdims=True) + 3))


def test_string_labels_other_tree_kinds_and_smoothing_params() -> None:
    X, y = _data(k=2)
    labels = np.array(["no", "yes"])[y]
    clf = SmoothedTreeClassifier(
        estimator=ExtraTreeClassifier(random_state=0), smoothing="hgs", smoothing_params={"mode": "paper"}
    ).fit(X, labels)
    assert list(clf.classes_) == ["no", "yes"]
    assert set(clf.predict(X)) <= {"no", "yes"}
    assert clf.smoothers_[0].mode == "paper"
    p = clf.predict_proba(X)
    assert np.all(p > 0) and np.allclose(p.sum(axis=1), 1.0)


def test_honest_split_grows_on_one_part_and_predicts_from_all_counts() -> None:
    X, y = _data(n=300)
    clf = SmoothedTreeClassifier(smoothing="laplace", honest="split", honest_fraction=0.6, random_state=1).fit(X, y)
    tree = clf.estimators_[0]
    assert tree.tree_.n_node_samples[0] == 180  # the structure saw 60% of the rows
    leaf_counts = node_counts(tree, X, y, 3)  # ... and the probabilities all of them
    np.testing.assert_allclose(clf.leaf_proba_[0], (leaf_counts + 1) / (leaf_counts.sum(axis=1, keepdims=True) + 3))


def test_crossfit_averages_two_honest_trees() -> None:
    X, y = _data(n=300)
    clf = SmoothedTreeClassifier(smoothing="laplace", honest="crossfit", random_state=1).fit(X, y)
    assert len(clf.estimators_) == 2
    sizes = [t.tree_.n_node_samples[0] for t in clf.estimators_]
    assert sorted(sizes) == [150, 150]
    expected = sum(p[t.apply(X)] for t, p in zip(clf.estimators_, clf.leaf_proba_)) / 2
    np.testing.assert_allclose(clf.predict_proba(X), expected)


def test_the_default_is_the_cross_validated_hgs_and_other_smoothers_are_not_honest() -> None:
    """``honest="auto"`` is the measured best (``"cv"``) for plain HGS, and leaves a smoother the
    user configured (another smoother, parameters, an instance) as given."""
    X, y = _data(n=300)
    default = SmoothedTreeClassifier(random_state=3).fit(X, y)
    explicit = SmoothedTreeClassifier(honest="cv", random_state=3).fit(X, y)
    assert default.honest_ == "cv" and default.cv_weights_ == explicit.cv_weights_
    assert np.array_equal(default.predict_proba(X), explicit.predict_proba(X))
    for params in ({"smoothing": "laplace"}, {"smoothing_params": {"mode": "paper"}}, {"smoothing": HGS()}):
        clf = SmoothedTreeClassifier(random_state=3, **params).fit(X, y)  # type: ignore[arg-type]
        none = SmoothedTreeClassifier(random_state=3, honest="none", **params).fit(X, y)  # type: ignore[arg-type]
        assert clf.honest_ == "none" and not hasattr(clf, "cv_weights_")
        assert np.array_equal(clf.predict_proba(X), none.predict_proba(X))


def test_a_smoother_instance_is_copied_not_fitted_in_place() -> None:
    X, y = _data()
    mine = HGS(mode="paper")
    clf = SmoothedTreeClassifier(smoothing=mine).fit(X, y)
    assert clf.smoothers_[0] is not mine and mine.n_refits == 0
    assert isinstance(SmoothedTreeClassifier(smoothing=MBranch()).fit(X, y).smoothers_[0], MBranch)


@pytest.mark.parametrize(
    ("params", "name"),
    [
        ({"honest": "half"}, "honest"),
        ({"honest_fraction": 1.0}, "honest_fraction"),
        ({"smoothing": "kernel"}, "smoothing"),
        ({"smoothing_params": {"nope": 1}}, "smoothing_params"),
        ({"honest": "cv", "smoothing": "laplace"}, "smoothing"),
        ({"honest": "cv", "cv_folds": 1}, "cv_folds"),
    ],
)
def test_bad_parameters_raise_config_error_at_fit(params: dict[str, object], name: str) -> None:
    X, y = _data()
    clf = SmoothedTreeClassifier(**params)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=f"'{name}'.*Got"):
        clf.fit(X, y)


def test_missing_values_pass_through_when_the_tree_accepts_them() -> None:
    X, y = _data()
    X[::7, 0] = np.nan
    p = SmoothedTreeClassifier(smoothing="hgs").fit(X, y).predict_proba(X)
    assert np.all(np.isfinite(p)) and np.allclose(p.sum(axis=1), 1.0)


def test_cv_keeps_the_full_tree_and_serves_the_chosen_tied_weights() -> None:
    X, y = _data(n=300)
    clf = SmoothedTreeClassifier(honest="cv", random_state=0).fit(X, y)
    weight, prior = clf.cv_weights_
    assert weight in CV_WEIGHTS and prior in CV_PRIOR_WEIGHTS
    tree = clf.estimators_[0]
    assert tree.tree_.n_node_samples[0] == 300  # the served tree saw every row
    topology = Topology.from_parent(tree_parent(tree.tree_))
    expected = fixed_hgs(topology.n_nodes, weight, prior).node_proba(topology, node_counts(tree, X, y, 3))
    np.testing.assert_allclose(clf.leaf_proba_[0], expected)


def test_cv_smooths_hard_on_noise_and_lightly_on_a_clean_concept() -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 5))
    noise = rng.integers(0, 2, 600)
    clean = ((X[:, 0] > 0) ^ (X[:, 1] > 0.5)).astype(int)
    heavy = SmoothedTreeClassifier(honest="cv", random_state=0).fit(X, noise).cv_weights_[0]
    light = SmoothedTreeClassifier(honest="cv", random_state=0).fit(X, clean).cv_weights_[0]
    assert heavy >= 8 and light <= 1


@pytest.mark.parametrize(
    ("weights", "match"),
    [
        (np.ones(10), "hold one weight per row of X"),
        (np.r_[-np.ones(30), np.ones(30)], "be finite and >= 0"),
        (np.r_[np.nan, np.ones(59)], "be finite and >= 0"),
        (["a"] * 60, "be numbers"),
        (np.full(60, 1e307), "sum to a finite number"),  # each finite: the counts overflowed to NaN
    ],
)
def test_bad_sample_weights_are_refused_naming_them(weights: object, match: str) -> None:
    # they raised IndexError, or (negative) gave probabilities of 60000.5 and -59999.5
    X, y = make_classification(n_samples=60, random_state=0)
    with pytest.raises(ValueError, match=f"sample_weight must {match}"):
        SmoothedTreeClassifier(random_state=0).fit(X, y, sample_weight=weights)
    scalar = SmoothedTreeClassifier(random_state=0).fit(X, y, sample_weight=2.0)  # as sklearn takes one
    assert np.allclose(scalar.predict_proba(X).sum(axis=1), 1.0)


@pytest.mark.parametrize(
    ("parent", "counts", "field"),
    [
        ([-1, 0, 0], [[1.0, 2.0], [np.nan, 1.0], [1.0, 1.0]], "counts"),
        ([-1, 0, 0], [[1.0, 2.0], [-1.0, 1.0], [1.0, 1.0]], "counts"),
        ([-1, 0, 0], [[1.0, 2.0], [np.inf, 1.0], [1.0, 1.0]], "counts"),
        ([-1, 0.5, 0], [[1.0, 2.0], [1.0, 1.0], [1.0, 1.0]], "parent"),
        ([-1, 0, 0], np.zeros((3, 0)), "counts"),
        ([-1, 0, 0], [[1e308, 1e308], [1.0, 1.0], [1.0, 1.0]], "counts"),  # a total past any float: NaN
        ([[-1], [0]], [[1.0, 2.0], [1.0, 1.0]], "parent"),  # 2-D: the depth loop never ended
    ],
)
def test_smooth_refuses_counts_that_are_no_counts(parent: list[float], counts: object, field: str) -> None:
    from streamtree.batch import smooth
    from streamtree.exceptions import InputError

    for smoothing in ("hgs", "laplace", "mestimate"):
        with pytest.raises(InputError) as err:
            smooth(np.array(parent), np.array(counts), smoothing)
        assert err.value.field == field


def test_smooth_with_a_smoother_instance_gives_the_same_bits_every_call() -> None:
    # the instance was refitted in place: HGS warm-started from its last call (another tree's too)
    from streamtree.batch import smooth
    from streamtree.smoothing import HGS

    parent = np.array([-1, 0, 0, 1, 1])
    counts = np.array([[30.0, 20.0], [20.0, 5.0], [10.0, 15.0], [15.0, 1.0], [5.0, 4.0]])
    hgs = HGS()
    first = smooth(parent, counts, hgs)
    smooth(np.array([-1, 0, 0]), np.array([[9.0, 1.0], [8.0, 0.0], [1.0, 1.0]]), hgs)
    assert smooth(parent, counts, hgs).tobytes() == first.tobytes() == smooth(parent, counts, HGS()).tobytes()


def test_honest_fraction_too_small_or_large_for_the_data_is_named() -> None:
    # sklearn's train_test_split named its own test_size/train_size, not our parameter
    rng = np.random.RandomState(0)
    X = rng.rand(50, 2)
    y = (X[:, 0] > 0.5).astype(int)
    with pytest.raises(ConfigError, match=r"'honest_fraction' .*\(0\.01\) leaves 0 of the 50 samples"):
        SmoothedTreeClassifier(honest="split", honest_fraction=0.01).fit(X, y)
    # one sample left to fit on: too few to stratify, so the split is not stratified (was a ValueError)
    clf = SmoothedTreeClassifier(honest="split", honest_fraction=0.99, random_state=0).fit(X, y)
    assert clf.predict_proba(X).shape == (50, 2)


@pytest.mark.parametrize("kind", ["forest", "linear"])
def test_an_estimator_that_is_not_a_tree_is_refused_naming_it(kind: str) -> None:
    # it raised AttributeError: no attribute 'tree_', after fitting
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.linear_model import LogisticRegression

    X, y = make_classification(n_samples=60, random_state=0)
    estimator = RandomForestClassifier(n_estimators=2) if kind == "forest" else LogisticRegression()
    for honest in ("none", "cv"):
        with pytest.raises(ConfigError, match="'estimator' parameter .* must be a scikit-learn tree classifier"):
            SmoothedTreeClassifier(estimator=estimator, honest=honest).fit(X, y)


def test_without_scikit_learn_the_import_names_the_extra_to_install() -> None:
    # scikit-learn came only with the dev and bench extras: a plain install got a bare
    # ModuleNotFoundError (and the extras' floor, 1.4, lacks validate_data and get_tags)
    code = (
        "import sys; sys.modules['sklearn'] = None\n"
        "import streamtree, streamtree.batch\n"  # the rest of the library needs no scikit-learn
        "try:\n    import streamtree.sklearn\nexcept ImportError as e:\n    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert (
        'needs scikit-learn 1.6 or later (streamtree\'s "sklearn" extra): pip install "scikit-learn>=1.6"' in out.stdout
    ), out


def test_the_sklearn_extra_asks_for_the_version_the_module_uses() -> None:
    requires = importlib.metadata.requires("streamtree") or []
    assert 'scikit-learn>=1.6; extra == "sklearn"' in requires
    assert not [r for r in requires if r.startswith("scikit-learn") and "1.6" not in r]
