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
from operator import itemgetter
from typing import Any

import numpy as np

__all__ = ["NO_CODES", "NO_VALUES", "RowPlan", "one_row"]

#: One example's values (codes) of a model without numeric (nominal) features: never written
#: (kernels only read their inputs), so shared rather than built per event.
NO_VALUES = np.empty((1, 0), dtype=np.float64)
NO_CODES = np.empty((1, 0), dtype=np.int64)


def one_row(values: Sequence[Any], codes: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """One example's ``(1, n_numeric)`` float64 values and ``(1, n_nominal)`` int64 codes for
    the kernels: new arrays, or the shared empty ones (never written: kernels only read their
    inputs). numpy converts an int as ``float`` does, so ints and floats give the same bits."""
    return (
        np.array([values], dtype=np.float64) if values else NO_VALUES,
        np.array([codes], dtype=np.int64) if codes else NO_CODES,
    )


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
        read = self._read(x)
        return None if read is None else (list(map(float, read[0])), read[1])

    def encode_row(self, x: dict[Hashable, Any]) -> tuple[np.ndarray, np.ndarray] | None:
        """:meth:`encode` as the kernels' row (:func:`one_row`): :meth:`encode`'s bits, in
        one conversion from the values as read."""
        read = self._read(x)
        return None if read is None else one_row(*read)

    def _read(self, x: dict[Hashable, Any]) -> tuple[tuple[Any, ...], list[int]] | None:
        """The numeric values as read (floats and ints, checked) and the codes, or ``None``."""
        if len(x) != self.n_features:
            return None
        try:
            values = self.numeric(x)
            names = () if self.nominal is None else self.nominal(x)
        except KeyError:
            return None
        types = set(map(type, values))
        if types <= _FLOAT:
            if math.inf in values or -math.inf in values:
                return None
        elif types <= _NUMBER:
            limit = self.max_int
            # min and max compare ints and floats exactly, and an infinity is beyond the limit
            # (a NaN makes them fail, never pass wrongly): within it, every int converts to a
            # float and no value is infinite; else check each value
            if not -limit <= min(values) <= max(values) <= limit and (
                math.inf in values
                or -math.inf in values
                or not all(-limit <= v <= limit for v in values if type(v) is int)
            ):
                return None
        else:
            return None
        if not names:
            return values, []
        if not set(map(type, names)) <= _NOMINAL:
            return None
        codes = list(map(dict.get, self.codes, names))
        if None in codes:
            return None
        return values, codes  # type: ignore[return-value]
