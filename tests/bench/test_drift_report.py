"""The drift benchmark's definitions: per-example alignment, windowed loss, recovery time."""

from __future__ import annotations

import numpy as np
import pytest

from bench.drift_report import PRE_WINDOW, WINDOW, recoveries, windowed
from bench.prequential import NO_ADAPTATION, model_factories
from bench.scoring import Score
from bench.streams import STREAMS


def test_per_example_losses_put_each_loss_at_its_example_and_nan_where_unscored() -> None:
    score = Score()
    for y in ["a", "a", "b", "a", "b"]:
        score.update(y, {"a": 0.8, "b": 0.2})
    losses = score.per_example_losses()
    assert np.isnan(losses[[0, 2]]).all()
    np.testing.assert_allclose(losses[[1, 3, 4]], score.losses)
    assert score.result()["scored"] == 3


def test_windowed_is_the_trailing_mean_skipping_unscored_examples() -> None:
    losses = np.arange(1.0, 1201.0)
    losses[600] = np.nan
    curve = windowed(losses)
    assert np.isnan(curve[: WINDOW - 1]).all()
    assert curve[WINDOW - 1] == pytest.approx(np.mean(losses[:WINDOW]))
    assert curve[800] == pytest.approx(np.nanmean(losses[301:801]))


def _step(n: int, p: int, recover_at: int) -> np.ndarray:
    losses = np.full(n, 0.2)
    losses[p:recover_at] = 1.0
    return losses


def test_recovery_counts_examples_after_the_drift_until_the_window_is_back_within_10_percent() -> None:
    p, recover_at = 5_000, 5_800
    rec = recoveries(_step(10_000, p, recover_at), [(p, 100, "abrupt")])[0]
    assert rec["pre_level"] == pytest.approx(0.2)
    # the window of 500 holds k examples at 1.0: back within 10% once 500 * 0.2 + 0.8 k <= 110
    k = int(np.floor((1.1 * 0.2 * WINDOW - 0.2 * WINDOW) / 0.8))
    t = recover_at - 1 + WINDOW - k
    assert rec["recovery"] == t + 1 - p
    assert rec["peak"] == pytest.approx(1.0)


def test_recovery_is_never_shorter_than_a_window_and_none_when_it_misses_the_next_drift() -> None:
    flat = np.full(20_000, 0.3)
    assert recoveries(flat, [(5_000, 100, "abrupt")])[0]["recovery"] == WINDOW
    two = recoveries(_step(20_000, 5_000, 9_000), [(5_000, 100, "abrupt"), (8_000, 100, "abrupt")])
    assert two[0]["recovery"] is None and two[0]["deadline"] == 8_000 - 50
    # a gradual drift's pre-drift window ends where its change starts, p - w/2
    gradual = np.full(20_000, 0.1)
    gradual[10_000 - 2_000 - PRE_WINDOW : 10_000 - 2_000] = 0.5
    assert recoveries(gradual, [(10_000, 4_000, "gradual")])[0]["pre_level"] == pytest.approx(0.5)
    assert recoveries(flat[:3_000], [(5_000, 100, "abrupt")]) == []


def test_every_known_drift_has_a_width_and_a_kind() -> None:
    for stream in STREAMS.values():
        assert len(stream.drifts) == len(stream.widths)
        assert all(kind in ("abrupt", "fast gradual", "gradual") for _, _, kind in stream.known_drifts())
    assert [k for _, _, k in STREAMS["Sine-abrupt"].known_drifts()] == ["abrupt"] * 3


def test_the_static_model_switches_off_what_adaptation_the_tree_has() -> None:
    model = model_factories({"grace_period": 50})["streamtree-hgs-static"]()
    params = model._get_params()
    assert params["grace_period"] == 50 and params["smoothing"] == "hgs"
    assert all(params[k] is None for k in NO_ADAPTATION if k in params)
    assert params["half_life"] is None
