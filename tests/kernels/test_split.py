"""The split kernels against the numpy implementation (LeafStats and tests.reference.criteria)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamtree.kernels import criteria as kc
from streamtree.kernels import leaf_stats as kls
from streamtree.kernels import split as ks
from streamtree.state import MAX, MIN, N_, NOMINAL, NUMERIC, Q_, S_, SEEN, new_arrays
from tests.reference.observers import LeafStats

CRITERIA = ("info_gain", "gini", "hellinger")
NOISE = 1e-12  # merits this close to 0 are rounding noise of a merit that is exactly 0

# -- random leaves ----------------------------------------------------------------------------


def _numeric_column(rng: np.random.Generator, y: np.ndarray, n_classes: int) -> np.ndarray:
    """One numeric column of a kind that exercises a corner of the split search."""
    n = y.size
    kind = rng.choice(["normal", "constant", "one_class_constant", "separated", "integers", "step", "empty"])
    scale = 10.0 ** rng.uniform(-3, 3)
    offset = 10.0 ** rng.uniform(0, 6) if rng.random() < 0.3 else 0.0
    means = rng.normal(size=n_classes) * scale
    if kind == "normal":
        x = offset + means[y] + scale * rng.normal(size=n)
    elif kind == "constant":  # a single value: never a candidate (max == min)
        x = np.full(n, offset + scale)
    elif kind == "one_class_constant":  # class 0 has zero variance: its share is a step
        x = offset + means[y] + scale * rng.normal(size=n)
        x[y == 0] = offset + means[0]
    elif kind == "separated":  # far apart: shares saturate at exactly 0 and 1 (tied thresholds)
        x = offset + 100.0 * scale * y + 0.01 * scale * rng.normal(size=n)
    elif kind == "integers":  # few distinct values: repeated values, some classes constant
        x = offset + rng.integers(0, 3, size=n).astype(float) + y
    elif kind == "step":  # every class constant: every share a step
        x = offset + scale * rng.permutation(n_classes)[y].astype(float)
    else:
        x = np.full(n, np.nan)
    x[rng.random(n) < rng.uniform(0.0, 0.5)] = np.nan
    return x


def _nominal_column(rng: np.random.Generator, y: np.ndarray, n_classes: int, n_values: int) -> np.ndarray:
    n = y.size
    used = rng.integers(1, n_values + 1)  # values >= used are never seen
    probs = rng.dirichlet(np.full(used, 0.7), size=n_classes)
    codes = np.array([rng.choice(used, p=probs[k]) for k in y], dtype=np.int64)
    if n_values >= 2 and rng.random() < 0.2:  # a binary feature: two mirrored candidates
        codes = (y % 2 == 0).astype(np.int64)
    codes[rng.random(n) < rng.uniform(0.0, 0.5)] = -1
    return codes


def _random_leaves(
    rng: np.random.Generator, n_classes: int, n_numeric: int, n_nominal: int, n_values: int, n_rows: int, n_slots: int
) -> tuple[LeafStats, object, list[int]]:
    """The same random rows added to the oracle (in one batch) and to the arrays (one by one)."""
    y = rng.choice(n_classes, size=n_rows, p=rng.dirichlet(np.ones(n_classes)))
    num = (
        np.column_stack([_numeric_column(rng, y, n_classes) for _ in range(n_numeric)])
        if n_numeric
        else np.empty((n_rows, 0))
    )
    nom = (
        np.column_stack([_nominal_column(rng, y, n_classes, n_values) for _ in range(n_nominal)]).astype(np.int64)
        if n_nominal
        else np.empty((n_rows, 0), dtype=np.int64)
    )
    shift = np.zeros(n_numeric)
    for f in range(n_numeric):  # the tree's shift: the first value seen, sometimes something else
        present = num[~np.isnan(num[:, f]), f]
        shift[f] = present[0] if present.size and rng.random() < 0.8 else rng.normal() * 10.0

    oracle = LeafStats()
    oracle.resize(n_classes, n_numeric, n_nominal, n_values)
    for f in range(n_numeric):
        oracle.set_shift(f, shift[f])
    slots = [oracle.allocate() for _ in range(n_slots)]
    row_slot = np.array(slots, dtype=np.int64)[rng.integers(0, n_slots, size=n_rows)]
    oracle.update_many(row_slot, y.astype(np.int64), num, nom)

    # capacities larger than the logical sizes, as a grown tree has them
    arrays = new_arrays(
        slots=oracle.seen.shape[0],
        classes=n_classes + 1,
        numeric=n_numeric + 1,
        nominal=n_nominal + 1,
        values=n_values + 2,
    )
    arrays.shift[:n_numeric] = shift
    for i in range(n_rows):
        kls.update_stats(
            arrays.num_stats,
            arrays.num_range,
            arrays.nom_stats,
            arrays.slot_seen,
            arrays.shift,
            int(row_slot[i]),
            int(y[i]),
            num[i],
            nom[i],
        )
    return oracle, arrays, slots


def _bits(a: np.ndarray) -> bytes:
    return np.ascontiguousarray(a, dtype=np.float64).tobytes()


def _assert_same_stats(oracle: LeafStats, arrays, n_classes, n_numeric, n_nominal, n_values) -> None:  # type: ignore[no-untyped-def]
    s = oracle.seen.shape[0]
    stats = arrays.num_stats[:s, :n_numeric, :n_classes]
    assert _bits(stats[..., N_]) == _bits(oracle.num_n[:, :n_numeric, :n_classes])
    assert _bits(stats[..., S_]) == _bits(oracle.num_s[:, :n_numeric, :n_classes])
    assert _bits(stats[..., Q_]) == _bits(oracle.num_q[:, :n_numeric, :n_classes])
    assert _bits(arrays.num_range[:s, :n_numeric, MIN]) == _bits(oracle.num_min[:, :n_numeric])
    assert _bits(arrays.num_range[:s, :n_numeric, MAX]) == _bits(oracle.num_max[:, :n_numeric])
    assert _bits(arrays.nom_stats[:s, :n_nominal, :n_values, :n_classes]) == _bits(
        oracle.nom[:, :n_nominal, :n_values, :n_classes]
    )
    assert _bits(arrays.slot_seen[:s, SEEN]) == _bits(oracle.seen)
    # nothing outside the logical sizes was touched
    assert not arrays.num_stats[:, n_numeric:].any() and not arrays.num_stats[:, :, n_classes:].any()
    assert not arrays.nom_stats[:, n_nominal:].any() and not arrays.nom_stats[:, :, n_values:].any()
    assert not arrays.nom_stats[..., n_classes:].any()


def _check_best_split(oracle, arrays, slot, dims, criterion, n_split_points, mbf) -> str:  # type: ignore[no-untyped-def]
    """Kernel and oracle agree on the split of ``slot``; returns the kind found (for coverage)."""
    n_classes, n_numeric, n_nominal, n_values = dims
    # features of equal merit go to the smallest key: keys in a random order, not the columns'
    keys = np.random.default_rng(slot).permutation(n_numeric + n_nominal).astype(np.int64)
    expected = oracle.best_split(slot, criterion, n_split_points, mbf, keys)
    left = np.full(n_classes + 1, 7.0)
    right = np.full(n_classes + 1, 7.0)
    found, kind, col, thr, merit, second = ks.best_split(
        arrays.num_stats,
        arrays.num_range,
        arrays.nom_stats,
        arrays.shift,
        slot,
        n_classes,
        n_numeric,
        n_nominal,
        n_values,
        kc.CRITERION_CODES[criterion],
        n_split_points,
        mbf,
        np.ones(n_numeric + n_nominal, dtype=np.bool_),
        keys,
        left,
        right,
    )
    assert left[n_classes] == 7.0 and right[n_classes] == 7.0  # only [:n_classes] written
    if expected is None:
        assert not found and kind == -1 and col == -1 and merit == -math.inf and second == 0.0
        assert not left[:n_classes].any() and not right[:n_classes].any()
        return "none"
    assert found
    assert merit == pytest.approx(expected.merit, rel=0, abs=1e-9)
    assert second == pytest.approx(expected.second_merit, rel=0, abs=1e-9)
    if (kind, col, thr) != (expected.kind, expected.col, expected.threshold):
        # Only between candidates whose merit is rounding noise: at a leaf where one class alone
        # is present every information gain is 0 up to +-1e-15, and which of those noises is
        # the largest follows the last bit of the normal CDF (libm here, cephes in scipy).
        assert abs(expected.merit) < NOISE and abs(merit) < NOISE, (kind, col, thr, merit, expected)
        return "noise"
    np.testing.assert_allclose(left[:n_classes], expected.left, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(right[:n_classes], expected.right, rtol=1e-12, atol=1e-9)
    if kind == NOMINAL:
        # no normal CDF involved: the same bits
        assert merit == expected.merit
        assert _bits(left[:n_classes]) == _bits(expected.left)
    return "numeric" if kind == NUMERIC else "nominal"


# -- update_stats ---------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(20))
def test_update_stats_bit_identical_to_leafstats(seed: int) -> None:
    rng = np.random.default_rng(seed)
    dims = (int(rng.integers(1, 7)), int(rng.integers(0, 6)), int(rng.integers(0, 4)), int(rng.integers(1, 6)))
    oracle, arrays, _ = _random_leaves(rng, *dims, n_rows=int(rng.integers(0, 120)), n_slots=3)
    _assert_same_stats(oracle, arrays, *dims)


def test_update_stats_one_example() -> None:
    arrays = new_arrays(slots=2, classes=3, numeric=3, nominal=2, values=4)
    arrays.shift[:] = [1.0, 0.0, 10.0]
    row = np.array([3.0, np.nan, 7.0])
    kls.update_stats(
        arrays.num_stats,
        arrays.num_range,
        arrays.nom_stats,
        arrays.slot_seen,
        arrays.shift,
        1,
        2,
        row,
        np.array([3, -1], dtype=np.int64),
    )
    assert arrays.num_stats[1, 0, 2].tolist() == [1.0, 2.0, 4.0]
    assert arrays.num_stats[1, 2, 2].tolist() == [1.0, -3.0, 9.0]
    assert not arrays.num_stats[1, 1].any() and not arrays.num_stats[0].any()
    assert arrays.num_range[1, 0].tolist() == [3.0, 3.0]
    assert arrays.num_range[1, 1].tolist() == [math.inf, -math.inf]
    assert arrays.nom_stats[1, 0, 3, 2] == 1.0 and arrays.nom_stats.sum() == 1.0
    assert arrays.slot_seen[1].tolist() == [1.0, 0.0, 0.0] and arrays.slot_seen[0].tolist() == [0.0, 0.0, 0.0]


def test_update_stats_row_shorter_than_capacity_and_signed_zeros() -> None:
    """Columns past the row's length are untouched; min/max ties take the new value, as numpy does."""
    rows = np.array([[0.0, 5.0], [-0.0, -0.0], [0.0, 0.0]])
    oracle = LeafStats()
    oracle.resize(2, 2, 0, 1)
    s = oracle.allocate()
    oracle.update_many(np.full(3, s), np.array([0, 1, 0]), rows, np.empty((3, 0), dtype=np.int64))
    arrays = new_arrays(slots=1, classes=2, numeric=4, nominal=1, values=1)
    for row, k in zip(rows, [0, 1, 0]):
        kls.update_stats(
            arrays.num_stats,
            arrays.num_range,
            arrays.nom_stats,
            arrays.slot_seen,
            arrays.shift,
            0,
            k,
            row,
            np.empty(0, dtype=np.int64),
        )
    assert _bits(arrays.num_range[0, :2, MIN]) == _bits(oracle.num_min[s, :2])
    assert _bits(arrays.num_range[0, :2, MAX]) == _bits(oracle.num_max[s, :2])
    assert arrays.num_range[0, 2:].tolist() == [[math.inf, -math.inf]] * 2
    assert not arrays.num_stats[0, 2:].any() and not arrays.nom_stats.any()


