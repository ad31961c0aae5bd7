"""The compiled ADWIN kernel against its oracle, :class:`tests.reference.adwin.Adwin`.

Both do the same floating-point operations in the same order, so everything is compared for
exact equality: the examples at which they fire, the cuts that only re-place the last detected
change (the window shrinks, nothing is reported), width, total, variance, change, the time of
the last detection and every bucket.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamtree.kernels.adwin import MIN_PART, adwin_from_state, adwin_to_state, adwin_update, new_adwin
from streamtree.state import (
    A_CHANGE,
    A_CLOCK,
    A_DELTA,
    A_DETECTED_AT,
    A_DETECTIONS,
    A_MAX_BUCKETS,
    A_N_ROWS,
    A_TIME,
    A_TOTAL,
    A_VARIANCE,
    A_WIDTH,
    ADWIN_ROWS,
    ADWIN_SCALARS,
)
from tests.reference import adwin as drift
from tests.reference.adwin import Adwin


def bernoulli(rng: np.random.Generator, segments: list[tuple[int, float]]) -> np.ndarray:
    """0/1 values: ``n`` draws with mean ``p`` per segment."""
    return np.concatenate([(rng.random(n) < p).astype(np.float64) for n, p in segments])


def gaussian(rng: np.random.Generator, segments: list[tuple[int, float]], scale: float = 1.0) -> np.ndarray:
    return np.concatenate([rng.normal(mean, scale, size=n) for n, mean in segments])


STREAMS = {
    "bernoulli-stationary": lambda rng: bernoulli(rng, [(6000, 0.2)]),
    "bernoulli-rises": lambda rng: bernoulli(rng, [(2500, 0.1), (2500, 0.6), (2500, 0.3)]),
    "bernoulli-falls": lambda rng: bernoulli(rng, [(3000, 0.7), (3000, 0.2)]),
    "gaussian-stationary": lambda rng: gaussian(rng, [(6000, 0.0)], scale=3.0),
    "gaussian-shifts": lambda rng: gaussian(rng, [(2000, 0.0), (2000, 2.0), (2000, -1.0)], scale=1.5),
    "uniform-far-from-zero": lambda rng: np.concatenate([1e6 + rng.random(3000), 1e6 + 0.5 + rng.random(3000)]),
    "bernoulli-rise-and-back": lambda rng: bernoulli(rng, [(3000, 0.1), (3000, 0.5), (3000, 0.1)]),
    "bernoulli-rise-then-rise": lambda rng: bernoulli(rng, [(3000, 0.1), (200, 0.4), (3000, 0.8)]),
    "bernoulli-ramp": lambda rng: (
        rng.random(7000) < np.concatenate([np.full(3000, 0.1), np.linspace(0.1, 0.5, 1000), np.full(3000, 0.5)])
    ).astype(np.float64),
}


def scalars(detector: Adwin) -> tuple[float, ...]:
    return (
        detector.width,
        detector.total,
        detector.variance,
        detector.time,
        detector.n_detections,
        detector.change,
        detector.detected_at,
    )


def kernel_scalars(s: np.ndarray) -> tuple[float, ...]:
    return (s[A_WIDTH], s[A_TOTAL], s[A_VARIANCE], s[A_TIME], s[A_DETECTIONS], s[A_CHANGE], s[A_DETECTED_AT])


def assert_same_state(kernel: tuple[np.ndarray, np.ndarray, np.ndarray], detector: Adwin) -> None:
    """The kernel's arrays describe exactly the detector (keys, values and value types)."""
    ours, theirs = adwin_to_state(*kernel), detector.to_state()
    assert ours.keys() == theirs.keys()
    for key, value in theirs.items():
        if isinstance(value, np.ndarray):
            assert ours[key].dtype == value.dtype, key
            np.testing.assert_array_equal(ours[key], value, err_msg=key)
        else:
            assert type(ours[key]) is type(value), key
            assert ours[key] == value, key


