"""Cost-sensitive decisions from class probabilities.

A *cost matrix* gives, for each decision :math:`d` and each true label :math:`y`, the cost
:math:`C(d, y)` of deciding :math:`d` when the label turns out to be :math:`y`. Given the
predicted probabilities :math:`p(y \\mid x)`, the decision of least expected cost is

.. math::

    d^*(x) = \\arg\\min_d \\sum_y p(y \\mid x) \\, C(d, y),

the optimal decision of Fan et al. (2005), Section 3, when the probabilities are right.
Decisions are any names (``"approve"``, ``"challenge"``), not necessarily labels; 0-1 loss is
the special case ``{y: {y2: 0 if y2 == y else 1 for y2 in labels} for y in labels}``.

:func:`decide` decides one prediction (a mapping of label to probability), :func:`decide_many`
a batch (a 2-D array whose columns follow ``classes``, or a list of mappings) with one
vectorised pass: the expected costs are the probability matrix times the transposed cost
matrix. Both give the same numbers, bit for bit, for the same row: each row's expected costs
are summed label by label in the cost matrix's label order, whatever the batch.

The improved squared error that measures how far probabilities are from the right decision
under a cost matrix is in :mod:`streamtree.metrics`.

References
----------
W. Fan, E. Greengrass, J. McCloskey, P. S. Yu and K. Drummey. Effective estimation of
posterior probabilities: explaining the accuracy of randomized decision tree approaches.
ICDM 2005.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Hashable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any, TypeAlias

import numpy as np

from streamtree.exceptions import DecisionError
from streamtree.typing import FloatArray, IntArray

__all__ = ["MAX_COST", "CostMatrix", "Costs", "Decision", "Decisions", "decide", "decide_many", "expected_costs"]

#: Largest cost magnitude: sums and differences of costs then stay finite floats.
MAX_COST = 1e300
#: How far from 1 a row of probabilities may sum (rounding of probabilities computed elsewhere).
SUM_TOLERANCE = 1e-6

#: A cost matrix as data: decision to ``{true label: cost}``.
Costs: TypeAlias = Mapping[Any, Mapping[Any, float]]


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _cost_value(v: Any) -> float | None:
    """``v`` as a float if it is a real number (not a bool) of magnitude at most MAX_COST."""
    if not isinstance(v, numbers.Real) or isinstance(v, (bool, np.bool_)):
        return None
    try:
        x = float(v)
    except OverflowError:  # an int beyond any float
        return None
    return x if math.isfinite(x) and abs(x) <= MAX_COST else None


@dataclass(frozen=True, eq=False)
class CostMatrix:
    """A validated cost matrix: one row per decision, one column per label.

    Build it with :meth:`of`; every function of this module and of :mod:`streamtree.metrics`
    takes either a mapping or a ``CostMatrix`` (validate once, use many times).

    Attributes
    ----------
    decisions
        The decisions, in the mapping's order (the order ties are broken in).
    labels
        Every label some decision has a cost for, in order of first mention.
    table
        ``(len(decisions), len(labels))`` costs, read-only; NaN where a decision has no cost
        for a label (fine as long as that label has no probability to weigh).
    """

    decisions: tuple[Hashable, ...]
    labels: tuple[Hashable, ...]
    table: FloatArray
    column: Mapping[Hashable, int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        # built directly (not by :meth:`of`): the same checks, on a copy of the caller's table
        decisions, labels = tuple(self.decisions), tuple(self.labels)
        try:
            table = np.array(self.table, dtype=np.float64, copy=True)
        except (TypeError, ValueError):
            raise DecisionError(f"The 'costs' table must hold numbers. Got {_shown(self.table)}.", "costs") from None
        if not decisions or not labels or table.shape != (len(decisions), len(labels)):
            raise DecisionError(f"The 'costs' table must be (decisions, labels). Got shape {table.shape}.", "costs")
        given = np.abs(table[~np.isnan(table)])  # NaN: no cost for that label
        if len({*decisions}) < len(decisions) or len({*labels}) < len(labels) or given.max(initial=0) > MAX_COST:
            raise DecisionError(f"Costs name each decision and label once, each finite, at most {MAX_COST:g}.", "costs")
        table.flags.writeable = False
        object.__setattr__(self, "decisions", decisions)
        object.__setattr__(self, "labels", labels)
        object.__setattr__(self, "table", table)
        object.__setattr__(self, "column", {label: j for j, label in enumerate(labels)})

    @classmethod
    def of(cls, costs: Costs | CostMatrix, where: str = "decide") -> CostMatrix:
        """Validate ``costs``: a non-empty mapping of decision to a non-empty mapping of label
        to a finite cost (a real number, negative for a gain, of magnitude at most
        :data:`MAX_COST`). ``where`` names the function in the messages.

        Raises
        ------
        DecisionError
            Naming ``costs``, and the decision and label of the first bad cost.

        Examples
        --------
        >>> CostMatrix.of({"approve": {"fraud": 1000, "ok": 0}, "challenge": {"fraud": 90}}).table
        array([[1000.,    0.],
               [  90.,   nan]])
        >>> CostMatrix.of({"approve": {"fraud": float("inf")}})
        Traceback (most recent call last):
        ...
        streamtree.exceptions.DecisionError: The cost of decision 'approve' for label 'fraud' in the 'costs' parameter of decide must be a finite number of magnitude at most 1e+300. Got inf instead.
        """
        if isinstance(costs, CostMatrix):
            return costs
        if not isinstance(costs, Mapping) or not costs:
            raise DecisionError(
                f"The 'costs' parameter of {where} must be a non-empty mapping of decision to "
                f"{{label: cost}}. Got {_shown(costs)} instead.",
                "costs",
            )
        labels: dict[Hashable, int] = {}
        rows: list[dict[int, float]] = []
        for decision, row in costs.items():
            if not isinstance(row, Mapping) or not row:
                raise DecisionError(
                    f"The costs of decision {_shown(decision)} in the 'costs' parameter of {where} "
                    f"must be a non-empty mapping of label to cost. Got {_shown(row)} instead.",
                    "costs",
                    decision=decision,
                )
            values: dict[int, float] = {}
            for label, v in row.items():
                x = _cost_value(v)
                if x is None:
                    raise DecisionError(
                        f"The cost of decision {_shown(decision)} for label {_shown(label)} in the "
                        f"'costs' parameter of {where} must be a finite number of magnitude at most "
                        f"{MAX_COST:g}. Got {_shown(v)} instead.",
                        "costs",
                        decision,
                        label,
                    )
                values[labels.setdefault(label, len(labels))] = x
            rows.append(values)
        table = np.full((len(rows), len(labels)), np.nan)
        for i, values in enumerate(rows):
            table[i, list(values)] = list(values.values())
        return cls(tuple(costs), tuple(labels), table)

    def covers(self, label: Hashable) -> bool:
        """Whether every decision has a cost for ``label``."""
        j = self.column.get(label)
        return j is not None and not bool(np.isnan(self.table[:, j]).any())

    def to_dict(self) -> dict[Hashable, dict[Hashable, float]]:
        """The costs as a mapping again (the decisions' and labels' orders kept)."""
        return {
            d: {label: float(c) for label, c in zip(self.labels, row) if not math.isnan(c)}
            for d, row in zip(self.decisions, self.table.tolist())
        }

    def select(self, labels: Sequence[Hashable], where: str = "decide") -> tuple[IntArray, IntArray]:
        """Where each of ``labels`` (the columns of some probabilities) is in this matrix.

        Returns ``(order, columns)``: ``labels[order[i]]`` is the matrix's column
        ``columns[i]``, in the matrix's label order.

        Raises
        ------
        DecisionError
            A label some decision has no cost for, naming the label and the decision.
        """
        pairs = []
        for i, label in enumerate(labels):
            j = self.column.get(label)
            missing = np.ones(len(self.decisions), dtype=bool) if j is None else np.isnan(self.table[:, j])
            if missing.any():
                decision = self.decisions[int(np.argmax(missing))]
                raise DecisionError(
                    f"Label {_shown(label)} of the probabilities has no cost under decision "
                    f"{_shown(decision)}: the 'costs' parameter of {where} must give every decision "
                    f"a cost for every label the probabilities have.",
                    "costs",
                    decision,
                    label,
                )
            pairs.append((j, i))
        pairs.sort()
        return (np.array([i for _, i in pairs], dtype=np.int64), np.array([j for j, _ in pairs], dtype=np.int64))


def expected_costs(proba: FloatArray, cost: FloatArray) -> FloatArray:
    """``(n, m)`` expected cost of each of ``m`` decisions for each of ``n`` rows.

    Parameters
    ----------
    proba
        ``(n, k)`` probabilities.
    cost
        ``(m, k)`` costs, columns as ``proba``'s.

    Notes
    -----
    :math:`E_{id} = \\sum_j p_{ij} C_{dj}`, i.e. ``proba @ cost.T``, but summed column by
    column, left to right: a row's result then depends only on that row (a matrix product
    may round a row differently with the size of the batch).
    """
    out = np.zeros((proba.shape[0], cost.shape[0]))
    for j in range(proba.shape[1]):
        out += proba[:, j, None] * cost[None, :, j]
    return out


def probabilities(
    proba: Any, classes: Sequence[Hashable] | None, where: str, check_input: bool = True
) -> tuple[list[Hashable], FloatArray]:
    """``(labels, matrix)`` of a batch of predictions: a 2-D array whose columns follow
    ``classes``, or (``classes`` None) a sequence of mappings of label to probability,
    whose columns are then every label in order of first appearance (absent ones 0).

    A non-empty batch needs at least one label. With ``check_input`` every probability must
    be a finite number >= 0 and every row must sum to 1 (within ``1e-6``).
    """
    if classes is None:
        if isinstance(proba, Mapping) or not isinstance(proba, Sequence) or isinstance(proba, str):
            raise DecisionError(
                f"The 'proba' parameter of {where} must be a 2-D array (with 'classes') or a "
                f"sequence of mappings of label to probability. Got {type(proba).__name__} instead.",
                "proba",
            )
        columns: dict[Hashable, int] = {}
        for row in proba:
            if not isinstance(row, Mapping):
                raise DecisionError(
                    f"Each row of the 'proba' parameter of {where} must be a mapping of label to "
                    f"probability. Got {type(row).__name__} instead.",
                    "proba",
                )
            for label in row:
                columns.setdefault(label, len(columns))
        matrix = np.zeros((len(proba), len(columns)))
        for i, row in enumerate(proba):
            for label, p in row.items():
                matrix[i, columns[label]] = _probability(p, label, where)
        labels = list(columns)
    else:
        if isinstance(classes, (str, bytes, AbstractSet, Mapping)) or not isinstance(classes, (Sequence, np.ndarray)):
            # a set's order depends on the hash seed: which column is which label would too
            raise DecisionError(
                f"The 'classes' parameter of {where} must be a sequence of labels in the columns' order (a "
                f"list, tuple or 1-D array). Got {type(classes).__name__} instead.",
                "classes",
            )
        labels = list(classes)
        if len(set(labels)) != len(labels):
            raise DecisionError(
                f"The 'classes' parameter of {where} must not repeat a label. Got {_shown(labels)} instead.", "classes"
            )
        try:
            matrix = np.asarray(proba, dtype=np.float64)
        except (TypeError, ValueError):
            raise DecisionError(
                f"The 'proba' parameter of {where} must be a 2-D array of numbers. Got {type(proba).__name__} instead.",
                "proba",
            ) from None
        if matrix.ndim != 2 or matrix.shape[1] != len(labels):
            raise DecisionError(
                f"The 'proba' parameter of {where} must be a 2-D array with one column per class "
                f"({len(labels)}). Got shape {matrix.shape} instead.",
                "proba",
            )
    if check_input and matrix.size:
        _check_rows(matrix, labels, where)
    if not labels and len(matrix):
        raise DecisionError(
            f"The 'proba' parameter of {where} has no label: there is nothing to decide from "
            f"(a model predicts {{}} before it has seen any label).",
            "proba",
        )
    return labels, matrix


def _probability(p: Any, label: Hashable, where: str) -> float:
    if isinstance(p, numbers.Real) and not isinstance(p, (bool, np.bool_)):
        try:
            return float(p)
        except OverflowError:  # an int beyond any float: refused as not finite (_check_rows)
            return math.inf
    raise DecisionError(
        f"The probability of label {_shown(label)} in the 'proba' parameter of {where} must be a "
        f"number. Got {_shown(p)} instead.",
        "proba",
        label=label,
    )


def _check_rows(matrix: FloatArray, labels: Sequence[Hashable], where: str) -> None:
    bad = ~np.isfinite(matrix) | (matrix < 0)
    if bad.any():
        i, j = (int(v) for v in np.argwhere(bad)[0])
        raise DecisionError(
            f"The probability of label {_shown(labels[j])} in the 'proba' parameter of {where} must "
            f"be a finite number >= 0. Got {matrix[i, j]!r} instead.",
            "proba",
            label=labels[j],
        )
    sums = matrix.sum(axis=1)
    off = np.abs(sums - 1.0) > SUM_TOLERANCE
    if off.any():
        i = int(np.argmax(off))
        row = f" (row {i})" if len(matrix) > 1 else ""
        raise DecisionError(
            f"The probabilities in the 'proba' parameter of {where} must sum to 1 (within "
            f"{SUM_TOLERANCE:g}). Got a sum of {sums[i]!r}{row} instead.",
            "proba",
        )


@dataclass(frozen=True)
class Decision:
    """The decision of least expected cost for one prediction.

    Attributes
    ----------
    decision
        The decision (on a tie, the first of the tied decisions in the costs' order).
    expected_costs
        Every decision's expected cost, in the costs' order.
    """

    decision: Hashable
    expected_costs: dict[Hashable, float]


@dataclass(frozen=True, eq=False)
class Decisions:
    """The decisions of least expected cost for a batch; row ``i`` as a :class:`Decision` is
    ``decisions[i]``.

    Attributes
    ----------
    options
        The decisions, in the costs' order: the columns of ``expected_costs``.
    index
        ``(n,)`` column of each row's decision (the first of the tied columns on a tie).
    expected_costs
        ``(n, len(options))`` expected costs.
    """

    options: tuple[Hashable, ...]
    index: IntArray
    expected_costs: FloatArray

    @property
    def decisions(self) -> list[Hashable]:
        """Each row's decision."""
        return [self.options[i] for i in self.index.tolist()]

    def __len__(self) -> int:
        return len(self.index)

    def __getitem__(self, i: int) -> Decision:
        return Decision(self.options[int(self.index[i])], dict(zip(self.options, self.expected_costs[i].tolist())))

    def __iter__(self) -> Iterator[Decision]:
        return (self[i] for i in range(len(self)))


def _decide(labels: Sequence[Hashable], matrix: FloatArray, costs: CostMatrix, where: str) -> Decisions:
    order, columns = costs.select(labels, where)
    expected = expected_costs(matrix[:, order], costs.table[:, columns])
    return Decisions(costs.decisions, np.argmin(expected, axis=1).astype(np.int64), expected)


def decide(proba: Mapping[Any, float], costs: Costs | CostMatrix) -> Decision:
    """The decision of least expected cost for one prediction.

    Parameters
    ----------
    proba
        Label to probability (a model's ``predict_proba_one``); finite, >= 0, summing to 1.
    costs
        Decision to ``{true label: cost}``, or a :class:`CostMatrix`. Every decision must have
        a cost for every label of ``proba``; a cost for a label ``proba`` lacks is fine (that
        label has probability 0). Costs may be negative (gains).

    Returns
    -------
    Decision
        ``.decision``, the decision of least expected cost, and ``.expected_costs``, every
        decision's expected cost. Ties go to the first of the tied decisions in the order of
        ``costs`` (ties are exact equalities of the computed expected costs).

    Raises
    ------
    DecisionError
        (a ``ValueError``) for invalid costs or probabilities, or a label of ``proba`` that a
        decision has no cost for; the message names the label and the decision.

    Notes
    -----
    With :math:`C(d, y)` the cost of decision :math:`d` when the true label is :math:`y`,
    the expected cost of :math:`d` is :math:`E(d) = \\sum_y p(y) C(d, y)` and the decision is
    :math:`\\arg\\min_d E(d)`.

    Examples
    --------
    A transaction is fraudulent with probability 0.2: approving it costs the amount (1,000)
    if it is a fraud, challenging it costs 90 either way (Fan et al. 2005, Section 3).

    >>> from streamtree import decide
    >>> costs = {"approve": {"fraud": 1000, "ok": 0}, "challenge": {"fraud": 90, "ok": 90}}
    >>> d = decide({"fraud": 0.2, "ok": 0.8}, costs)
    >>> d.decision, d.expected_costs
    ('challenge', {'approve': 200.0, 'challenge': 90.0})
    >>> decide({"fraud": 0.05, "ok": 0.95}, costs).decision
    'approve'
    """
    where = "decide"
    matrix = CostMatrix.of(costs, where)
    if not isinstance(proba, Mapping):
        raise DecisionError(
            f"The 'proba' parameter of {where} must be a mapping of label to probability. Got "
            f"{type(proba).__name__} instead.",
            "proba",
        )
    labels, p = probabilities([proba], None, where)
    return _decide(labels, p, matrix, where)[0]


def decide_many(
    proba: Any, costs: Costs | CostMatrix, *, classes: Sequence[Hashable] | None = None, check_input: bool = True
) -> Decisions:
    """The decision of least expected cost for each row of a batch, in one vectorised pass.

    Parameters
    ----------
    proba
        ``(n, k)`` probabilities whose columns follow ``classes`` (a model's
        ``predict_proba(X)`` and ``classes_``), or a sequence of mappings of label to
        probability (``classes`` None).
    costs
        As for :func:`decide`; every decision needs a cost for every column's label.
    classes
        The labels of ``proba``'s columns, for an array.
    check_input
        Check that the probabilities are finite, >= 0 and sum to 1 per row (skip it only for
        probabilities a model has just made). Costs are always checked.

    Returns
    -------
    Decisions
        ``.decisions`` (one per row), ``.expected_costs`` (``(n, len(costs))``), ``.options``
        (the decisions in order) and ``.index``; ``result[i]`` is row ``i``'s
        :class:`Decision`, equal to ``decide`` on that row. Ties as in :func:`decide`.

    Examples
    --------
    >>> import numpy as np
    >>> from streamtree import decide_many
    >>> costs = {"approve": {"fraud": 1000, "ok": 0}, "challenge": {"fraud": 90, "ok": 90}}
    >>> result = decide_many(np.array([[0.2, 0.8], [0.05, 0.95]]), costs, classes=["fraud", "ok"])
    >>> result.decisions
    ['challenge', 'approve']
    >>> result.expected_costs
    array([[200.,  90.],
           [ 50.,  90.]])
    """
    where = "decide_many"
    matrix = CostMatrix.of(costs, where)
    labels, p = probabilities(proba, classes, where, check_input)
    return _decide(labels, p, matrix, where)
