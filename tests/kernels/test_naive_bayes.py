"""The compiled naive-Bayes kernels against their oracle,
:class:`tests.reference.naive_bayes.NaiveBayesFactor`.

Every kernel is held to 1e-12 (relative). Where the oracle is plain Python arithmetic the
results are compared for equality; where it goes through numpy's ``exp``/``log`` the kernels
are bit-identical too on a platform whose numpy agrees with the C library there (checked, not
assumed: a numpy with its own SIMD ``exp``/``log`` may round differently in the last bit).
"""

from __future__ import annotations

import math
import sys

import numpy as np
import pytest

from streamtree import state
from streamtree.kernels import naive_bayes as kernels
from streamtree.kernels.naive_bayes import (
    BUFFER,
    nb_fit,
    nb_loglik,
    nb_loglik_rows,
    nb_score,
    nb_temper,
)
from streamtree.state import N_, Q_, S_
from tests.kernels.exact import assert_close
from tests.kernels.nb_arrays import LOG_FLOOR, Arrays, Stream, feed, filled, oracle_params_into
from tests.reference import naive_bayes as oracle_module
from tests.reference.naive_bayes import NaiveBayesFactor


# -- constants ------------------------------------------------------------------------------
def test_constants_agree_with_the_oracle() -> None:
    for name in ("NU", "SAMPLE_EVERY", "BUFFER", "MIN_SAMPLES", "NEWTON_STEPS"):
        assert getattr(kernels, name) == getattr(oracle_module, name), name
    assert kernels.BUFFER == state.BUFFER
    assert kernels.LOG_2PI == oracle_module._LOG_2PI
    assert kernels.LOG_FLOOR == LOG_FLOOR
    assert oracle_module.MIN_PROBA == state.MIN_PROBA


@pytest.mark.parametrize("name", ["nb_refresh", "nb_loglik", "nb_loglik_rows", "nb_temper", "nb_score", "nb_fit"])
def test_every_kernel_documents_its_formula(name: str) -> None:
    assert ".. math::" in (getattr(kernels, name).__doc__ or "")


# -- refresh --------------------------------------------------------------------------------
@pytest.mark.parametrize(("classes", "seed"), [(1, 0), (2, 1), (3, 2), (5, 3), (9, 4), (12, 5)])
@pytest.mark.parametrize("n", [0, 1, 2, 5, 40, 400])
def test_refresh_matches_the_oracle(classes: int, seed: int, n: int) -> None:
    stream = Stream(n_classes=classes, seed=seed)
    nb, arrays = filled(stream, n)
    nb.refresh(classes)
    stats = nb.stats
    f, c, v = stream.n_numeric, stream.n_nominal, stream.n_values
    # the arrays hold LeafStats' statistics to the bit
    np.testing.assert_array_equal(arrays.nb_num[0, :f, :classes, N_], stats.num_n[0, :f, :classes])
    np.testing.assert_array_equal(arrays.nb_num[0, :f, :classes, S_], stats.num_s[0, :f, :classes])
    np.testing.assert_array_equal(arrays.nb_num[0, :f, :classes, Q_], stats.num_q[0, :f, :classes])
    np.testing.assert_array_equal(arrays.nb_nom[0, :c, :v, :classes], stats.nom[0, :c, :v, :classes])

    arrays.refresh(classes, f, c, v)
    assert_close(arrays.nb_mean[:f, :classes], nb.mean)
    assert_close(arrays.nb_inv2var[:f, :classes], nb.inv2var)
    assert_close(arrays.nb_const[:f, :classes], nb.const)
    assert_close(arrays.nb_table[:c, : v + 1, :classes], nb.table)
    # the never-observed columns: zero parameters, NaN table
    assert not arrays.nb_inv2var[1].any() and np.isnan(arrays.nb_table[2]).all()
    # outside the logical sizes: cleared; rows past the unseen-value row repeat it
    assert not arrays.nb_mean[f:].any() and not arrays.nb_mean[:, classes:].any()
    assert not arrays.nb_inv2var[f:].any() and not arrays.nb_const[:, classes:].any()
    assert np.isnan(arrays.nb_table[c:]).all() and np.isnan(arrays.nb_table[:, :, classes:]).all()
    past = arrays.nb_table.shape[1] - (v + 1)
    assert past > 0
    for col in range(c):
        unseen = arrays.nb_table[col, v : v + 1, :classes]
        np.testing.assert_array_equal(arrays.nb_table[col, v + 1 :, :classes], np.repeat(unseen, past, axis=0))
    if n >= 400:  # every class has values: the columns are used
        assert arrays.nb_inv2var[0, :classes].all() and not np.isnan(arrays.nb_table[0, :, :classes]).any()


