"""The steady state's encoding of one event: a dict holding exactly the registered features.

Once a stream's features are all registered, almost every event is a dict with exactly those
keys, numbers for the numeric features and known strings or bools for the nominal ones.
:meth:`RowPlan.encode` reads such an event's values in column order with one C-level call per
kind (``operator.itemgetter``) and checks their types by the set of types present, instead of
looking each key up and branching on each value in Python
(:meth:`~streamtree.features.FeatureRegistry.encode_known`); :meth:`RowPlan.encode_row`
hands them to the kernels as a ``(1, n)`` row in one conversion. Anything else (a feature
missing or extra, ``None``, an unseen nominal value, an infinite number, another type) is
answered ``None``, and the caller takes the general path: the two give the same values where
both apply.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence
from operator import is_, itemgetter
from typing import Any

import numpy as np

__all__ = ["NO_CODES", "NO_VALUES", "Read", "RowPlan", "one_row"]

#: One example's values (codes) of a model without numeric (nominal) features: never written
#: (kernels only read their inputs), so shared rather than built per event.
NO_VALUES = np.empty((1, 0), dtype=np.float64)
NO_CODES = np.empty((1, 0), dtype=np.int64)


def one_row(values: Sequence[Any], codes: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """One example's ``(1, n_numeric)`` float64 values and ``(1, n_nominal)`` int64 codes for
    the kernels: new arrays, or the shared empty ones (never written: kernels only read their
    inputs). numpy converts an int as ``float`` does, so ints and floats give the same bits."""
    # a 1-D conversion seen as one row: the same values, in 2/3 of the time of converting
    # [values]; the dtype given by position, not keyword (80 ns less a call)
    return (
        np.array(values, np.float64)[None] if values else NO_VALUES,
        np.array(codes, np.int64)[None] if codes else NO_CODES,
    )


#: What :meth:`RowPlan.read_row` read from a dict: its numeric values and nominal values (the
#: dict's own objects, in column order) and the row they encode to.
Read = tuple[tuple[Any, ...], tuple[Any, ...], np.ndarray, np.ndarray]

_FLOAT = frozenset({float})
_NUMBER = frozenset({float, int})
_NOMINAL = frozenset({str, bool})


def _getter(names: Sequence[Hashable]) -> Callable[[dict[Hashable, Any]], tuple[Any, ...]]:
    """A function of a dict giving the values of ``names`` as a tuple (``KeyError`` if one is absent)."""
    if len(names) >= 2:
        return itemgetter(*names)
    if len(names) == 1:
        pair = itemgetter(names[0], names[0])  # itemgetter of one name gives the value, not a tuple
        return lambda x: pair(x)[:1]
    return lambda x: ()


class RowPlan:
    """How to encode an event holding exactly the registered features (module docstring).

    Parameters
    ----------
    numeric, nominal
        The registered feature names of each kind, in column order.
    codes
        The code of each known value, per nominal column (the registry's own dicts, read when
        encoding, so a value registered later is known).
    max_int
        The largest ``|int|`` a numeric feature takes as a number.
    """

    def __init__(
        self,
        numeric: Sequence[Hashable],
        nominal: Sequence[Hashable],
        codes: list[dict[Any, int]],
        max_int: int,
    ) -> None:
        self.n_features = len(numeric) + len(nominal)
        self.numeric = _getter(numeric)
        self.nominal = _getter(nominal) if nominal else None
        self.codes = codes
        self.max_int = max_int

    def encode(self, x: dict[Hashable, Any]) -> tuple[list[float], list[int]] | None:
        """``x``'s values and codes by column when it holds exactly the registered features,
        each numeric value a finite float or an int within ``max_int`` (as a float) and each
        nominal value a known str or bool; ``None`` otherwise."""
        got = self._get(x)
        if got is None:
            return None
        codes = self._codes(*got)
        return None if codes is None else (list(map(float, got[0])), codes)

    def encode_row(self, x: dict[Hashable, Any]) -> tuple[np.ndarray, np.ndarray] | None:
        """:meth:`encode` as the kernels' row (:func:`one_row`): :meth:`encode`'s bits, in
        one conversion from the values as read."""
        read = self.read_row(x)
        return None if read is None else (read[2], read[3])

    def read_row(self, x: dict[Hashable, Any]) -> Read | None:
        """:meth:`encode_row`'s row with the objects it was read from: ``(values, names, num,
        nom)``, ``values`` and ``names`` the numeric and nominal values of ``x`` in column
        order (for :meth:`unchanged`); ``None`` where :meth:`encode_row` gives ``None``."""
        # one call for the values, one for their checks, one for the arrays: this runs before
        # every prediction (a tuple star-unpacked from one_row would cost 0.1 µs more)
        got = self._get(x)
        if got is None:
            return None
        values, names = got
        codes = self._codes(values, names)
        if codes is None:
            return None
        num, nom = one_row(values, codes)
        return values, names, num, nom

    def unchanged(self, x: dict[Hashable, Any], read: Read) -> bool:
        """Whether ``x`` still holds exactly the features and the very value objects that
        :meth:`read_row` read into ``read``: its row then cannot differ from reading ``x``
        again (identity, not equality: ``1`` and ``True`` are equal, and only one is a
        nominal value). A dict of ``n_features`` keys that has every registered name has no
        other key."""
        got = self._get(x)
        return got is not None and all(map(is_, got[0], read[0])) and (not read[1] or all(map(is_, got[1], read[1])))

    def _get(self, x: dict[Hashable, Any]) -> tuple[tuple[Any, ...], tuple[Any, ...]] | None:
        """The numeric and the nominal values of ``x`` in column order, as they are (not
        checked), when ``x`` holds exactly the registered features; ``None`` otherwise."""
        if len(x) != self.n_features:
            return None
        try:
            return self.numeric(x), () if self.nominal is None else self.nominal(x)
        except KeyError:
            return None

    def _codes(self, values: tuple[Any, ...], names: tuple[Any, ...]) -> list[int] | None:
        """The codes of the nominal values ``names`` when the numeric ``values`` are finite
        floats and ints within ``max_int`` and each of ``names`` is a known str or bool (the
        plan's one copy of its checks); ``None`` otherwise."""
        types = set(map(type, values))
        if types <= _FLOAT:
            if math.inf in values or -math.inf in values:
                return None
        elif not types <= _NUMBER or not max(map(abs, values)) <= self.max_int:
            # beyond the limit: an int too large, or an infinity (or a NaN first, which stops
            # max from looking further: the general path then decides)
            return None
        if not names:
            return []
        if not set(map(type, names)) <= _NOMINAL:
            return None
        codes = list(map(dict.get, self.codes, names))
        if None in codes:
            return None
        return codes  # type: ignore[return-value]
