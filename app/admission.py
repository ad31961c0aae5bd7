"""The checks of learn requests against the model's state, made by the writer just before it learns them.

The HTTP layer checks each event on its own (structure, limits: :mod:`app.validation`);
what depends on the model is checked here, request by request in queue order, as if every
earlier admitted request of the chunk had been learned: a delayed label's id names a pending
prediction (and no earlier request of the chunk used it), every label has the type of the
model's labels, and the new labels keep the model within ``max_labels``. A refused request
is answered 422 naming the field; the others are learned as if it had not been sent.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from streamtree.typing import ClassLabel

from .exceptions import InvalidInput, Loc
from .pending import PendingIds
from .validation import event_loc, field_error

__all__ = ["LABEL_TYPES", "Admitted", "LearnEvent", "LearnRequest", "admit"]

#: The JSON name of each label type, in a refusal's message.
LABEL_TYPES: dict[type, str] = {str: "string", int: "integer", bool: "boolean"}


class LearnEvent(NamedTuple):
    """One event of a learn request, as the HTTP layer checked it."""

    features: dict[str, Any] | None
    """The features, or None for a delayed label (then ``id`` names the prediction)."""
    label: ClassLabel
    """The label."""
    id: str | int | None
    """The id of an earlier prediction this event labels, if any."""


@dataclass
class LearnRequest:
    """A learn request waiting for the writer, answered through ``future`` with ``(learned, seq)``."""

    events: Sequence[LearnEvent]
    batch: bool  # ``{"events": [...]}`` rather than one event: where a refused event's loc points
    future: asyncio.Future[tuple[int, int]]
    key: str | None = None  # the Idempotency-Key, if given
    body_hash: str = ""


@dataclass
class Admitted:
    """A request whose events passed the checks that need the model's state."""

    request: LearnRequest
    xs: list[dict[str, Any]]
    ys: list[ClassLabel]


@dataclass
class _Labels:
    """What the requests admitted so far in a chunk leave for the next one: labels, their type, used ids."""

    known: set[ClassLabel]
    kind: type | None
    used_ids: set[str | int] = field(default_factory=set)


def admit(
    chunk: Sequence[LearnRequest], classes: Sequence[ClassLabel], pending: PendingIds, max_labels: int
) -> tuple[list[Admitted], list[tuple[LearnRequest, InvalidInput]]]:
    """Check each request of ``chunk``, in order, against a model whose labels are
    ``classes``: ``(admitted, refused)``, each refused request with the 422 it gets.

    Parameters
    ----------
    chunk
        The requests, in queue order.
    classes
        The model's labels so far.
    pending
        The predictions waiting for a delayed label (read, not changed).
    max_labels
        Most labels a model may have.
    """
    labels = _Labels(set(classes), type(classes[0]) if classes else None)
    admitted: list[Admitted] = []
    refused: list[tuple[LearnRequest, InvalidInput]] = []
    for request in chunk:
        try:
            admitted.append(_resolve(request, labels, pending, max_labels))
        except InvalidInput as exc:
            refused.append((request, exc))
    return admitted, refused


def _resolve(request: LearnRequest, labels: _Labels, pending: PendingIds, max_labels: int) -> Admitted:
    """The request's features and labels, checked; ``labels`` is updated only if it passes."""
    xs: list[dict[str, Any]] = []
    locs: list[Loc] = []
    for i, event in enumerate(request.events):
        loc = event_loc(request.batch, "events", i)
        x = event.features
        if x is None:
            assert event.id is not None
            x = None if event.id in labels.used_ids else pending.get(event.id)
            if x is None:
                raise field_error((*loc, "id"), "No pending prediction has this id (unknown or expired)", "unknown_id")
        xs.append(x)
        locs.append(loc)
    ys = [event.label for event in request.events]
    kind, new = labels.kind, set[ClassLabel]()
    for y, loc in zip(ys, locs, strict=True):
        if kind is None:
            kind = type(y)
        elif type(y) is not kind:
            raise field_error(
                (*loc, "label"),
                f"Labels of this model are of type {LABEL_TYPES[kind]}, not {LABEL_TYPES[type(y)]}",
                "label_type",
            )
        if y not in labels.known and y not in new:
            if len(labels.known) + len(new) >= max_labels:
                raise field_error(
                    (*loc, "label"), f"The model already has the maximum of {max_labels} labels", "too_many_labels"
                )
            new.add(y)
    labels.known |= new
    labels.kind = kind
    labels.used_ids.update(e.id for e in request.events if e.id is not None)
    return Admitted(request, xs, ys)