def test_refresh_with_nothing_learned_and_no_classes() -> None:
    arrays = Arrays(2, 2, 2, 2)
    arrays.refresh(0, 2, 2, 2)
    assert not arrays.nb_mean.any() and not arrays.nb_inv2var.any() and not arrays.nb_const.any()
    assert np.isnan(arrays.nb_table).all()


def test_refresh_refuses_sizes_beyond_the_capacities() -> None:
    arrays = Arrays(2, 2, 2, 2)
    with pytest.raises(ValueError):
        arrays.refresh(2, 3, 2, 2)
    with pytest.raises(ValueError):
        arrays.refresh(3, 2, 2, 2)
    with pytest.raises(ValueError):
        arrays.refresh(2, 2, 2, 3)


# -- log likelihoods ------------------------------------------------------------------------
def query_rows(
    stream: Stream, rng: np.random.Generator, n: int, numeric: int, nominal: int
) -> tuple[np.ndarray, np.ndarray]:
    """Rows to score: missing values, codes seen and never seen, wild numeric values."""
    num = rng.normal(0.0, 3.0, size=(n, numeric)) + stream.means[:numeric, 0]
    num[rng.random((n, numeric)) < 0.2] = np.nan
    num[rng.random((n, numeric)) < 0.02] = 1e30
    # beyond ~1e154 a square overflows: the column then adds nothing (it gave -inf, then NaN)
    num[rng.random((n, numeric)) < 0.02] = 1e200
    num[rng.random((n, numeric)) < 0.02] = -1e308
    nom = rng.integers(-1, stream.n_values + 4, size=(n, nominal))
    return num, nom


@pytest.mark.parametrize(("classes", "late", "seed"), [(1, 0, 0), (2, 0, 1), (3, 2, 2), (9, 1, 3), (2, 3, 4)])
def test_loglik_matches_row_loglik(classes: int, late: int, seed: int) -> None:
    """``late`` classes were registered after the refresh: they get the row's best."""
    stream = Stream(n_classes=classes, seed=seed)
    nb, arrays = filled(stream, 300)
    nb.refresh(classes)
    f, c, v = stream.n_numeric, stream.n_nominal, stream.n_values
    arrays.refresh(classes, f, c, v)
    nb.resize(classes + late, f, c, v)
    num, nom = query_rows(stream, np.random.default_rng(seed + 100), 200, f, c)

    expected = np.array([nb.row_loglik(num[i].tolist(), nom[i].tolist(), classes + late) for i in range(len(num))])
    got = np.array([arrays.loglik(classes, f, c, v, num[i], nom[i], classes + late) for i in range(len(num))])
    assert_close(got, expected)
    if late:
        np.testing.assert_array_equal(
            got[:, classes:], np.repeat(got[:, :classes].max(axis=1, keepdims=True), late, axis=1)
        )

    # with the oracle's own parameters it is the same arithmetic: equal, on any platform
    oracle_params_into(nb, arrays)
    got = np.array([arrays.loglik(classes, f, c, v, num[i], nom[i], classes + late) for i in range(len(num))])
    assert_close(got, expected, exact=True)

    # the batch: row by row exactly, the oracle's vectorised loglik up to rounding
    out = np.full((len(num), classes + late + 1), 99.0)
    nb_loglik_rows(
        arrays.nb_mean,
        arrays.nb_inv2var,
        arrays.nb_const,
        arrays.nb_table,
        arrays.shift,
        classes,
        f,
        c,
        v,
        num,
        nom,
        classes + late,
        out,
    )
    np.testing.assert_array_equal(out[:, : classes + late], got)
    assert (out[:, classes + late :] == 99.0).all()
    batch = nb.loglik(num, nom, classes + late)
    assert np.isfinite(out[:, : classes + late]).all()
    np.testing.assert_allclose(out[:, : classes + late], batch, rtol=1e-12, atol=1e-9)


