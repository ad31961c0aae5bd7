"""Reading a model as the API answers: probabilities, decisions and explanations keyed by label.

Functions of the model alone (a :class:`~app.hosting.ModelHost` checks that the model may be
read and counts the predictions): labels become JSON keys (:func:`app.schemas.label_key`),
and the library's :class:`~streamtree.exceptions.InputError` becomes a 422 naming the field
(:func:`app.validation.input_error`).
"""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np

from streamtree.decision import CostMatrix, decide_many
from streamtree.exceptions import DecisionError, InputError
from streamtree.typing import FloatArray

from .exceptions import NoLabels
from .schemas import label_key
from .validation import Limits, check_answer_size, field_error, input_error

__all__ = [
    "check_answer_fits",
    "decisions",
    "explanation",
    "labels_for",
    "paced_proba_matrix",
    "proba_matrix",
    "proba_one",
    "proba_rows",
    "rows_by_label",
    "tree_data",
]

#: Values a node takes in ``tree_`` besides its class counts: parent, left, right, depth, split, alpha.
TREE_VALUES_PER_NODE = 6


def check_answer_fits(model: Any, n: int, decisions: int, limits: Limits) -> None:
    """Refuse (422 at ``("body", "instances")``) a batch of ``n`` instances whose answer, a
    probability per label the model has (and an expected cost per one of the ``decisions``)
    for each, would hold more than ``max_answer_values`` values
    (:func:`~app.validation.check_answer_size`). Before any label the answer is ``{}`` per
    instance: nothing to refuse."""
    labels = len(model.classes_)
    if labels:
        what = f"{labels:,} labels" + (f" + {decisions:,} decisions" if decisions else "")
        check_answer_size(n, labels + decisions, what, ("body", "instances"), limits)


def proba_one(model: Any, x: dict[str, Any]) -> dict[str, float]:
    """Class probabilities for one instance, by label key (refusals at ``("body", "features")``)."""
    try:
        proba = model.predict_proba_one(x)
    except InputError as exc:
        raise input_error(exc, ("body", "features")) from None
    return {label_key(c): p for c, p in proba.items()}


def proba_matrix(model: Any, xs: list[dict[str, Any]]) -> FloatArray:
    """``(n, classes)`` probabilities for a batch, columns in the model's class order
    (refusals at ``("body", "instances")``)."""
    try:
        proba: FloatArray = model.predict_proba(xs)
    except InputError as exc:
        raise input_error(exc, ("body", "instances")) from None
    return proba


async def paced_proba_matrix(model: Any, xs: list[dict[str, Any]], size: int) -> FloatArray:
    """:func:`proba_matrix` in slices of ``size`` rows, the event loop free between two (the
    caller keeps the model from changing meanwhile: one model answers every row). Each row's
    probabilities are those of the whole batch; a refusal is the whole batch's."""
    parts: list[FloatArray] = []
    try:
        for start in range(0, len(xs), size):
            if start:
                await asyncio.sleep(0)
            parts.append(model.predict_proba(xs[start : start + size]))
    except InputError:
        return proba_matrix(model, xs)  # the refusal as the whole batch gives it
    return np.vstack(parts) if parts else proba_matrix(model, xs)


def proba_rows(model: Any, xs: list[dict[str, Any]]) -> list[dict[str, float]]:
    """Class probabilities for each instance, by label key (``{}`` for each before any label)."""
    if not model.classes_ or not xs:
        return [{} for _ in xs]
    return rows_by_label(model, proba_matrix(model, xs))


def rows_by_label(model: Any, proba: FloatArray) -> list[dict[str, float]]:
    """Each row of ``proba`` (columns in the model's class order) as ``{label key: p}``."""
    keys = [label_key(c) for c in model.classes_]
    return [dict(zip(keys, row, strict=True)) for row in proba.tolist()]


def labels_for(model: Any, costs: CostMatrix) -> list[str]:
    """The model's labels (as JSON keys), once ``costs`` is known to cover each of them.

    Raises
    ------
    NoLabels
        The model has learned no label yet.
    InvalidInput
        At ``("body", "costs", decision)``: a decision has no cost for one of the labels.
    """
    keys = [label_key(c) for c in model.classes_]
    if not keys:
        raise NoLabels()
    try:
        costs.select(keys)
    except DecisionError as exc:
        raise field_error(
            ("body", "costs", str(exc.decision)),
            f"This decision has no cost for the model's "
            f"label {label_key(exc.label)!r}: give every decision a cost for every label",
            "costs_missing_label",
        ) from None
    return keys


def decisions(proba: FloatArray, costs: CostMatrix, keys: list[str]) -> dict[str, Any]:
    """The decisions of least expected cost for a batch's probabilities (columns ``keys``):
    ``{"decisions", "expected_costs", "probabilities"}``, a list each."""
    result = decide_many(proba, costs, classes=keys, check_input=False)
    options = result.options
    return {
        "decisions": result.decisions,
        "expected_costs": [dict(zip(options, row, strict=True)) for row in result.expected_costs.tolist()],
        "probabilities": [dict(zip(keys, row, strict=True)) for row in proba.tolist()],
    }


def tree_data(model: Any, member: int | None, limits: Limits) -> dict[str, Any]:
    """The library's ``tree_`` of the model, or of one member of a forest, once its size (a
    value per class and :data:`TREE_VALUES_PER_NODE` more per node) is known to be within
    ``max_answer_values``: it is built whole, on the event loop.

    Raises
    ------
    InvalidInput
        At ``("query", "member")``: a member of a single tree, a member out of range, or a
        tree over the bound (for a forest, the message says to ask one member at a time).
    """
    loc = ("query", "member")
    members = getattr(model, "members", None)
    shown = model
    if member is not None:
        if members is None:
            raise field_error(loc, "This model is a single tree: ask for its tree without 'member'", "no_members")
        if not 0 <= member < len(members):
            raise field_error(loc, f"member must be from 0 to {len(members) - 1} (the forest's trees); got {member}")
        shown = members[member]
    values = shown.n_nodes * (len(model.classes_) + TREE_VALUES_PER_NODE)
    if values > limits.max_answer_values:
        what, hint = "The tree holds", ""
        if members is not None and member is None:
            what = f"The forest's {len(members)} trees hold"
            hint = f": ask for one tree at a time (?member=0 to ?member={len(members) - 1})"
        raise field_error(
            loc,
            f"{what} {shown.n_nodes:,} nodes of {len(model.classes_):,} classes: {values:,} values, over "
            f"{limits.max_answer_values:,} on this service (setting max_answer_values){hint}",
            "too_long",
        )
    tree: dict[str, Any] = shown.tree_
    return tree if member is None else {"member": member, **tree}


def explanation(model: Any, x: dict[str, Any]) -> dict[str, Any]:
    """The library's explanation of the prediction for ``x`` (refusals at ``("body", "features")``)."""
    try:
        result: dict[str, Any] = model.explain_one(x)
    except InputError as exc:
        raise input_error(exc, ("body", "features")) from None
    return result
