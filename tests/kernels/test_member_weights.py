"""The forest's member weights (``weigh_rows``, ``member_weights``): each member's loss is its
log loss relative to the weighted mean of the members that learned the row, capped."""

from __future__ import annotations

import math

import numpy as np
import pytest

from streamtree.forest import WEIGHT_DECAY, WEIGHT_ETA, WEIGHT_FLOOR
from streamtree.kernels.forest import member_weights, weigh_rows


def weigh(loss: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """The losses after ``scores`` (members x rows), learning without predicting."""
    loss = loss.copy()
    weigh_rows(loss, WEIGHT_ETA, WEIGHT_DECAY, WEIGHT_FLOOR, scores, np.empty((0, 0, 0)), np.empty((0, 0)), False)
    return loss


def test_a_members_loss_is_its_log_loss_relative_to_the_learners_mean() -> None:
    p = [0.9, 0.6, 0.3]
    loss = weigh(np.zeros(3), np.array([[x] for x in p]))
    q = (0.9 + 0.6 + 0.3) / 3  # equal losses: equal weights
    assert loss.tolist() == [(1.0 - WEIGHT_DECAY) * -math.log(x / q) for x in p]
    assert loss[0] < 0.0 < loss[2]  # better than the forest: a negative loss


def test_a_confident_mistake_costs_at_most_the_cap() -> None:
    loss = weigh(np.zeros(3), np.array([[0.9], [0.9], [1e-9]]))
    assert loss[2] == (1.0 - WEIGHT_DECAY) * -math.log(WEIGHT_FLOOR)  # ln 20 above the forest
    # against the members that were right: ln 20 + ln(0.9 / q), 3.4 nats, where their plain log
    # losses differ by ln(0.9 / 1e-9), 20.6
    q = (0.9 + 0.9 + 1e-9) / 3
    gap = (loss[2] - loss[0]) / (1.0 - WEIGHT_DECAY)
    assert gap == pytest.approx(-math.log(WEIGHT_FLOOR) + math.log(0.9 / q), rel=1e-9)
    assert 3.3 < gap < 3.5


def test_a_member_that_did_not_learn_the_row_keeps_its_loss_and_is_not_in_the_mean() -> None:
    before = np.array([0.01, 0.0, 0.0])
    loss = weigh(before, np.array([[np.nan], [0.8], [0.4]]))
    weights = np.empty(3)
    member_weights(before, WEIGHT_ETA, weights)
    q = (weights[1] * 0.8 + weights[2] * 0.4) / (weights[1] + weights[2])
    assert loss[0] == 0.01
    assert loss[1] == (1.0 - WEIGHT_DECAY) * -math.log(0.8 / q)
    assert loss[2] == (1.0 - WEIGHT_DECAY) * -math.log(0.4 / q)


def test_a_row_no_member_learned_changes_nothing() -> None:
    before = np.array([0.2, 0.1])
    assert weigh(before, np.array([[np.nan], [np.nan]])).tolist() == [0.2, 0.1]


def test_the_better_member_weighs_more_and_equal_losses_weigh_alike() -> None:
    loss = weigh(np.zeros(2), np.array([[0.9] * 50, [0.5] * 50]))
    weights = np.empty(2)
    total = member_weights(loss, WEIGHT_ETA, weights)
    assert weights[0] == 1.0 and 0.0 < weights[1] < 1.0 and total == weights[0] + weights[1]
    member_weights(np.full(2, 0.3), WEIGHT_ETA, weights)
    assert weights.tolist() == [1.0, 1.0]
