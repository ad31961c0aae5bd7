"""Calling a compiled kernel per event without numba's per-call type dispatch.

A numba dispatcher types every argument of every call before it runs the compiled code: for a
tree's handle and the loop's other arguments that is more than the computation of one event
(``docs/decisions/compiled-core.md``). :func:`entry_point` resolves a kernel's compiled entry point once for the
types of a set of arguments; calling it runs the same compiled code with the same arguments.

The entry point does not check its arguments' types: the caller must give it arguments of the
types it was resolved for. :func:`direct` keeps one entry point per kernel, resolved at the
first call: it serves callers whose arguments are always of one type, as
:class:`~streamtree.tree.ProbabilityTree`'s per-event paths are (the tree's handle,
:mod:`streamtree.kernels.handle`, is of one type for every tree, and every other argument is
a C-contiguous, writable float64 or int64 array, a Python int or a bool).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["at_entry", "direct", "entry_point"]

_ENTRIES: dict[Any, Callable[..., Any]] = {}


def entry_point(kernel: Any, *args: Any) -> Callable[..., Any]:
    """The compiled code ``kernel`` (a numba dispatcher) runs for ``args``' types, compiled
    (or read from the kernel cache) when it has not been yet.

    Examples
    --------
    >>> import numpy as np
    >>> from streamtree.kernels.route import route
    >>> node = np.array([[-1, -1, -1, -1, 0, 0, -1]])  # one leaf
    >>> args = (node, np.zeros(1), np.zeros(0), np.zeros(0, dtype=np.int64), np.zeros(1, dtype=np.int64))
    >>> entry_point(route, *args)(*args) == route(*args) == 1
    True
    """
    signature = tuple(kernel.typeof_pyval(a) for a in args)
    return kernel.compile(signature)  # type: ignore[no-any-return]


def direct(kernel: Any, *args: Any) -> Any:
    """``kernel(*args)`` at the entry point resolved at the kernel's first :func:`direct` call:
    every call of one kernel through here must give arguments of the types of the first."""
    entry = _ENTRIES.get(kernel)
    if entry is None:
        entry = _ENTRIES[kernel] = entry_point(kernel, *args)
    return entry(*args)


def at_entry(num: np.ndarray, nom: np.ndarray) -> bool:
    """Whether encoded rows go to a kernel's compiled entry point (:func:`direct`): one event,
    in matrices of the one type the entry points are resolved for (C-contiguous and writable;
    their dtypes are the encoding's). A batch's row need not be."""
    f, g = num.flags, nom.flags  # spelled out, not a generator: this runs on every event
    plain = f.c_contiguous and f.writeable and g.c_contiguous and g.writeable
    return num.shape[0] == 1 and bool(plain)
