"""The feature registry: which features exist, their kind, and nominal value codes.

Features are registered in order of first appearance, so the same stream gives the same
registry whatever the batch boundaries. A feature's kind is fixed by its first value:

- ``bool`` and ``str`` values are nominal, and so are numbers of a feature declared in
  ``nominal_features``;
- other real numbers (Python or numpy) are numeric;
- ``None`` and NaN mean *missing* (the example stops at a node that splits on it).

Numeric features get a column in the numeric statistics, nominal ones a column in the nominal
statistics and a code per value (0, 1, 2, ... in order of first appearance).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Collection, Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from streamtree.exceptions import InputError

__all__ = ["FeatureRegistry", "EncodedRow", "NUMERIC", "NOMINAL"]

NUMERIC, NOMINAL = 0, 1


@dataclass
class EncodedRow:
    """One example's present features: numeric (column, value) and nominal (column, code).

    A nominal code of ``-1`` is a value the registry has not seen (only at prediction time).
    """

    num_cols: list[int] = field(default_factory=list)
    num_vals: list[float] = field(default_factory=list)
    nom_cols: list[int] = field(default_factory=list)
    nom_codes: list[int] = field(default_factory=list)


def _kind_of(name: Hashable, value: Any, nominal_features: Collection[Hashable]) -> int | None:
    """The kind a value implies, ``None`` for missing; raises on an unusable value."""
    if value is None:
        return None
    if isinstance(value, (bool, np.bool_, str)):
        return NOMINAL
    if isinstance(value, numbers.Real):
        if name in nominal_features:
            return NOMINAL
        v = float(value)
        if math.isnan(v):
            return None
        if math.isinf(v):
            raise InputError(f"Feature {name!r} must be a finite number. Got {value!r} instead.", field=name)
        return NUMERIC
    raise InputError(
        f"Feature {name!r} must be a number, a string, a bool or None. Got {type(value).__name__} instead.",
        field=name,
    )


def _plain(value: Any) -> Any:
    """A numpy scalar as the Python value it stands for (so codes do not depend on the type)."""
    return value.item() if isinstance(value, np.generic) else value


class FeatureRegistry:
    """Features seen so far, their kinds, columns and nominal codes.

    Examples
    --------
    >>> reg = FeatureRegistry()
    >>> row = reg.encode({"age": 31, "city": "Oslo"}, learn=True)
    >>> (row.num_cols, row.num_vals, row.nom_cols, row.nom_codes)
    ([0], [31.0], [0], [0])
    >>> reg.encode({"city": "Lima"}, learn=False).nom_codes  # unseen at prediction: -1
    [-1]
    """

    def __init__(self, nominal_features: Collection[Hashable] = ()) -> None:
        self.nominal_features = frozenset(nominal_features)
        self.names: list[Hashable] = []
        self.kinds: list[int] = []
        self.cols: list[int] = []
        self.index: dict[Hashable, int] = {}
        self.n_numeric = 0
        self.n_nominal = 0
        self.values: list[list[Any]] = []  # per nominal column, values in code order
        self.codes: list[dict[Any, int]] = []
        self.max_values = 0  # the largest number of values any nominal feature has


    def check(self, x: Mapping[Hashable, Any]) -> None:
        """Raise :class:`InputError` if ``x`` cannot be learned; registers nothing."""
        if not isinstance(x, Mapping):
            raise InputError(f"Features must be a mapping of name to value. Got {type(x).__name__} instead.", field="features")
        for name, value in x.items():
            kind = _kind_of(name, value, self.nominal_features)
            fid = self.index.get(name)
            if kind is not None and fid is not None and self.kinds[fid] != kind:
                expected = "numeric" if self.kinds[fid] == NUMERIC else "nominal (str or bool)"
                raise InputError(
                    f"Feature {name!r} is {expected} in this model. Got {value!r} instead.", field=name
                )

    def encode(self, x: Mapping[Hashable, Any], learn: bool) -> EncodedRow:
        """Encode one example. With ``learn`` new features and values are registered (call
        :meth:`check` first: this does not validate); without it, unknown features are
        ignored, unknown nominal values get code -1, and unusable values count as missing."""
        row = EncodedRow()
        nominal = self.nominal_features
        for name, value in x.items():
            fid = self.index.get(name)
            if fid is None:
                if not learn:
                    continue
                try:
                    kind = _kind_of(name, value, nominal)
                except InputError:
                    continue
                if kind is None:
                    continue
                fid = self._register(name, kind)
            kind = self.kinds[fid]
            col = self.cols[fid]
            if kind == NUMERIC:
                if value is None or isinstance(value, (bool, np.bool_, str)) or not isinstance(value, numbers.Real):
                    continue
                v = float(value)
                if math.isfinite(v):
                    row.num_cols.append(col)
                    row.num_vals.append(v)
            else:
                if value is None or (isinstance(value, float) and math.isnan(value)):
                    continue
                if not isinstance(value, Hashable):
                    continue
                value = _plain(value)
                code = self.codes[col].get(value)
                if code is None:
                    if not learn:
                        code = -1
                    else:
                        code = len(self.values[col])
                        self.codes[col][value] = code
                        self.values[col].append(value)
                        self.max_values = max(self.max_values, code + 1)
                row.nom_cols.append(col)
                row.nom_codes.append(code)
        return row

    def _register(self, name: Hashable, kind: int) -> int:
        fid = len(self.names)
        self.names.append(name)
        self.kinds.append(kind)
        self.index[name] = fid
        if kind == NUMERIC:
            self.cols.append(self.n_numeric)
            self.n_numeric += 1
        else:
            self.cols.append(self.n_nominal)
            self.n_nominal += 1
            self.values.append([])
            self.codes.append({})
        return fid

    def feature_of(self, kind: int, col: int) -> Hashable:
        """The name of the feature at column ``col`` of its kind."""
        for fid, (k, c) in enumerate(zip(self.kinds, self.cols)):
            if k == kind and c == col:
                return self.names[fid]
        raise KeyError((kind, col))

    # -- persistence --------------------------------------------------------------------
    def to_state(self) -> dict[str, Any]:
        return {
            "nominal_features": sorted(self.nominal_features, key=repr),
            "names": list(self.names),
            "kinds": list(self.kinds),
            "values": [list(v) for v in self.values],
        }

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> FeatureRegistry:
        reg = cls(state["nominal_features"])
        for name, kind in zip(state["names"], state["kinds"]):
            reg._register(name, int(kind))
        for col, values in enumerate(state["values"]):
            reg.values[col] = list(values)
            reg.codes[col] = {v: i for i, v in enumerate(values)}
            reg.max_values = max(reg.max_values, len(values))
        return reg
