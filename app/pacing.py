"""The writer's learning in stretches bounded by cost, so no learn holds the event loop long.

The writer learns on the event loop (:mod:`app.group_commit`), and a library call holds the
loop for as long as it learns: its cost grows with events times trees (how long, measured:
``docs/decisions/learning-stretches.md``). So the events of a request are learned in library
calls of at most :func:`stretch_events` events, at most :data:`STRETCH_COST` events x trees
each, a tree counting once per 16 of the model's classes (a tree keeps its 1,000 events a
call, a forest of 10 trees too, one of 100 trees learns 100 at a time, a 10-tree forest of
1,000 classes 16), and the loop serves whatever waits
between two calls (predictions and ``/health`` included; they may then see a model that
learned part of a request, not yet acknowledged).

The model is the same, bit for bit: the library learns consecutive slices of a batch exactly
as the whole batch (and as its rows one by one), and the prequential scores do not depend on
where a batch is cut either (:func:`app.learning.learn_scored`, which the replay uses with
other boundaries). A request cut into stretches is checked whole first, as the library
checks a batch before it learns any of it (``check_batch``: labels, values and the memory
budget, on a copy of the model's feature registry): a refused event still means none of the
request was learned.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from typing import Any

from streamtree.typing import ClassLabel

from .learning import learn_scored
from .prequential import Prequential

__all__ = ["CLASSES_PER_UNIT", "STRETCH_COST", "learn_in_stretches", "stretch_events"]

#: Most events x trees one library call learns (a tree's or a 10-tree forest's 1,000 events a
#: call; how long that holds the loop: ``docs/decisions/learning-stretches.md``).
STRETCH_COST = 10_000
#: Classes that cost an event as much as one more tree's worth of it (:func:`stretch_events`).
CLASSES_PER_UNIT = 16


def stretch_events(model: Any, max_events: int, labels: Iterable[ClassLabel] = ()) -> int:
    """Most events one library call learns on ``model``: ``STRETCH_COST / (trees x
    max(1, classes / 16))``, at most ``max_events``, at least one; ``classes`` counts the
    model's and the new ones among ``labels`` (those about to be learned).

    An event's cost grows with the model's classes as well as its trees (its counts, HGS
    refits and linear component are per class; measured: ``docs/decisions/learning-stretches.md``).

    >>> from types import SimpleNamespace
    >>> [stretch_events(SimpleNamespace(n_trees=n), 1_000) for n in (1, 10, 100, 1_000, 20_000)]
    [1000, 1000, 100, 10, 1]
    >>> [stretch_events(SimpleNamespace(n_trees=10, classes_=range(k)), 1_000) for k in (2, 16, 100, 1_000)]
    [1000, 1000, 160, 16]
    >>> stretch_events(SimpleNamespace(n_trees=10, classes_=[]), 1_000, [f"l{i}" for i in range(1_000)])
    16
    """
    trees = max(getattr(model, "n_trees", 1), 1)
    classes = {*getattr(model, "classes_", ()), *labels}
    per_tree = max(1.0, len(classes) / CLASSES_PER_UNIT)
    return max(1, min(max_events, int(STRETCH_COST / (trees * per_tree))))


async def learn_in_stretches(
    model: Any,
    prequential: Prequential,
    xs: Sequence[dict[str, Any]],
    ys: Sequence[ClassLabel],
    t: float | None,
    size: int,
) -> None:
    """:func:`app.learning.learn_scored` on the events, ``size`` at a time, the loop free in
    between (module docstring).

    Raises
    ------
    streamtree.exceptions.InputError
        An event is refused: checked before any is learned, so nothing changed.
    """
    if len(xs) <= size:
        learn_scored(model, prequential, xs, ys, t)
        return
    model.check_batch(xs, ys)  # what learn_many checks first, on the whole request
    for start in range(0, len(xs), size):
        if start:
            await asyncio.sleep(0)
        learn_scored(model, prequential, xs[start : start + size], ys[start : start + size], t)