# -- best_split -----------------------------------------------------------------------------------


@given(
    n_classes=st.integers(1, 6),
    n_numeric=st.integers(0, 5),
    n_nominal=st.integers(0, 3),
    n_values=st.integers(1, 5),
    n_rows=st.integers(0, 150),
    seed=st.integers(0, 2**32 - 1),
    criterion=st.sampled_from(CRITERIA),
    n_split_points=st.integers(1, 20),
    mbf=st.one_of(st.floats(0.0, 0.4), st.sampled_from([0.0, 0.1, 0.25, 1.0 / 3.0, 0.4])),
)
def test_best_split_matches_leafstats(  # type: ignore[no-untyped-def]
    n_classes, n_numeric, n_nominal, n_values, n_rows, seed, criterion, n_split_points, mbf
) -> None:
    rng = np.random.default_rng(seed)
    dims = (n_classes, n_numeric, n_nominal, n_values)
    oracle, arrays, slots = _random_leaves(rng, *dims, n_rows=n_rows, n_slots=2)
    _assert_same_stats(oracle, arrays, *dims)
    for slot in slots:
        _check_best_split(oracle, arrays, slot, dims, criterion, n_split_points, mbf)


def test_best_split_matches_leafstats_sweep() -> None:
    """Many seeded leaves, every criterion; both kinds of split and 'no split' must occur."""
    rng = np.random.default_rng(12345)
    found = {"numeric": 0, "nominal": 0, "none": 0, "noise": 0}
    for case in range(300):
        dims = (int(rng.integers(1, 7)), int(rng.integers(0, 6)), int(rng.integers(0, 4)), int(rng.integers(1, 6)))
        oracle, arrays, slots = _random_leaves(rng, *dims, n_rows=int(rng.integers(0, 200)), n_slots=2)
        n_split_points = int(rng.integers(1, 21))
        mbf = float(rng.choice([0.0, 0.1, 0.25, rng.uniform(0.0, 0.4)]))
        for criterion in CRITERIA:
            for slot in slots:
                try:
                    found[_check_best_split(oracle, arrays, slot, dims, criterion, n_split_points, mbf)] += 1
                except AssertionError as error:
                    raise AssertionError(f"case {case}, {criterion}, slot {slot}, dims {dims}") from error
    assert min(found["numeric"], found["nominal"], found["none"]) > 50, found
    assert found["noise"] < 0.01 * sum(found.values()), found