def run_both(
    values: np.ndarray,
    detector: Adwin,
    kernel: tuple[np.ndarray, np.ndarray, np.ndarray],
    replaced: list[int] | None = None,
) -> list[int]:
    """Feed both; check every step; return the steps that fired (and append to ``replaced`` the
    steps whose cut only re-placed the last detected change: the window shrank, no alarm)."""
    b, n, s = kernel
    fired = []
    for i, value in enumerate(values.tolist()):
        width = detector.width
        expected = detector.update(value)
        got = adwin_update(b, n, s, value)
        assert got is expected, i
        assert kernel_scalars(s) == scalars(detector), i
        if expected:
            fired.append(i)
        elif detector.width <= width and replaced is not None:
            replaced.append(i)
        if i % 251 == 0:
            assert_same_state(kernel, detector)
    assert_same_state(kernel, detector)
    return fired


def test_constants_agree_with_the_oracle() -> None:
    assert MIN_PART == drift._MIN_PART


def test_new_adwin_is_the_trees_layout_and_an_empty_detector() -> None:
    b, n, s = new_adwin(0.01)
    assert b.shape == (ADWIN_ROWS, 6, 2) and b.dtype == np.float64 and b.flags.c_contiguous
    assert n.shape == (ADWIN_ROWS,) and n.dtype == np.int64
    assert s.shape == (ADWIN_SCALARS,) and s.dtype == np.float64
    assert (s[A_DELTA], s[A_CLOCK], s[A_MAX_BUCKETS], s[A_N_ROWS]) == (0.01, 32, 5, 1)
    assert_same_state((b, n, s), Adwin(0.01))
    assert new_adwin(0.01, max_buckets=9)[0].shape == (ADWIN_ROWS, 10, 2)


@pytest.mark.parametrize("stream", sorted(STREAMS))
@pytest.mark.parametrize("delta", [0.002, 0.05, 0.5])
def test_matches_the_oracle_step_by_step(stream: str, delta: float) -> None:
    rng = np.random.default_rng([sorted(STREAMS).index(stream), int(delta * 1000)])
    values = STREAMS[stream](rng)
    fired = run_both(values, Adwin(delta), new_adwin(delta))
    if stream.endswith("stationary") and delta == 0.002:
        assert fired == []
    if stream in ("bernoulli-rises", "gaussian-shifts", "bernoulli-rise-and-back", "bernoulli-rise-then-rise"):
        assert fired, "a change this large is detected"


@pytest.mark.parametrize(("clock", "max_buckets"), [(1, 5), (7, 2), (32, 1), (5, 9)])
def test_matches_the_oracle_with_other_clocks_and_bucket_counts(clock: int, max_buckets: int) -> None:
    rng = np.random.default_rng(clock * 100 + max_buckets)
    values = np.concatenate([bernoulli(rng, [(1500, 0.2), (1500, 0.7)]), gaussian(rng, [(1000, 3.0)])])
    run_both(values, Adwin(0.01, clock, max_buckets), new_adwin(0.01, clock, max_buckets))


ONE_CHANGE = {
    "0.05-to-0.95": [(4000, 0.05), (4000, 0.95)],
    "0.1-to-0.5": [(3000, 0.1), (3000, 0.5)],
    "0.4-to-0.1": [(3000, 0.4), (3000, 0.1)],
}


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("stream", sorted(ONE_CHANGE))
def test_one_change_fires_once_in_both(stream: str, seed: int) -> None:
    """ADWIN2 cutting a bucket at a time fired two to six times on each of these; now once."""
    segments = ONE_CHANGE[stream]
    fired = run_both(bernoulli(np.random.default_rng([11, seed]), segments), Adwin(0.002), new_adwin(0.002))
    change = segments[0][0]
    assert len(fired) == 1 and change < fired[0] < change + 300


@pytest.mark.parametrize("seed", [58, 71])
def test_a_cut_that_re_places_the_last_change_is_the_same_in_both_and_not_an_alarm(seed: int) -> None:
    """On these streams the first cut (a few dozen values after the change) lands early, and
    a later check cuts the old values left: the window shrinks in both, and neither fires."""
    values = bernoulli(np.random.default_rng(seed), [(3000, 0.1), (3000, 0.5)])
    replaced: list[int] = []
    detector, kernel = Adwin(0.002), new_adwin(0.002)
    fired = run_both(values, detector, kernel, replaced)
    assert len(fired) == 1 and replaced and all(fired[0] < i < fired[0] + 500 for i in replaced)
    assert kernel[2][A_DETECTED_AT] == detector.detected_at == fired[0] + 1  # time counts from 1
    assert detector.mean == pytest.approx(0.5, abs=0.05)  # the old values are gone


