"""Smoothing for any fitted tree given as arrays: no streaming machinery.

A tree is its ``parent`` array (``parent[0] = -1``, ``parent[i] < i``) and its class counts
``counts[node, class]``, every node counting every example that passed through it. Any
smoother of :mod:`streamtree.smoothing` then gives class probabilities at every node.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from streamtree.exceptions import ConfigError, InputError
from streamtree.smoothing import SMOOTHERS, Smoother
from streamtree.topology import Topology
from streamtree.typing import FloatArray, IntArray

__all__ = ["clone_smoother", "make_smoother", "smooth"]


def clone_smoother(smoother: Smoother) -> Smoother:
    """An unfitted copy of a smoother (its constructor parameters, no fitted state)."""
    import copy
    import inspect

    cls = type(smoother)
    try:
        names = [p for p in inspect.signature(cls.__init__).parameters if p != "self"]
        return cls(**{n: getattr(smoother, n) for n in names if hasattr(smoother, n)})
    except TypeError:  # a constructor that does not store its arguments under their names
        return copy.deepcopy(smoother)


def make_smoother(smoothing: str | Smoother, params: Mapping[str, Any] | None = None) -> Smoother:
    """A smoother from its name in :data:`~streamtree.smoothing.SMOOTHERS` and its parameters.

    An instance is returned as given (``params`` must then be empty).

    Examples
    --------
    >>> make_smoother("mestimate", {"m": 2.0})
    MEstimate(m=2.0, base='uniform')
    """
    if isinstance(smoothing, Smoother):
        if params:
            raise ConfigError(
                "The 'smoothing_params' parameter must be empty when 'smoothing' is a Smoother instance. "
                f"Got {dict(params)!r} instead."
            )
        return smoothing
    if not isinstance(smoothing, str) or smoothing not in SMOOTHERS:
        raise ConfigError(
            f"The 'smoothing' parameter must be one of {', '.join(map(repr, SMOOTHERS))} or a Smoother. "
            f"Got {smoothing!r} instead."
        )
    try:
        return SMOOTHERS[smoothing](**dict(params or {}))
    except TypeError as exc:  # an unknown keyword: say which smoother rejected what
        raise ConfigError(
            f"The 'smoothing_params' parameter holds an option {smoothing!r} does not take: {exc}. "
            f"Got {dict(params or {})!r} instead."
        ) from None


def smooth(
    parent: IntArray,
    counts: FloatArray,
    smoothing: str | Smoother = "hgs",
    params: Mapping[str, Any] | None = None,
    fit_counts: FloatArray | None = None,
) -> FloatArray:
    """Class probabilities ``(S, K)`` at every node of a fitted tree.

    Parameters
    ----------
    parent
        ``(S,)`` parent of every node, ``-1`` for the root (node 0), ``parent[i] < i``.
    counts
        ``(S, K)`` class counts of every node (those predictions are made from).
    smoothing, params
        The estimator and its parameters (see :func:`make_smoother`).
    fit_counts
        Counts the estimator's parameters are fitted on (HGS's leave-one-out objective, HDP's
        posterior), if not ``counts``: "honest" counts from examples that did not choose the
        tree's structure.

    Examples
    --------
    >>> import numpy as np

    A stump whose right leaf saw one example: Laplace gives it 2/3, HGS backs it off toward
    its parent.

    >>> parent = np.array([-1, 0, 0])
    >>> counts = np.array([[6., 4.], [5., 4.], [1., 0.]])
    >>> smooth(parent, counts, "laplace")[2].round(3).tolist()
    [0.667, 0.333]
    >>> p = smooth(parent, counts, "hgs")
    >>> bool(np.allclose(p.sum(axis=1), 1.0))
    True
    """
    given = np.asarray(parent)
    parent = given.astype(np.int64)
    if given.dtype.kind not in "iu" and not np.array_equal(given, parent):
        raise InputError(f"parent must hold node indices (integers); got {given.dtype} values", field="parent")
    counts = np.asarray(counts, dtype=np.float64)
    if counts.ndim != 2 or counts.shape[0] != parent.shape[0] or counts.shape[1] == 0:
        raise InputError(
            f"counts must have shape (len(parent)={parent.shape[0]}, n_classes >= 1); got {counts.shape}",
            field="counts",
        )
    for name, c in (("counts", counts), ("fit_counts", fit_counts)):
        if c is not None and not (np.isfinite(c).all() and (np.asarray(c) >= 0).all()):
            raise InputError(f"{name} must be finite and >= 0", field=name)
        with np.errstate(over="ignore"):  # a node's total, and so its probabilities, must be finite too
            finite_totals = c is None or bool(np.isfinite(np.asarray(c, dtype=np.float64).sum(axis=1)).all())
        if not finite_totals:
            raise InputError(f"{name} must have finite row sums (a node's total); got counts that overflow", field=name)
    try:
        topology = Topology.from_parent(parent)
    except ValueError as exc:
        raise InputError(str(exc), field="parent") from None
    smoother = make_smoother(smoothing, params)
    if smoother is smoothing:  # an instance: refitted from scratch, its own state (HGS's warm start) untouched
        smoother = clone_smoother(smoother)
    smoother.refit(topology, counts, fit_counts)
    return smoother.node_proba(topology, counts)
