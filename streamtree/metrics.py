"""Evaluation of probabilities by the decisions they lead to: the improved squared error.

Squared error against the observed label, :math:`\\sum_y (T(y \\mid x) - p(y \\mid x))^2`,
takes the true probability of the observed label to be 1, which is wrong on any noisy
stream. Fan et al. (2005) score instead how far the probability of the true label :math:`t`
is from the *decision threshold* :math:`v(t)`, the least probability at which the decision
that is right for :math:`t` is made (their Definition 1 and Eq. 3):

.. math::

    \\mathrm{ISE} = \\left(1 - \\min\\left(1, \\frac{p(t \\mid x)}{v(t)}\\right)\\right)^2 .

A prediction that leads to the right decision scores 0 whatever its probability; a wrong one
scores more the further its probability is from the threshold, up to 1 for
:math:`p(t \\mid x) = 0`. The threshold comes from a cost matrix (:mod:`streamtree.decision`)
and, in general, from the example too.

The decision that is right for :math:`t` is the one of least cost when :math:`t` is certain,
:math:`\\arg\\min_d C(d, t)` (several, on a tie; reaching any of them counts). Two labels:
:math:`v(t)` is exactly the paper's threshold (0.5 under 0-1 loss; 0.09 for the fraud
example of its Section 3). More labels: the paper gives no threshold for a cost matrix, so
:math:`v(t)` is taken along the line from the prediction to certainty of :math:`t`, the other
labels keeping their relative probabilities; see :func:`improved_squared_errors`.

References
----------
W. Fan, E. Greengrass, J. McCloskey, P. S. Yu and K. Drummey. Effective estimation of
posterior probabilities: explaining the accuracy of randomized decision tree approaches.
ICDM 2005.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from streamtree.decision import CostMatrix, Costs, expected_costs, probabilities
from streamtree.exceptions import DecisionError
from streamtree.typing import FloatArray

__all__ = ["decision_threshold", "decision_thresholds", "improved_squared_error", "improved_squared_errors"]

BoolArray = npt.NDArray[np.bool_]


def decision_thresholds(
    proba: Any,
    y: Sequence[Hashable],
    costs: Costs | CostMatrix,
    *,
    classes: Sequence[Hashable] | None = None,
    check_input: bool = True,
    where: str = "decision_thresholds",
) -> tuple[FloatArray, FloatArray, BoolArray]:
    """Each row's decision threshold of its true label, with what the improved squared error needs.

    Parameters are those of :func:`improved_squared_errors` (``where`` names the function in
    error messages).

    Returns
    -------
    tuple of arrays
        ``(v, p_true, right)`` per row: the threshold :math:`v(t)`, the probability of the
        true label, and whether the decision of least expected cost at the prediction is
        right for the true label (ties count as right).
    """
    matrix = CostMatrix.of(costs, where)
    labels, p = probabilities(proba, classes, where, check_input)
    y = list(y)
    if len(y) != len(p):
        raise DecisionError(
            f"The 'y' parameter of {where} must hold one true label per row of 'proba' "
            f"({len(p)}). Got {len(y)} instead.",
            "y",
        )
    known = set(labels)
    extra = [label for label in dict.fromkeys(y) if label not in known]  # true labels without a probability: 0
    present = labels + extra
    order, columns = matrix.select(present, where)
    n = len(p)
    p = np.hstack([p, np.zeros((n, len(extra)))])[:, order]
    cost = matrix.table[:, columns]  # (m, k): decisions by the labels, in the matrix's label order
    position = {present[i]: j for j, i in enumerate(order.tolist())}
    t = np.array([position[label] for label in y], dtype=np.int64)
    own = order < len(labels)  # the columns that are labels of the probabilities (not only some row's truth)
    rows = np.arange(n)
    p_true = p[rows, t]
    expected = expected_costs(p, cost)  # (n, m)
    cost_true = cost[:, t].T  # (n, m): each decision's cost when the true label is certain
    best = cost_true == cost_true.min(axis=1, keepdims=True)  # the decisions right for t
    right = np.where(best, expected, np.inf).min(axis=1) <= expected.min(axis=1)
    # The rest of the prediction: the other labels' probabilities, renormalised, summed in
    # column order (per-row exact, whatever the batch).
    rest = p.copy()
    rest[rows, t] = 0.0
    total = np.zeros(n)
    for j in range(rest.shape[1]):
        total += rest[:, j]
    certain = total == 0.0
    if certain.any():  # p(t) = 1: no direction to move in; take the other labels as equally likely
        fill = own[None, :] & (np.arange(rest.shape[1])[None, :] != t[certain, None])
        rest[certain] = fill
        total[certain] = fill.sum(axis=1)
    rest = rest / np.where(total > 0.0, total, 1.0)[:, None]  # no other label: the rest stays 0, and v = 0
    expected_rest = expected_costs(rest, cost)
    v = np.full(n, np.inf)
    for d in range(cost.shape[0]):
        sel = np.flatnonzero(best[:, d])
        if not sel.size:
            continue
        a = cost_true[sel] - cost_true[sel, d, None]  # >= 0: what each other decision costs more when t is true
        b = expected_rest[sel, d, None] - expected_rest[sel]  # what d costs more under the rest
        with np.errstate(divide="ignore", invalid="ignore"):  # b <= 0 is masked; b > 0 has a + b > 0
            need = np.where(b > 0.0, b / (a + b), 0.0)
        v[sel] = np.minimum(v[sel], need.max(axis=1))
    return v, p_true, right


def improved_squared_errors(
    proba: Any,
    y: Sequence[Hashable],
    costs: Costs | CostMatrix,
    *,
    classes: Sequence[Hashable] | None = None,
    check_input: bool = True,
) -> FloatArray:
    """The improved squared error (Fan et al. 2005, Eq. 3) of each prediction of a batch.

    Parameters
    ----------
    proba
        ``(n, k)`` probabilities whose columns follow ``classes``, or a sequence of mappings
        of label to probability (``classes`` None), as :func:`~streamtree.decision.decide_many`.
    y
        The ``n`` true labels; one the probabilities lack has probability 0.
    costs
        Decision to ``{true label: cost}`` (or a :class:`~streamtree.decision.CostMatrix`);
        every decision needs a cost for every label of ``proba`` and every true label.
    classes
        The labels of ``proba``'s columns, for an array.
    check_input
        Check that the probabilities are finite, >= 0 and sum to 1 per row.

    Returns
    -------
    numpy.ndarray
        ``(n,)`` errors in [0, 1]; their mean is the paper's improved MSE.

    Raises
    ------
    DecisionError
        As :func:`~streamtree.decision.decide_many`, and for a true label that a decision has
        no cost for.

    Notes
    -----
    With :math:`C(d, y)` the cost of decision :math:`d` when the true label is :math:`y`,
    :math:`t` the true label and :math:`D_t = \\arg\\min_d C(d, t)` the decisions right for it,
    write the prediction as :math:`p = p_t e_t + (1 - p_t) r`, where :math:`r` holds the
    other labels' probabilities renormalised (uniform over the other labels when
    :math:`p_t = 1`), and move along :math:`q(s) = s e_t + (1 - s) r`, :math:`s \\in [0, 1]`.
    With :math:`R(d) = \\sum_y r_y C(d, y)`, decision :math:`d \\in D_t` is at least as cheap
    as :math:`e` at :math:`q(s)` iff :math:`s \\ge b/(a + b)` where :math:`a = C(e, t) - C(d, t)
    \\ge 0` and :math:`b = R(d) - R(e)` (always, if :math:`b \\le 0`). So the threshold is

    .. math::

        v(t) = \\min_{d \\in D_t} \\max\\Big(0, \\max_{e : b > 0} \\frac{b}{a + b}\\Big),

    the least :math:`p(t)` on that line at which a right decision has least expected cost;
    the right decision is made at the prediction iff :math:`p_t \\ge v(t)`, and then the error
    is 0 (set exactly where the least expected cost is a right decision's, ties included).
    :math:`v(t) = 0` (a right decision whatever :math:`p_t`) gives 0.

    With two labels, :math:`r` is the other label and :math:`v(t) = b / (a + b)` does not
    depend on the prediction: Eq. 3 exactly. With more labels it does (the paper notes that
    thresholds depend on the example); under 0-1 loss it is
    :math:`v(t) = m / (1 + m - p_t)` with :math:`m` the largest other probability. The paper's
    multi-class "top 1" rows use :math:`v(t) = m` instead (the other probabilities held
    where they are, not renormalised); that variant is not this function.

    Examples
    --------
    The fraud example of the paper's Section 3: a fraud is worth challenging from a
    probability of 90 / 1000 = 0.09. A fraud given 0.05 is 0.05 / 0.09 of the way there;
    a fraud given 0.2 is challenged (right decision: 0).

    >>> import numpy as np
    >>> from streamtree.metrics import improved_squared_errors
    >>> costs = {"approve": {"fraud": 1000, "ok": 0}, "challenge": {"fraud": 90, "ok": 90}}
    >>> proba = np.array([[0.05, 0.95], [0.2, 0.8]])
    >>> errors = improved_squared_errors(proba, ["fraud", "fraud"], costs, classes=["fraud", "ok"])
    >>> np.allclose(errors, [(1 - 0.05 / 0.09) ** 2, 0.0])
    True
    """
    return _errors(proba, y, costs, classes, check_input, "improved_squared_errors")


def _errors(
    proba: Any,
    y: Sequence[Hashable],
    costs: Costs | CostMatrix,
    classes: Sequence[Hashable] | None,
    check_input: bool,
    where: str,
) -> FloatArray:
    v, p_true, right = decision_thresholds(proba, y, costs, classes=classes, check_input=check_input, where=where)
    with np.errstate(divide="ignore", invalid="ignore"):  # v = 0 is masked: a right decision whatever p_t
        ratio = np.where(right | (v <= 0.0), 1.0, np.minimum(1.0, p_true / v))
    errors: FloatArray = (1.0 - ratio) ** 2
    return errors


def decision_threshold(proba: Mapping[Any, float], y: Hashable, costs: Costs | CostMatrix) -> float:
    """The decision threshold :math:`v(y)` of one prediction (Fan et al. 2005, Definition 1):
    the least probability of ``y`` at which the decision right for ``y`` has least expected
    cost (see :func:`improved_squared_errors`).

    Examples
    --------
    >>> from streamtree.metrics import decision_threshold
    >>> costs = {"approve": {"fraud": 1000, "ok": 0}, "challenge": {"fraud": 90, "ok": 90}}
    >>> round(decision_threshold({"fraud": 0.3, "ok": 0.7}, "fraud", costs), 12)
    0.09
    >>> round(decision_threshold({"fraud": 0.3, "ok": 0.7}, "ok", costs), 12)
    0.91
    """
    v, _, _ = decision_thresholds([_mapping(proba, "decision_threshold")], [y], costs, where="decision_threshold")
    return float(v[0])


def improved_squared_error(proba: Mapping[Any, float], y: Hashable, costs: Costs | CostMatrix) -> float:
    """The improved squared error of one prediction ``proba`` (label to probability) whose
    true label is ``y``; see :func:`improved_squared_errors`.

    Examples
    --------
    Two models miss the same positive under 0-1 loss (threshold 0.5); the one closer to
    deciding right scores less (the paper's example after Eq. 3):

    >>> from streamtree.metrics import improved_squared_error
    >>> zero_one = {"+": {"+": 0, "-": 1}, "-": {"+": 1, "-": 0}}
    >>> round(improved_squared_error({"+": 0.4, "-": 0.6}, "+", zero_one), 12)
    0.04
    >>> round(improved_squared_error({"+": 0.1, "-": 0.9}, "+", zero_one), 12)
    0.64
    >>> improved_squared_error({"+": 0.6, "-": 0.4}, "+", zero_one)
    0.0
    """
    where = "improved_squared_error"
    return float(_errors([_mapping(proba, where)], [y], costs, None, True, where)[0])


def _mapping(proba: Any, where: str) -> Mapping[Any, float]:
    if not isinstance(proba, Mapping):
        raise DecisionError(
            f"The 'proba' parameter of {where} must be a mapping of label to probability. Got "
            f"{type(proba).__name__} instead.",
            "proba",
        )
    return proba