def test_loglik_reads_only_what_the_last_refresh_knew() -> None:
    """Columns and value codes registered after the refresh add nothing (codes past the
    refresh's read the unseen-value row); wider rows give the same result."""
    stream = Stream(n_numeric=4, n_nominal=3, n_values=5, n_classes=3, seed=8)
    nb, arrays = filled(stream, 200)
    nb.refresh(3)
    arrays.refresh(3, 4, 3, 5)
    # two numeric columns, one nominal column and two value codes arrive
    nb.resize(3, 6, 4, 7)
    rng = np.random.default_rng(9)
    num, nom = query_rows(stream, rng, 100, 4, 3)
    num = np.concatenate([num, rng.normal(size=(100, 2))], axis=1)
    nom = np.concatenate([nom, rng.integers(-1, 7, size=(100, 1))], axis=1)
    shift = arrays.shift.copy()
    arrays.shift[4:6] = 0.25  # shifts of the new columns: never read
    for i in range(len(num)):
        expected = nb.row_loglik(num[i].tolist(), nom[i].tolist(), 3)
        # the caller may pass the refresh's column counts or today's: the same
        assert_close(arrays.loglik(3, 6, 4, 5, num[i], nom[i], 3), expected)
        assert_close(arrays.loglik(3, 4, 3, 5, num[i], nom[i], 3), expected)
        # rows narrower than the columns: the missing columns count as missing
        short = nb.row_loglik(num[i, :2].tolist() + [math.nan] * 4, nom[i, :1].tolist() + [-1] * 3, 3)
        assert_close(arrays.loglik(3, 6, 4, 5, num[i, :2].copy(), nom[i, :1].copy(), 3), short)
    assert (shift[:4] == arrays.shift[:4]).all()


def test_loglik_before_any_refresh_is_zero() -> None:
    nb = NaiveBayesFactor()
    nb.resize(3, 2, 1, 2)
    arrays = Arrays(2, 1, 2, 3)
    arrays.nb_mean[:], arrays.nb_inv2var[:], arrays.nb_const[:], arrays.nb_table[:] = 0.0, 0.0, 0.0, np.nan
    num, nom = np.array([0.3, np.nan]), np.array([1], dtype=np.int64)
    expected = nb.row_loglik(num.tolist(), nom.tolist(), 3)
    assert expected == [0.0, 0.0, 0.0]
    assert_close(arrays.loglik(0, 2, 1, 0, num, nom, 3), expected, exact=True)


def test_loglik_refuses_sizes_beyond_the_arrays() -> None:
    arrays = Arrays(2, 1, 2, 3)
    arrays.refresh(3, 2, 1, 2)
    out = np.zeros(2)
    num, nom = np.zeros(2), np.zeros(1, dtype=np.int64)
    args = (arrays.nb_mean, arrays.nb_inv2var, arrays.nb_const, arrays.nb_table, arrays.shift)
    with pytest.raises(ValueError):
        nb_loglik(*args, 3, 2, 1, 2, num, nom, 3, out)  # out too short
    with pytest.raises(ValueError):
        nb_loglik(*args, 3, 2, 1, 3, num, nom, 3, np.zeros(3))  # no row for 3 value codes