@given(
    st.lists(st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False), min_size=1, max_size=400),
    st.sampled_from([0.002, 0.1, 0.9]),
    st.sampled_from([1, 4, 32]),
)
def test_matches_the_oracle_on_arbitrary_values(values: list[float], delta: float, clock: int) -> None:
    run_both(np.array(values), Adwin(delta, clock), new_adwin(delta, clock))


@pytest.mark.parametrize("split", [0, 1, 37, 2999, 4100])
def test_state_round_trips_through_both_converters(split: int) -> None:
    """A detector saved by the oracle continues in the kernel and vice versa, exactly."""
    rng = np.random.default_rng(split)
    values = np.concatenate([bernoulli(rng, [(3000, 0.2), (1500, 0.6)]), gaussian(rng, [(1000, 0.4)])])
    head, tail = values[:split], values[split:]

    oracle = Adwin(0.01)
    for value in head.tolist():
        oracle.update(value)
    saved = oracle.to_state()
    kernel = adwin_from_state(saved)
    assert_same_state(kernel, oracle)
    # the converters invert each other, keys, values and types
    again = adwin_to_state(*kernel)
    assert_same_state(adwin_from_state(again), Adwin.from_state(again))
    run_both(tail, Adwin.from_state(saved), kernel)

    b, n, s = new_adwin(0.01)
    for value in head.tolist():
        adwin_update(b, n, s, value)
    restored = Adwin.from_state(adwin_to_state(b, n, s))
    assert_same_state((b, n, s), restored)
    run_both(tail, restored, (b, n, s))


def test_a_state_saved_before_detected_at_existed_loads_with_none_on_record() -> None:
    """Version-2 files hold the detector's ``to_state()`` without ``detected_at``: both readers
    give 0 (no detection on record), and the two go on identically."""
    rng = np.random.default_rng(3)
    values = bernoulli(rng, [(3000, 0.1), (3000, 0.5), (3000, 0.1)])
    oracle = Adwin(0.002)
    for value in values[:3500].tolist():
        oracle.update(value)
    assert oracle.n_detections == 1 and oracle.detected_at > 0
    old = {key: value for key, value in oracle.to_state().items() if key != "detected_at"}
    kernel, restored = adwin_from_state(old), Adwin.from_state(old)
    assert kernel[2][A_DETECTED_AT] == restored.detected_at == 0
    assert restored.n_detections == 1 and restored.width == oracle.width
    assert len(run_both(values[3500:], restored, kernel)) == 1  # the change back at 6,000


def test_round_trip_of_a_state_with_arrays_of_any_integer_or_float_kind() -> None:
    """Saved states come back from a file as numpy scalars and arrays."""
    oracle = Adwin(0.05)
    for value in bernoulli(np.random.default_rng(5), [(700, 0.3)]).tolist():
        oracle.update(value)
    state = {key: np.asarray(value) for key, value in oracle.to_state().items()}
    assert_same_state(adwin_from_state(state), oracle)


def test_malformed_states_are_refused() -> None:
    state = Adwin(0.05).to_state()
    with pytest.raises(ValueError):
        adwin_from_state({**state, "row_sizes": np.array([1], dtype=np.int64)})  # no bucket for it
    with pytest.raises(ValueError):
        adwin_from_state(
            {**state, "row_sizes": np.array([7], dtype=np.int64), "totals": np.zeros(7), "variances": np.zeros(7)}
        )
    with pytest.raises(ValueError):
        adwin_from_state({**state, "row_sizes": np.zeros(ADWIN_ROWS + 1, dtype=np.int64)})
    with pytest.raises(ValueError):
        new_adwin(0.01, max_buckets=0)


def test_the_kernel_refuses_buckets_it_has_no_room_for() -> None:
    b, n, s = new_adwin(0.01)
    s[A_MAX_BUCKETS] = 6  # needs 7 buckets a row; the layout has 6
    with pytest.raises(ValueError):
        adwin_update(b, n, s, 1.0)


def test_the_kernel_documents_its_formula() -> None:
    assert ".. math::" in (adwin_update.__doc__ or "")
