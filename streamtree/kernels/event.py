"""One event through the learning and prediction loops, the model handed over as one object.

A tree's per-event call of the learning loop (:func:`~streamtree.kernels.learn.learn_rows`)
takes three handles (the tree, the background tree, the detector) and five arrays besides the
event's own. Calling compiled code from Python converts every argument, and a handle costs
more than an array (its struct is looked up through its Python object; what that cost:
``docs/decisions/compiled-core.md``, "One object per event call"). An *event handle* gathers what stays the same from one event to the next
(the three handles, the configuration, the feature keys, the learning loop's fixed
arguments) in one struct: :func:`learn_event` and :func:`predict_event` take it and the
event, and call the loops with exactly the arguments the model would pass them one by one.

Ownership (``docs/architecture/memory.md``): the struct holds numba references to the
handles' structs and to the arrays of its own fields (counted, not borrowed); the handles'
arrays are borrowed, so the event handle's Python object holds the handles' Python objects
(``event.held``), which hold the arrays. A model makes an event handle when its arrays change
and drops it with them (``TreeState.current``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit, typeof
from numba.core import types
from numba.experimental import structref

from streamtree.kernels.handle import DRIFT_HANDLE, TREE_HANDLE
from streamtree.kernels.learn import learn_rows
from streamtree.kernels.predict import predict_rows

__all__ = ["event_handle", "learn_event", "predict_event"]


@structref.register
class EventType(types.StructRef):
    """The numba type of an event handle."""


class Event(structref.StructRefProxy):
    """An event handle as Python holds it: opaque, only handed to kernels; ``held`` is the
    tree's, background tree's and detector's handles it points into."""

    __slots__ = ("held",)


_INTS = typeof(np.zeros(1, dtype=np.int64))
_FLOATS = typeof(np.zeros(1))
EVENT = EventType(
    [
        ("tree", TREE_HANDLE),
        ("background", TREE_HANDLE),
        ("drift", DRIFT_HANDLE),
        ("cfg_i", _INTS),
        ("cfg_f", _FLOATS),
        ("fkeys", _INTS),
        ("once", _INTS),
        ("no_proba", typeof(np.zeros((1, 1)))),
    ]
)
structref.define_boxing(EventType, Event)


@njit(cache=True)
def _event(tree, background, drift, cfg_i, cfg_f, fkeys, once, no_proba):  # type: ignore[no-untyped-def]
    e = structref.new(EVENT)
    e.tree = tree
    e.background = background
    e.drift = drift
    e.cfg_i = cfg_i
    e.cfg_f = cfg_f
    e.fkeys = fkeys
    e.once = once
    e.no_proba = no_proba
    return e


#: ``reps`` of one event learned once, and the prediction output of a loop asked for none.
ONCE = np.ones(1, dtype=np.int64)
NO_PROBA = np.zeros((0, 0))


def event_handle(
    tree: Any, background: Any, drift: Any, cfg_i: np.ndarray, cfg_f: np.ndarray, fkeys: np.ndarray
) -> Any:
    """The event handle of a tree's handle, its background tree's (the tree's own while there
    is none: the loop then does not read it) and its detector's, with the kernels'
    configuration ``cfg_i``, ``cfg_f`` and the feature keys ``fkeys``
    (:func:`~streamtree.kernels.learn.learn_rows`' arguments of those names)."""
    event = _event(tree, background, drift, cfg_i, cfg_f, fkeys, ONCE, NO_PROBA)
    event.held = (tree, background, drift)  # their arrays are borrowed: the handles must live
    return event


@njit(cache=True)
def learn_event(e, num, nom, ks, total):  # type: ignore[no-untyped-def]
    """:func:`~streamtree.kernels.learn.learn_rows` of the rows ``num``, ``nom`` (one event,
    its class id ``ks``) from row 0, each learned once, no prediction asked, the model having
    learned ``total`` examples before: ``(next_row, reason)`` as it returns them."""
    return learn_rows(
        e.tree, e.background, e.drift, e.cfg_i, e.cfg_f, num, nom, ks, e.once, e.fkeys, 0, total, e.no_proba, False
    )


@njit(cache=True)
def predict_event(e, num, nom, n_classes):  # type: ignore[no-untyped-def]
    """:func:`~streamtree.kernels.predict.predict_rows` of one event on the event handle's
    tree: its probabilities of the first ``n_classes`` classes, a new list."""
    out = np.empty((1, e.tree.counts.shape[1]))
    predict_rows(e.tree, e.cfg_i, e.cfg_f, num, nom, out)
    # a list, not an array: returning an array costs its boxing and then a tolist(), twice a
    # list's cost (docs/decisions/compiled-core.md, "What an event's call returns")
    proba = [0.0] * n_classes
    for k in range(n_classes):
        proba[k] = out[0, k]
    return proba