# -- tempering ------------------------------------------------------------------------------
@pytest.mark.parametrize("gamma", [0.0, 1e-3, 0.37, 1.0])
@pytest.mark.parametrize("classes", [1, 2, 5, 11])
def test_temper_matches_the_oracle(gamma: float, classes: int) -> None:
    rng = np.random.default_rng(classes)
    nb = NaiveBayesFactor()
    nb.gamma = gamma
    # Python >= 3.12 sums floats with compensation: the oracle then differs in the last bits
    exact = sys.version_info < (3, 12)
    for _ in range(200):
        proba = rng.dirichlet(np.full(classes, 0.5))
        proba = np.maximum(proba, 1e-300)
        loglik = rng.normal(0.0, 30.0, size=classes)
        expected = nb.temper(proba.tolist(), loglik.tolist())
        out = np.full(classes + 1, 99.0)
        nb_temper(proba, loglik, gamma, classes, out)
        assert_close(out[:classes], expected, exact=exact)
        assert out[classes] == 99.0
        nb_temper(proba, loglik, gamma, classes, proba)  # in place
        assert_close(proba, out[:classes], exact=True)


def test_temper_with_no_classes_writes_nothing() -> None:
    out = np.array([5.0])
    nb_temper(np.zeros(0), np.zeros(0), 0.5, 0, out)
    assert out[0] == 5.0


