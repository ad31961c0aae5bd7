"""What a feature's value means, before any model sees it: its kind (numeric, nominal or
missing), its float, and numpy scalars as the Python values they stand for.

The rules (the module docstring of :mod:`streamtree.features` states them for users): ``bool``
and ``str`` values are nominal, and so are numbers of a feature declared nominal; other real
numbers are numeric; ``None`` and NaN are missing; an infinite number is refused.
"""

from __future__ import annotations

import math
import numbers
import sys
from collections.abc import Collection, Hashable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from streamtree.exceptions import InputError

__all__ = [
    "INFINITE",
    "MAX_INT",
    "NOMINAL",
    "NUMERIC",
    "as_float",
    "check_mapping",
    "check_name",
    "kind_of",
    "plain",
    "plain_name",
    "saveable",
]

NUMERIC, NOMINAL = 0, 1
#: The infinite values: a numeric feature's value must be finite.
INFINITE = (math.inf, -math.inf)
#: Ints within +-this are numbers as they are; larger ones take the checked path (``float()``
#: may overflow).
MAX_INT = int(sys.float_info.max)


def kind_of(name: Hashable, value: Any, nominal_features: Collection[Hashable]) -> int | None:
    """The kind a value implies, ``None`` for missing (None, NaN, pandas' ``NA`` and ``NaT``);
    raises on an unusable value."""
    if value is None or value is pd.NA or value is pd.NaT:  # NA: a nullable column's blank cell
        return None
    if isinstance(value, (bool, np.bool_, str)):
        return NOMINAL
    if isinstance(value, numbers.Real):
        if name in nominal_features and not isinstance(value, (float, np.floating)):
            if not isinstance(value, numbers.Integral):  # a Fraction: no code the save format can hold
                raise InputError(
                    f"Feature {name!r} is nominal: its numbers must be ints or floats. Got {type(value).__name__} instead.",
                    field=name,
                )
            return NOMINAL
        v = as_float(name, value)  # a float is missing when NaN, refused when infinite, of either kind
        if math.isnan(v):
            return None
        if math.isinf(v):
            raise InputError(f"Feature {name!r} must be a finite number. Got {value!r} instead.", field=name)
        return NOMINAL if name in nominal_features else NUMERIC
    raise InputError(
        f"Feature {name!r} must be a number, a string, a bool or None. Got {type(value).__name__} instead.",
        field=name,
    )


def as_float(name: Hashable, value: Any) -> float:
    """``float(value)``; :class:`InputError` naming the feature for an integer too large for a float."""
    try:
        return float(value)
    except OverflowError:
        raise InputError(
            f"Feature {name!r} must be a finite number. Got an integer of {int(value).bit_length()} bits instead.",
            field=name,
        ) from None


def check_mapping(x: object) -> None:
    """Raise :class:`InputError` unless ``x`` is a mapping of feature name to value."""
    if not isinstance(x, Mapping):
        raise InputError(
            f"Features must be a mapping of name to value. Got {type(x).__name__} instead.", field="features"
        )


def plain(value: Any) -> Any:
    """A numpy scalar as the Python value it stands for (so codes do not depend on the type)."""
    return value.item() if isinstance(value, np.generic) else value


def plain_name(name: Any) -> Any:
    """A feature's name as the registry keeps it, the same after saving and loading: numpy
    scalars as Python's, JSON's lists (a saved tuple) as tuples, a ``str``, ``int`` or
    ``float`` subclass (an enum member) as its plain value; equal to, and hashed as, ``name``."""
    if isinstance(name, (tuple, list)):
        return tuple(map(plain_name, name))
    name = plain(name)
    if type(name) not in (str, int, float, bool):  # a loaded name is one of these: so is a kept one
        if isinstance(name, str):
            return str.__str__(name)  # not str(): a (str, Enum) member's is "Class.MEMBER"
        if isinstance(name, int) and not isinstance(name, bool):
            return int.__int__(name)
        if isinstance(name, float):
            return float.__float__(name)
    return name


def saveable(name: Any) -> bool:
    """Whether the save format holds ``name``, a feature name as :func:`plain_name` keeps it (or
    a nominal value), as itself: a ``str``, ``int``, ``bool``, finite ``float``, ``None`` or a
    tuple of these (JSON has no bytes, sets or NaN, and a NaN is not even equal to itself)."""
    t = type(name)
    if t is str or t is int or t is bool or name is None:
        return True
    if t is float:
        return math.isfinite(name)
    return t is tuple and all(map(saveable, name))


def check_name(name: Hashable) -> None:
    """Raise :class:`InputError` naming the feature unless its name is :func:`saveable`: a
    model that registered it could never be saved again."""
    if not saveable(plain_name(name)):
        raise InputError(
            "Feature names must be str, int, finite float, bool, None or tuples of these "
            f"(what a saved model can hold). Got {name!r} ({type(name).__name__}) instead.",
            field=name,
        )
