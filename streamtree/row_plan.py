"""The steady state's encoding of one event: a dict holding exactly the registered features.

Once a stream's features are all registered, almost every event is a dict with exactly those
keys, numbers for the numeric features and known strings or bools for the nominal ones.
:meth:`RowPlan.encode` reads such an event's values in column order with one C-level call per
kind (``operator.itemgetter``) and checks their types by the set of types present, instead of
looking each key up and branching on each value in Python
(:meth:`~streamtree.features.FeatureRegistry.encode_known`). Anything else (a feature missing
or extra, ``None``, an unseen nominal value, an infinite number, another type) is answered
``None``, and the caller takes the general path: the two give the same values where both apply.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence
from operator import itemgetter
from typing import Any

__all__ = ["RowPlan"]

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
        self.nominal = _getter(nominal)
        self.codes = codes
        self.max_int = max_int

    def encode(self, x: dict[Hashable, Any]) -> tuple[list[float], list[int]] | None:
        """``x``'s values and codes by column when it holds exactly the registered features,
        each numeric value a finite float or an int within ``max_int`` (as a float) and each
        nominal value a known str or bool; ``None`` otherwise."""
        if len(x) != self.n_features:
            return None
        try:
            values = self.numeric(x)
            names = self.nominal(x)
        except KeyError:
            return None
        types = set(map(type, values))
        if types <= _FLOAT:
            numbers = list(values)
        elif types <= _NUMBER:
            limit = self.max_int
            # min and max compare ints and floats exactly (a NaN makes them fail, never pass
            # wrongly): within the limit every int converts to a float; else check the ints
            if not -limit <= min(values) <= max(values) <= limit and not all(
                -limit <= v <= limit for v in values if type(v) is int
            ):
                return None
            numbers = list(map(float, values))
        else:
            return None
        if math.inf in numbers or -math.inf in numbers:
            return None
        if not set(map(type, names)) <= _NOMINAL:
            return None
        codes = list(map(dict.get, self.codes, names))
        if None in codes:
            return None
        return numbers, codes  # type: ignore[return-value]