def _leaf(rows: list[list[float]], ys: list[int], n_classes: int, shift: list[float] | None = None):  # type: ignore[no-untyped-def]
    num = np.array(rows, dtype=float)
    arrays = new_arrays(slots=1, classes=n_classes, numeric=num.shape[1], nominal=1, values=1)
    if shift is not None:
        arrays.shift[:] = shift
    for row, k in zip(num, ys):
        kls.update_stats(
            arrays.num_stats,
            arrays.num_range,
            arrays.nom_stats,
            arrays.slot_seen,
            arrays.shift,
            0,
            k,
            row,
            np.empty(0, dtype=np.int64),
        )
    return arrays


def _split(
    arrays,
    n_classes,
    criterion="info_gain",
    n_split_points=3,
    mbf=0.0,
    n_nominal=0,
    n_values=1,
    allowed=None,
    keys=None,
):  # type: ignore[no-untyped-def]
    left, right = np.zeros(n_classes), np.zeros(n_classes)
    if allowed is None:
        allowed = np.ones(arrays.shift.size + n_nominal, dtype=np.bool_)
    if keys is None:
        keys = np.arange(allowed.size, dtype=np.int64)
    result = ks.best_split(
        arrays.num_stats,
        arrays.num_range,
        arrays.nom_stats,
        arrays.shift,
        0,
        n_classes,
        arrays.shift.size,
        n_nominal,
        n_values,
        kc.CRITERION_CODES[criterion],
        n_split_points,
        mbf,
        allowed,
        keys,
        left,
        right,
    )
    return result, left, right


