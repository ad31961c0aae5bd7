"""Borrowed arrays: the same memory, without numba's reference counting (the rules that keep
them safe: ``docs/architecture/memory.md``).

Inside compiled code every array value carries a pointer to its owner (numba's *meminfo*), and
numba counts references to it: a call that takes an array, a view such as ``num[r]`` and an
attribute read such as ``t.counts`` each add one and release it later, two atomic operations
that numba's pruning removes within straight-line code but not across the branches and calls
of the learning loop (what that cost, and what borrowing gained:
``docs/decisions/compiled-core.md``, "Borrowed arrays").

A *borrowed* array (:func:`borrow`) has no owner pointer, so numba's counting skips it (its
increment and decrement test for a null owner and return). Nothing is copied and no
arithmetic changes: the same bits, fewer instructions. It is valid only while something else
holds the memory.

The rules that keep them safe (who holds each array, which modules may borrow, what must
never happen) are written in one place, ``docs/architecture/memory.md``; the allowlist is
:data:`BORROWERS` (``tests/kernels/test_ownership.py`` checks the two agree, and that no other
module calls :func:`borrow` or :func:`hold`). One rule holds by construction here: a borrowed
array has its own numba type, :class:`BorrowedArray`, which numba refuses to return to Python
(compiling such a kernel fails), and so do its views, and it never becomes an owned array.
"""

from __future__ import annotations

from typing import Any

from numba import njit
from numba.core import cgutils, types
from numba.core.datamodel.models import ArrayModel
from numba.core.errors import NumbaError
from numba.core.imputils import lower_cast
from numba.extending import box, intrinsic, overload_classmethod, register_model
from numba.np.arrayobj import intrin_alloc

__all__ = ["BORROWERS", "BorrowedArray", "borrow", "borrowed", "hold"]

BORROWERS = frozenset(
    {
        "streamtree.kernels.handle",  # a handle's fields ("a handle holds what it borrows")
        "streamtree.kernels.learn",  # learn_rows ("an entry point holds for the whole call")
        "streamtree.kernels.predict",  # predict_rows
        "streamtree.kernels.forest",  # learn_forest_rows, predict_forest_rows
        "streamtree.kernels.split",  # best_split's working buffer
    }
)
"""The modules that may call :func:`borrow` and :func:`hold` (besides this one)."""


class BorrowedArray(types.Array):
    """The numba type of a borrowed array: an array type numba will not box.

    It has the array's data model and every array operation (a subclass of ``types.Array``);
    its views are borrowed too; it converts to no owned array type, and an owned array and a
    borrowed one unify only as borrowed. An array allocated from one (``b.copy()``) is owned
    but typed borrowed: it is still counted, and cannot be returned either."""

    def __init__(self, dtype: Any, ndim: int, layout: str, readonly: bool = False, aligned: bool = True) -> None:
        access = "readonly " if readonly else ""
        super().__init__(
            dtype,
            ndim,
            layout,
            readonly=readonly,
            aligned=aligned,  # type: ignore[call-overload]
            name=f"borrowed {access}array({dtype}, {ndim}d, {layout})",
        )

    def copy(  # type: ignore[override]
        self,
        dtype: Any = None,
        ndim: Any = None,
        layout: Any = None,
        readonly: Any = None,
    ) -> BorrowedArray:
        return borrowed(super().copy(dtype=dtype, ndim=ndim, layout=layout, readonly=readonly))

    def unify(self, typingctx: Any, other: Any) -> BorrowedArray | None:
        same = super().unify(typingctx, other)
        return borrowed(same) if isinstance(same, types.Array) else None

    def can_convert_to(self, typingctx: Any, other: Any) -> Any:
        return super().can_convert_to(typingctx, other) if isinstance(other, BorrowedArray) else None


def borrowed(array_type: types.Array) -> BorrowedArray:
    """The borrowed type of an array type (a handle's field types)."""
    return BorrowedArray(
        array_type.dtype,
        array_type.ndim,
        array_type.layout,
        readonly=not array_type.mutable,
        aligned=array_type.aligned,
    )


register_model(BorrowedArray)(ArrayModel)


@overload_classmethod(BorrowedArray, "_allocate", target="CPU")
def _allocate(cls, allocsize, align):  # type: ignore[no-untyped-def]
    # numba allocates a new array through its type's class (``b.copy()``): as for any array.
    # No annotations: numba compares this signature with impl's, and they must be the same
    def impl(cls, allocsize, align):  # type: ignore[no-untyped-def]
        return intrin_alloc(allocsize, align)

    return impl


@lower_cast(types.Array, BorrowedArray)
def _to_borrowed(context: Any, builder: Any, fromty: Any, toty: Any, val: Any) -> Any:
    # an owned array in a borrowed variable (the two unified): the same struct, its owner kept
    # and still counted
    return val


@lower_cast(BorrowedArray, types.Array)
def _to_owned(context: Any, builder: Any, fromty: Any, toty: Any, val: Any) -> Any:
    # numba unifies ``owned if c else borrowed`` (owned first) as owned: refuse it
    raise NumbaError(
        f"a borrowed array ({fromty}) cannot become an owned one ({toty}): borrow the owned "
        "one too (docs/architecture/memory.md, 'never return a borrowed array')"
    )


@lower_cast(BorrowedArray, BorrowedArray)
def _borrowed_to_borrowed(context: Any, builder: Any, fromty: Any, toty: Any, val: Any) -> Any:
    return val  # another layout or mutability: the same struct


@box(BorrowedArray)
def _box(typ: BorrowedArray, val: Any, c: Any) -> Any:
    raise NumbaError(
        f"a borrowed array ({typ}) cannot be returned to Python: it has no owner (docs/architecture/memory.md, 'never return a borrowed array')"
    )


@intrinsic
def borrow(typingctx: Any, array: types.Array) -> Any:
    """``array`` without its owner: the same data, shape and strides, a null meminfo and
    parent, so that numba does not count references to it; typed :class:`BorrowedArray`.
    Valid only while the array it was made from is held (module docstring).

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
    out = borrowed(array)

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        view = cgutils.create_struct_proxy(array)(context, builder, value=args[0])
        view.meminfo = cgutils.get_null_value(view.meminfo.type)
        view.parent = cgutils.get_null_value(view.parent.type)
        return view._getvalue()

    return out(array), codegen


@njit(cache=True)
def hold(*arrays: Any) -> None:  # type: ignore[no-untyped-def]
    """Nothing: a use of ``arrays`` after the last use of what was borrowed from them, so that
    numba (which releases a variable after its last use) keeps them until then."""
