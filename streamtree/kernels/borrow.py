"""Borrowed arrays: the same memory, without numba's reference counting.

Inside compiled code every array value carries a pointer to its owner (numba's *meminfo*), and
numba counts references to it: a call that takes an array, a view such as ``num[r]`` and an
attribute read such as ``t.counts`` each add one and release it later, two atomic operations
(``lock inc``/``lock dec``, some 20 cycles each, and a function call each). Its pruning pass
removes pairs within straight-line code, not across the branches and calls of the learning
loop. Measured with ``perf`` on Waveform in batches of 1,000, 44% of the time was in those two
functions: about 150 pairs per row learned, 29 per row predicted; borrowing took the batch
rate on SEA from 1.47 to 0.88 us a row and on Waveform from 3.58 to 2.74, the same bits.

A *borrowed* array (:func:`borrow`) has no owner pointer, so numba's counting skips it (its
increment and decrement test for a null owner and return). It is only valid while something
else holds the memory: a handle's arrays are borrowed and its Python object holds them
(:mod:`streamtree.kernels.handle`); the kernels' entry points borrow their arguments (held
by the caller for the whole call) and their working arrays (held by a variable that is used
again after the last borrowed use: :func:`hold`). A borrowed array is never returned to
Python (it has no owner to box). Nothing is copied and no arithmetic changes: the same
bits, fewer instructions.
"""

from __future__ import annotations

from typing import Any

from numba import njit
from numba.core import cgutils, types
from numba.extending import intrinsic

__all__ = ["borrow", "hold"]


@intrinsic
def borrow(typingctx: Any, array: types.Array) -> Any:
    """``array`` without its owner: the same data, shape and strides, a null meminfo and
    parent, so that numba does not count references to it. Valid only while the array it was
    made from is held (module docstring).

    Examples
    --------
    >>> import numpy as np
    >>> from numba import njit
    >>> @njit
    ... def first(a):
    ...     b = borrow(a)
    ...     b[0] = 7.0
    ...     return b.shape[0]
    >>> a = np.zeros(3)
    >>> first(a), a.tolist()
    (3, [7.0, 0.0, 0.0])
    """
    if not isinstance(array, types.Array):
        return None

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        view = cgutils.create_struct_proxy(array)(context, builder, value=args[0])
        view.meminfo = cgutils.get_null_value(view.meminfo.type)
        view.parent = cgutils.get_null_value(view.parent.type)
        return view._getvalue()

    return array(array), codegen


@njit(cache=True)
def hold(*arrays: Any) -> None:  # type: ignore[no-untyped-def]
    """Nothing: a use of ``arrays`` after the last use of what was borrowed from them, so that
    numba (which releases a variable after its last use) keeps them until then."""