def test_best_split_hand_example() -> None:
    """Two zero-variance classes at 0 and 4: thresholds 1, 2, 3 all separate them; the first wins."""
    arrays = _leaf([[0.0, 1.0], [0.0, 1.0], [4.0, 1.0], [4.0, 1.0]], [0, 0, 1, 1], 2, shift=[0.0, 1.0])
    (found, kind, col, thr, merit, second), left, right = _split(arrays, 2)
    assert (found, kind, col, thr, merit, second) == (True, NUMERIC, 0, 1.0, 1.0, 0.0)  # column 1: max == min
    assert left.tolist() == [2.0, 0.0] and right.tolist() == [0.0, 2.0]


def test_features_of_equal_merit_go_to_the_smallest_key() -> None:
    """Columns 0 and 2 separate the classes equally well (column 1 less well): the split is
    on whichever of them has the smaller key, so it does not depend on the columns' order."""
    arrays = _leaf([[0.0, 0.0, 5.0], [0.0, 1.0, 5.0], [4.0, 0.0, 9.0], [4.0, 1.0, 9.0]], [0, 0, 1, 1], 2)
    for keys, col in (([1, 0, 2], 0), ([2, 0, 1], 2), ([9, -3, 9], 0)):
        (found, kind, chosen, _, merit, second), _, _ = _split(arrays, 2, keys=np.array(keys, dtype=np.int64))
        assert (found, kind, chosen, merit, second) == (True, NUMERIC, col, 1.0, 1.0)


