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
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, overload

from streamtree.typing import ClassLabel

from .exceptions import InvalidInput, Loc
from .pending import PendingIds
from .validation import event_loc, field_error

__all__ = ["LABEL_TYPES", "Admitted", "EventBatch", "LearnEvent", "LearnRequest", "admit", "admitted_ids", "event_ids"]

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


class EventBatch(Sequence[LearnEvent]):
    """The events of a batch as columns (:func:`app.ingest.check_batch`): a sequence of
    :class:`LearnEvent` whose columns the writer reads without an object per event.

    Parameters
    ----------
    xs
        Each event's features, or None for a delayed label.
    ys
        Each event's label.
    ids
        Each event's id (None: none), or None when no event has one.
    """

    __slots__ = ("ids", "xs", "ys")

    def __init__(
        self, xs: list[dict[str, Any] | None], ys: list[ClassLabel], ids: list[str | int | None] | None
    ) -> None:
        self.xs, self.ys, self.ids = xs, ys, ids

    def __len__(self) -> int:
        return len(self.ys)

    @overload
    def __getitem__(self, i: int) -> LearnEvent: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[LearnEvent]: ...
    def __getitem__(self, i: int | slice) -> LearnEvent | Sequence[LearnEvent]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        return LearnEvent(self.xs[i], self.ys[i], None if self.ids is None else self.ids[i])

    def __iter__(self) -> Iterator[LearnEvent]:
        ids = self.ids if self.ids is not None else [None] * len(self.ys)
        return map(LearnEvent, self.xs, self.ys, ids)


def event_ids(events: Sequence[LearnEvent]) -> list[str | int]:
    """The ids the events of a request name (delayed labels, or predictions made with an id)."""
    if isinstance(events, EventBatch):
        return [] if events.ids is None else [i for i in events.ids if i is not None]
    return [e.id for e in events if e.id is not None]


@dataclass
class LearnRequest:
    """A learn request waiting for the writer, answered through ``future`` with ``(learned, seq)``."""

    events: Sequence[LearnEvent]
    batch: bool  # ``{"events": [...]}`` rather than one event: where a refused event's loc points
    future: asyncio.Future[tuple[int, int]]
    key: str | None = None  # the Idempotency-Key, if given
    body_hash: str = ""
    after: str | None = None  # the Idempotency-After: the key of the request this one follows

    def fail(self, exc: BaseException) -> None:
        """Answer with ``exc``, unless answered already (its client gone, say)."""
        if not self.future.done():
            self.future.set_exception(exc)


@dataclass
class Admitted:
    """A request whose events passed the checks that need the model's state."""

    request: LearnRequest
    xs: list[dict[str, Any]]
    ys: list[ClassLabel]


def admitted_ids(a: Admitted) -> list[tuple[str | int, dict[str, Any] | None]]:
    """Each id an admitted request names, with the features of the prediction a delayed label
    was admitted with (None for an event that brings its own features)."""
    events = a.request.events
    if isinstance(events, EventBatch):
        if events.ids is None:
            return []
        return [
            (i, x if f is None else None) for i, f, x in zip(events.ids, events.xs, a.xs, strict=True) if i is not None
        ]
    return [(e.id, x if e.features is None else None) for e, x in zip(events, a.xs, strict=True) if e.id is not None]


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
    fast = _resolve_columns(request.events, labels, max_labels)
    if fast is not None:
        return Admitted(request, *fast)
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
    labels.used_ids.update(event_ids(request.events))
    return Admitted(request, xs, ys)


def _resolve_columns(
    events: Sequence[LearnEvent], labels: _Labels, max_labels: int
) -> tuple[list[dict[str, Any]], list[ClassLabel]] | None:
    """What :func:`_resolve` answers for a batch without ids whose labels are all of the
    model's type and within ``max_labels``, from its columns; None for any other request
    (then :func:`_resolve` checks it event by event, naming the field of a refusal)."""
    if not isinstance(events, EventBatch) or events.ids is not None or not events.ys:
        return None
    ys = events.ys
    kinds = set(map(type, ys))
    if len(kinds) != 1 or (labels.kind is not None and labels.kind not in kinds):
        return None
    new = set(ys).difference(labels.known)
    if len(labels.known) + len(new) > max_labels:
        return None
    labels.known |= new
    labels.kind = next(iter(kinds))
    xs: list[dict[str, Any]] = events.xs  # type: ignore[assignment]  # no delayed label: all features
    return xs, ys