# -- scoring and fitting gamma --------------------------------------------------------------
def scored_pair(
    classes_over_time: list[int], n: int, seed: int, signal: float = 1.0
) -> tuple[NaiveBayesFactor, Arrays, int]:
    """Oracle and arrays after scoring ``n`` examples (class count growing as listed), each
    with tree probabilities and log likelihoods that carry some information about ``y``."""
    rng = np.random.default_rng(seed)
    kmax = max(classes_over_time)
    nb, arrays = NaiveBayesFactor(), Arrays(1, 1, 1, kmax + 2)
    for i in range(n):
        k = classes_over_time[min(i * len(classes_over_time) // max(n, 1), len(classes_over_time) - 1)]
        if k != nb.a.shape[1]:
            nb.resize(k, 0, 0, 0)
        y = int(rng.integers(k))
        logits = rng.normal(size=k)
        logits[y] += 0.7
        proba = np.exp(logits) / np.exp(logits).sum()
        proba[rng.random(k) < 0.05] = 0.0  # floored at 1e-15
        loglik = rng.normal(0.0, 2.0, size=k)
        loglik[y] += signal
        nb.score(proba, loglik.tolist(), y)
        nb_score(arrays.nb_a, arrays.nb_b, arrays.nb_y, i, proba, loglik, k, y)
    return nb, arrays, n


@pytest.mark.parametrize("n", [1, 100, BUFFER, BUFFER + 77, 3 * BUFFER + 5])
def test_score_matches_the_oracle_and_pads_new_classes(n: int) -> None:
    nb, arrays, _ = scored_pair([2, 3, 3, 5], n, seed=n)
    k = nb.a.shape[1]
    assert_close(arrays.nb_a[:, :k], nb.a)
    assert_close(arrays.nb_b[:, :k], nb.b, exact=True)
    np.testing.assert_array_equal(arrays.nb_y, nb.y)
    # capacity past the classes keeps the creation fill
    assert (arrays.nb_a[:, k:] == LOG_FLOOR).all() and not arrays.nb_b[:, k:].any()


@pytest.mark.parametrize("n", [10, 63, 64, 65, 200, BUFFER, 2 * BUFFER + 3])
@pytest.mark.parametrize("start", [0.0, 0.4, 1.0])
@pytest.mark.parametrize(("classes", "signal"), [([2], 1.0), ([2, 3], 0.2), ([3, 4, 9, 12], 3.0), ([5], -1.0)])
def test_fit_matches_the_oracle(n: int, start: float, classes: list[int], signal: float) -> None:
    nb, arrays, n_scored = scored_pair(classes, n, seed=n + len(classes), signal=signal)
    nb.gamma = start
    nb.fit()
    got = nb_fit(arrays.nb_a, arrays.nb_b, arrays.nb_y, n_scored, nb.a.shape[1], start)
    assert isinstance(got, float)
    assert_close(np.array(got), np.array(nb.gamma))
    assert 0.0 <= got <= 1.0
    if n < kernels.MIN_SAMPLES:
        assert got == start


def test_fit_stops_without_curvature() -> None:
    """Log likelihoods that are the same for every class carry no information: no step."""
    arrays = Arrays(1, 1, 1, 3)
    arrays.nb_a[:, :2] = np.log(0.5)
    arrays.nb_b[:] = 0.0
    assert nb_fit(arrays.nb_a, arrays.nb_b, arrays.nb_y, 200, 2, 0.3) == 0.3


# -- the whole cycle, as the tree runs it ---------------------------------------------------
def test_a_stream_with_late_classes_columns_and_values_matches_the_oracle() -> None:
    """Score every SAMPLE_EVERY-th example before learning it, refresh and fit every 150,
    while classes, columns and value codes keep arriving; the kernels follow the oracle."""
    stream = Stream(n_numeric=5, n_nominal=4, n_values=6, n_classes=4, seed=21)
    nb, arrays = NaiveBayesFactor(), Arrays(7, 5, 9, 6)
    gamma = 0.0
    n_scored = 0
    at_refresh = (0, 0, 0, 0)  # classes, numeric, nominal, values the parameters know
    schedule = [(0, 2, 2, 2, 3), (300, 3, 3, 3, 4), (700, 4, 5, 4, 6)]  # at, classes, numeric, nominal, values
    shape = (0, 0, 0, 0)
    for i in range(1500):
        k_now, f_now, c_now, v_now = next((k, f, c, v) for at, k, f, c, v in reversed(schedule) if i >= at)
        y = int(stream.rng.integers(k_now))
        num, nom = stream.row(y, f_now, c_now, v_now)
        if (k_now, f_now, c_now, v_now) != shape:
            old_f = shape[1]
            nb.resize(k_now, f_now, c_now, v_now)
            for col in range(old_f, f_now):
                value = float(num[col]) if num[col] == num[col] else 0.0
                nb.stats.set_shift(col, value)
                arrays.shift[col] = value
            shape = (k_now, f_now, c_now, v_now)
        if (i + 1) % kernels.SAMPLE_EVERY == 0:
            proba = stream.rng.dirichlet(np.ones(k_now))
            expected = nb.row_loglik(num.tolist(), nom.tolist(), k_now)
            got = arrays.loglik(*at_refresh, num, nom, k_now)
            assert_close(got, expected)
            # the factor as served: tempered probabilities
            tempered = np.empty(k_now)
            nb_temper(proba, got, gamma, k_now, tempered)
            assert_close(tempered, nb.temper(proba.tolist(), expected))
            nb.score(proba, expected, y)
            nb_score(arrays.nb_a, arrays.nb_b, arrays.nb_y, n_scored, proba, got, k_now, y)
            n_scored += 1
        feed(nb, arrays, y, num, nom, f_now)
        if (i + 1) % 150 == 0:
            nb.refresh(k_now)
            nb.fit()
            arrays.refresh(k_now, f_now, c_now, v_now)
            gamma = nb_fit(arrays.nb_a, arrays.nb_b, arrays.nb_y, n_scored, k_now, gamma)
            at_refresh = (k_now, f_now, c_now, v_now)
            assert_close(np.array(gamma), np.array(nb.gamma))
            assert_close(arrays.nb_table[:c_now, : v_now + 1, :k_now], nb.table)
            assert_close(arrays.nb_const[:f_now, :k_now], nb.const)
    assert n_scored == nb.n_scored and 0.0 < gamma <= 1.0