def test_best_split_nothing_to_split() -> None:
    empty = new_arrays(slots=1, classes=2, numeric=2, nominal=1, values=2)
    (found, kind, col, _, merit, second), left, right = _split(empty, 2, n_nominal=1, n_values=2)
    assert (found, kind, col, merit, second) == (False, -1, -1, -math.inf, 0.0)
    # every candidate sends too few examples to one side
    arrays = _leaf([[0.0], [1.0], [2.0], [3.0]], [0, 0, 1, 1], 2)
    assert _split(arrays, 2, mbf=0.6)[0][0] is False
    assert _split(arrays, 2, mbf=0.1)[0][0] is True


def test_classes_seen_and_a_leaf_of_one_class_never_splits() -> None:
    """``classes_seen`` counts (up to 2) the classes a slot holds examples of; below 2 the
    learning loop skips the search, which is exact only because no criterion then finds a
    merit above the noise the loop refuses (``MERIT_NOISE``)."""
    rng = np.random.default_rng(7)
    outcomes = {0: 0, 1: 0, 2: 0}
    for _ in range(300):
        dims = (int(rng.integers(1, 5)), int(rng.integers(0, 5)), int(rng.integers(0, 3)), int(rng.integers(1, 5)))
        n_classes, n_numeric, n_nominal, n_values = dims
        _, arrays, slots = _random_leaves(rng, *dims, n_rows=int(rng.integers(0, 12)), n_slots=2)
        for slot in slots:
            seen = kls.classes_seen(arrays.num_stats, arrays.nom_stats, slot, n_classes, n_numeric, n_nominal, n_values)
            present = (arrays.num_stats[slot, :n_numeric, :n_classes, N_] > 0).any(axis=0) | (
                arrays.nom_stats[slot, :n_nominal, :n_values, :n_classes] > 0
            ).any(axis=(0, 1))
            assert seen == min(int(present.sum()), 2)
            outcomes[seen] += 1
            if seen >= 2:
                continue
            for criterion in CRITERIA:
                found, *_, merit, _second = ks.best_split(
                    arrays.num_stats,
                    arrays.num_range,
                    arrays.nom_stats,
                    arrays.shift,
                    slot,
                    n_classes,
                    n_numeric,
                    n_nominal,
                    n_values,
                    kc.CRITERION_CODES[criterion],
                    10,
                    0.0,
                    np.ones(n_numeric + n_nominal, dtype=np.bool_),
                    np.arange(n_numeric + n_nominal, dtype=np.int64),
                    np.empty(n_classes),
                    np.empty(n_classes),
                )
                assert not found or merit <= NOISE, (criterion, dims, merit)
    assert min(outcomes.values()) > 50, outcomes


# -- the random split (random decision trees) -------------------------------------------------
def _random_reference(arrays, n_classes, n_numeric, n_nominal, n_values, draws, u):  # type: ignore[no-untyped-def]
    """What ``random_split`` must choose, written plainly with numpy."""
    slot = 0
    candidates = []
    for f in range(n_numeric):
        lo, hi = arrays.num_range[slot, f]
        if hi > lo and arrays.num_stats[slot, f, :n_classes, 0].sum() > 0:
            candidates.append(f)
    for c in range(n_nominal):
        if (arrays.nom_stats[slot, c, :n_values, :n_classes].sum(axis=1) > 0).sum() >= 2:
            candidates.append(n_numeric + c)
    if not candidates:
        return None
    f = min(candidates, key=lambda j: (int(draws[j]), j))
    if f < n_numeric:
        lo, hi = arrays.num_range[slot, f]
        return NUMERIC, f, lo + (hi - lo) * u
    c = f - n_numeric
    seen = [v for v in range(n_values) if arrays.nom_stats[slot, c, v, :n_classes].sum() > 0]
    return NOMINAL, c, float(seen[min(int(u * len(seen)), len(seen) - 1)])


@pytest.mark.parametrize("seed", range(20))
def test_random_split_matches_its_reference(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n_classes, n_numeric, n_nominal, n_values = 3, 3, 2, 4
    arrays = new_arrays(nodes=4, slots=2, classes=n_classes, numeric=n_numeric, nominal=n_nominal, values=n_values)
    for _ in range(int(rng.integers(0, 40))):
        num_row = rng.normal(size=n_numeric)
        num_row[rng.random(n_numeric) < 0.5 * (seed % 2)] = np.nan  # some columns never seen
        nom_row = rng.integers(0, 2 if seed % 3 else n_values, size=n_nominal)
        kls.update_stats(
            arrays.num_stats,
            arrays.num_range,
            arrays.nom_stats,
            arrays.slot_seen,
            arrays.shift,
            0,
            int(rng.integers(0, n_classes)),
            num_row,
            nom_row,
        )
    draws = rng.integers(0, 2**63, size=n_numeric + n_nominal).astype(np.uint64)
    u = float(rng.random())
    left, right = np.zeros(n_classes), np.zeros(n_classes)
    found, kind, col, thr = ks.random_split(
        arrays.num_stats,
        arrays.num_range,
        arrays.nom_stats,
        arrays.shift,
        0,
        n_classes,
        n_numeric,
        n_nominal,
        n_values,
        draws,
        u,
        left,
        right,
    )
    expected = _random_reference(arrays, n_classes, n_numeric, n_nominal, n_values, draws, u)
    if expected is None:
        assert not found
        return
    assert found and (kind, col) == expected[:2] and thr == pytest.approx(expected[2], rel=1e-15)
    totals = (
        arrays.num_stats[0, col, :n_classes, 0]
        if kind == NUMERIC
        else arrays.nom_stats[0, col, :n_values, :n_classes].sum(axis=0)
    )
    assert left + right == pytest.approx(totals)  # every example goes one way
    if kind == NOMINAL:
        assert left.tolist() == arrays.nom_stats[0, col, int(thr), :n_classes].tolist()
