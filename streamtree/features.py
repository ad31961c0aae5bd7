"""The feature registry: which features exist, their kind, and nominal value codes.

Features are registered in order of first appearance, so the same stream gives the same
registry whatever the batch boundaries. A feature's kind is fixed by its first value:

- ``bool`` and ``str`` values are nominal, and so are numbers of a feature declared in
  ``nominal_features``;
- other real numbers (Python or numpy) are numeric;
- ``None`` and NaN mean *missing* (the example stops at a node that splits on it).

Numeric features get a column in the numeric statistics, nominal ones a column in the nominal
statistics and a code per value (0, 1, 2, ... in order of first appearance).

With ``max_categories`` ``B``, a nominal feature keeps its own code for its first ``B`` values
only: every later value shares code ``B``, its *other* code, so no feature holds more than
``B + 1`` codes (each code is a row of every growing leaf's statistics: a feature that looks
like an id would otherwise grow them with every example). The first value beyond the bound
creates the other code; from then on a value the registry has not seen is read as *other* at
prediction time too, where before it (and without a bound) it gets -1.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Collection, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import repeat
from typing import Any

import numpy as np

from streamtree.exceptions import InputError
from streamtree.row_plan import RowPlan, one_row
from streamtree.values import (
    INFINITE,
    MAX_INT,
    NOMINAL,
    NUMERIC,
    as_float,
    check_mapping,
    check_name,
    kind_of,
    plain,
    plain_name,
    saveable,
)

__all__ = [
    "FeatureRegistry",
    "EncodedRow",
]


class _Absent:
    """The type of :data:`_ABSENT`, a feature a row does not have (``encode_known_many``)."""


_ABSENT = _Absent()
_ABSENT_NAN = float("nan")  # a NaN object of its own: an absent numeric feature, by identity
_NONE = type(None)
_NO_VALUE = frozenset({_NONE, _Absent})
_NUMERIC_TYPES = frozenset({float, int}) | _NO_VALUE
_NOMINAL_TYPES = frozenset({str, bool}) | _NO_VALUE


@dataclass
class EncodedRow:
    """One example's present features: numeric (column, value) and nominal (column, code).

    A nominal code of ``-1`` is a value the registry has not seen (only at prediction time,
    and only for a feature without an other code: :class:`FeatureRegistry`).
    """

    num_cols: list[int] = field(default_factory=list)
    num_vals: list[float] = field(default_factory=list)
    nom_cols: list[int] = field(default_factory=list)
    nom_codes: list[int] = field(default_factory=list)


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

    def __init__(
        self,
        nominal_features: Collection[Hashable] = (),
        max_features: int | None = None,
        max_categories: int | None = None,
    ) -> None:
        self.nominal_features = frozenset(nominal_features)
        self.max_features = max_features
        self.max_categories = max_categories
        self.names: list[Hashable] = []
        self.kinds: list[int] = []
        self.cols: list[int] = []
        self.index: dict[Hashable, int] = {}
        self.n_numeric = 0
        self.n_nominal = 0
        self.values: list[list[Any]] = []  # per nominal column, values in code order
        self.codes: list[dict[Any, int]] = []
        self.max_values = 0  # the largest number of codes any nominal feature has
        self.other: list[int] = []  # per nominal column: examples learned whose value took the other code
        self.unseen: list[int] = []  # per nominal column: the code of an unregistered value at prediction
        self.names_by_kind: tuple[list[Hashable], list[Hashable]] = ([], [])  # per kind, by column

    #: :meth:`encode_known`'s fast path for the registered features (made on first use)
    plan: RowPlan | None = None

    def __getstate__(self) -> dict[str, Any]:
        """Pickling and deep copies leave out the plan (made again on first use)."""
        return self.__dict__ | {"plan": None}

    def classify(self, name: Hashable, value: Any) -> tuple[int | None, Any]:
        """``(kind, value)`` of one feature value, ``(None, None)`` when missing; the common
        exact types take the fast path, anything else :func:`~streamtree.values.kind_of`."""
        t = type(value)
        if t is float:
            if value != value:
                return None, None
            if value in (math.inf, -math.inf):
                raise InputError(f"Feature {name!r} must be a finite number. Got {value!r} instead.", field=name)
            return (NOMINAL, value) if name in self.nominal_features else (NUMERIC, value)
        if t is int:
            return (NOMINAL, value) if name in self.nominal_features else (NUMERIC, as_float(name, value))
        if t is str or t is bool:
            return NOMINAL, value
        kind = kind_of(name, value, self.nominal_features)
        if kind is None:
            return None, None
        value = plain(value)
        if kind == NUMERIC:
            return kind, as_float(name, value)
        if type(value) not in (str, bool, int, float):  # an Integral of another type: the int it stands for
            value = int(value)
        return kind, value

    def encode(
        self, x: Mapping[Hashable, Any], learn: bool, check: Callable[[tuple[int, int, int]], None] | None = None
    ) -> EncodedRow:
        """Encode one example's present features.

        With ``learn``, every value is validated first (:class:`InputError` for a value of an
        unusable type, an infinite number, or a kind that contradicts the feature's) and only
        then are new features and values registered: a raise changes nothing. Without it,
        unknown features are ignored, unknown nominal values get code -1 (the feature's other
        code once it has one), and values that cannot be used count as missing. ``check``, when
        given, is called with the sizes learning ``x`` would give the registry (:meth:`sizes_after`)
        before it registers anything: it may raise to refuse ``x``.
        """
        check_mapping(x)
        index, kinds, nominal = self.index, self.kinds, self.nominal_features
        present = []
        for name, value in x.items():
            fid = index.get(name)
            if fid is None and not learn:
                continue
            t = type(value)
            kind: int | None
            if t is str or t is bool:  # the common cases inline; the rest via classify
                kind = NOMINAL
            elif t is int and name not in nominal and -MAX_INT <= value <= MAX_INT:
                kind, value = NUMERIC, float(value)
            elif t is float and value == value and name not in nominal and value not in INFINITE:
                kind = NUMERIC
            else:
                try:
                    kind, value = self.classify(name, value)
                except InputError:
                    if learn:
                        raise
                    continue
            if kind is None:
                continue
            if fid is None:
                check_name(name)
            elif kinds[fid] != kind:
                if not learn:
                    continue
                expected = "numeric" if kinds[fid] == NUMERIC else "nominal (str or bool)"
                raise InputError(f"Feature {name!r} is {expected} in this model. Got {value!r} instead.", field=name)
            present.append((name, fid, kind, value))
        if learn and self.max_features is not None and len(self.names) + len(present) > self.max_features:
            self.check_room(sum(1 for p in present if p[1] is None))
        if check is not None:
            check(self.sizes_after(present))
        row = EncodedRow()
        for name, fid, kind, value in present:
            if fid is None:
                fid = self.register(name, kind)
            col = self.cols[fid]
            if kind == NUMERIC:
                row.num_cols.append(col)
                row.num_vals.append(value)
                continue
            code = self.codes[col].get(value)
            if code is None:
                code = self.learn_code(col, value) if learn else self.unseen[col]
            row.nom_cols.append(col)
            row.nom_codes.append(code)
        return row

    def sizes_after(self, present: list[tuple[Hashable, int | None, int, Any]]) -> tuple[int, int, int]:
        """``(n_numeric, n_nominal, max_values)`` once the validated ``present`` features of an
        example (name, id or ``None`` when new, kind, value) are registered, without registering them."""
        f, c, v = self.n_numeric, self.n_nominal, self.max_values
        bound = self.max_categories
        for _, fid, kind, value in present:
            if fid is None:
                f, c = (f + 1, c) if kind == NUMERIC else (f, c + 1)
                v = max(v, 1) if kind != NUMERIC else v
            elif kind != NUMERIC and value not in self.codes[self.cols[fid]]:
                n = len(self.values[self.cols[fid]])
                v = max(v, (n if bound is None or n < bound else bound) + 1)
        return f, c, v

    def encode_known(self, x: Mapping[Hashable, Any]) -> tuple[list[float], list[int]] | None:
        """Learning's fast path: ``x`` as values and codes by column (NaN, -1: missing) when
        every feature and nominal value is already registered and every value is of a plain
        type that fits its feature; ``None`` otherwise (the caller then goes through
        :meth:`encode`, which validates and registers). Registers nothing.

        Examples
        --------
        >>> reg = FeatureRegistry()
        >>> _ = reg.encode({"a": 1.0, "b": "x"}, learn=True)
        >>> reg.encode_known({"a": 2, "b": "x"}), reg.encode_known({"b": "new"})
        (([2.0], [0]), None)
        """
        if type(x) is not dict:
            return None
        encoded = self.row_plan().encode(x)  # the steady state: exactly the registered features
        return encoded if encoded is not None else self._encode_known_by_name(x)

    def row_plan(self) -> RowPlan:
        """The steady state's encoding of the features registered now (:mod:`streamtree.row_plan`),
        one object until another feature is registered."""
        if self.plan is None:
            self.plan = RowPlan(*self.names_by_kind, self.codes, MAX_INT)
        return self.plan

    def _encode_known_by_name(self, x: dict[Hashable, Any]) -> tuple[list[float], list[int]] | None:
        """:meth:`encode_known` where the plan declines: each key looked up, each value checked
        (a feature may be missing, a value ``None``)."""
        index, kinds, cols, codes_of = self.index, self.kinds, self.cols, self.codes
        values = [math.nan] * self.n_numeric
        codes = [-1] * self.n_nominal
        nominal = self.nominal_features
        for name, value in x.items():
            fid = index.get(name)
            if fid is None:
                return None
            t = type(value)
            if kinds[fid] == NUMERIC:
                if t is float:
                    if value in INFINITE:
                        return None
                    values[cols[fid]] = value  # NaN stays missing
                elif t is int and name not in nominal and -MAX_INT <= value <= MAX_INT:
                    values[cols[fid]] = float(value)
                elif value is not None:
                    return None
            elif t is str or t is bool:
                code = codes_of[cols[fid]].get(value)
                if code is None:
                    return None
                codes[cols[fid]] = code
            elif value is not None:
                return None
        return values, codes

    def encode_known_row(self, x: Mapping[Hashable, Any]) -> tuple[np.ndarray, np.ndarray] | None:
        """:meth:`encode_known` as the kernels' ``(1, n_numeric)`` values and ``(1, n_nominal)``
        codes, or ``None``: the steady state converts the dict in one step
        (:meth:`RowPlan.encode_row`), the rest goes through :meth:`encode_known`.

        >>> reg = FeatureRegistry()
        >>> _ = reg.encode({"a": 1.0, "b": "x"}, learn=True)
        >>> [a.tolist() for a in reg.encode_known_row({"a": 2, "b": "x"})], reg.encode_known_row({"b": "new"})
        ([[[2.0]], [[0]]], None)
        """
        if type(x) is not dict:
            return None
        row = self.row_plan().encode_row(x)
        return row if row is not None else self.encode_known_row_by_name(x)

    def encode_known_row_by_name(self, x: dict[Hashable, Any]) -> tuple[np.ndarray, np.ndarray] | None:
        """:meth:`encode_known_row` where the plan (:meth:`row_plan`) declined ``x``, a dict:
        each key looked up, each value checked (a feature may be missing, a value ``None``)."""
        known = self._encode_known_by_name(x)
        return None if known is None else one_row(*known)

    def encode_known_many(self, xs: Sequence[Any]) -> tuple[np.ndarray, np.ndarray] | None:
        """:meth:`encode_known` for a batch, column by column: the ``(n, n_numeric)`` values
        (NaN: missing) and ``(n, n_nominal)`` codes (-1: missing) when every row is a dict
        whose features and nominal values are all registered and whose values are of plain
        types that fit their features; ``None`` otherwise. Registers nothing.

        Each column is gathered with one ``dict.get`` per row and checked by the set of its
        value types: a few C-level passes per feature instead of a Python loop per value
        (what it saves: ``docs/decisions/compiled-core.md``; below some rows
        :meth:`encode_known` row by row is cheaper, ``streamtree.encoding``). That no row has an unregistered feature is checked by
        counting: the values found must be all the keys the rows have.

        Examples
        --------
        >>> reg = FeatureRegistry()
        >>> _ = reg.encode({"a": 1.0, "b": "x"}, learn=True)
        >>> num, nom = reg.encode_known_many([{"a": 2, "b": "x"}, {"b": None}])
        >>> num.tolist(), nom.tolist()
        ([[2.0], [nan]], [[0], [-1]])
        >>> reg.encode_known_many([{"a": 1.0, "c": 2.0}]) is None  # "c" is not registered
        True
        """
        n = len(xs)
        if n == 0 or set(map(type, xs)) != {dict}:
            return None
        numeric, nominal = self.names_by_kind
        num = np.empty((n, len(numeric)))
        nom = np.empty((n, len(nominal)), dtype=np.int64)
        found = 0
        for c, name in enumerate(numeric):
            # an absent feature reads as one NaN object, told from a user's NaN by identity
            column = list(map(dict.get, xs, repeat(name), repeat(_ABSENT_NAN)))
            types = set(map(type, column))
            if not types <= _NUMERIC_TYPES or (int in types and name in self.nominal_features):
                return None
            found += n - column.count(_ABSENT_NAN)  # identity first: a scan of pointers
            if _NONE in types:
                column = [math.nan if v is None else v for v in column]
            try:
                values = np.array(column, dtype=np.float64)
            except OverflowError:  # an int beyond float: encode() refuses it with a message
                return None
            if np.isinf(values).any():
                return None
            num[:, c] = values
        for c, name in enumerate(nominal):
            column = list(map(dict.get, xs, repeat(name), repeat(_ABSENT)))
            types = set(map(type, column))
            if not types <= _NOMINAL_TYPES:
                return None
            codes_of = self.codes[c]
            if types & _NO_VALUE:
                found += n - column.count(_ABSENT)
                codes_of = {**codes_of, None: -1, _ABSENT: -1}  # missing: -1, one lookup for all
            else:
                found += n
            codes = list(map(codes_of.get, column, repeat(-2)))
            if -2 in codes:  # a value not registered yet
                return None
            nom[:, c] = codes
        if found != sum(map(len, xs)):  # a row has a feature that is not registered
            return None
        return num, nom

    def learn_code(self, col: int, value: Any) -> int:
        """Register ``value``, not yet registered, of nominal column ``col`` and return its code:
        the next code while the column has fewer than ``max_categories`` values, else its other
        code (``max_categories``), counted in :attr:`other`."""
        values = self.values[col]
        bound = self.max_categories
        if bound is None or len(values) < bound:
            code = len(values)
            self.codes[col][value] = code
            values.append(value)
        else:
            code = bound
            self.other[col] += 1
            self.unseen[col] = code
        if code >= self.max_values:
            self.max_values = code + 1
        return code

    def overflow(self) -> dict[Hashable, int]:
        """``{feature: examples}`` for every nominal feature some of whose learned values took
        its other code (they came after its first ``max_categories`` values)."""
        return {self.names_by_kind[NOMINAL][c]: n for c, n in enumerate(self.other) if n}

    def value_of(self, kind: int, col: int, value: Any) -> float | int | None:
        """What routing compares for the feature at ``col`` of ``kind``: the float of a numeric
        value, the code of a nominal one (for an unseen value -1, or the other code once the
        feature has one), ``None`` if missing or unusable. Agrees with :meth:`encode` without
        ``learn``."""
        t = type(value)
        if kind == NUMERIC and (t is float or (t is int and -MAX_INT <= value <= MAX_INT)):
            return None if value != value else value
        if kind == NOMINAL and (t is str or t is bool):
            return self.codes[col].get(value, self.unseen[col])
        if value is None:
            return None
        try:
            got, value = self.classify(self.names_by_kind[kind][col], value)
        except InputError:
            return None
        if got != kind:
            return None
        return value if kind == NUMERIC else self.codes[col].get(value, self.unseen[col])

    def check_room(self, n_new: int, what: str = "this example") -> None:
        """Raise :class:`InputError` naming ``max_features`` if ``n_new`` more features would
        pass it (the caller then registers nothing)."""
        if self.max_features is not None and len(self.names) + n_new > self.max_features:
            raise InputError(
                f"This model learns at most max_features={self.max_features} distinct features; it has "
                f"{len(self.names)} and {what} would add {n_new}."
            )

    def register(self, name: Hashable, kind: int) -> int:
        """Register ``name``, a feature not yet known, as ``kind`` (``NUMERIC`` or ``NOMINAL``)
        and return its id; the caller has checked there is room (:meth:`check_room`)."""
        fid, name = len(self.names), plain_name(name)
        self.plan = None  # another feature: the plan is made again on first use
        self.names_by_kind[kind].append(name)
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
            self.other.append(0)
            self.unseen.append(-1)
        return fid

    def feature_of(self, kind: int, col: int) -> Hashable:
        """The name of the feature at column ``col`` of its kind."""
        return self.names_by_kind[kind][col]

    def feature_keys(self) -> np.ndarray:
        """A 63-bit key per feature, numeric columns then nominal ones: a hash (BLAKE2b) of its
        kind and name, the same in every process and whatever order features arrived in."""
        keys = [
            int.from_bytes(
                hashlib.blake2b(f"{kind}:{type(name).__name__}:{name}".encode(), digest_size=8).digest(), "big"
            )
            >> 1
            for kind in (NUMERIC, NOMINAL)
            for name in self.names_by_kind[kind]
        ]
        return np.array(keys, dtype=np.int64)

    # -- persistence --------------------------------------------------------------------
    def to_state(self) -> dict[str, Any]:
        """The registry as JSON data; ``other`` (per nominal column, the examples whose value
        took its other code) only when one did, so a registry without a bound hit writes what
        it wrote before the bound existed."""
        state = {
            "nominal_features": sorted(self.nominal_features, key=repr),
            "names": list(self.names),
            "kinds": list(self.kinds),
            "values": [list(v) for v in self.values],
        }
        if any(self.other):
            state["other"] = list(self.other)
        return state

    @classmethod
    def from_state(
        cls, state: Mapping[str, Any], max_features: int | None = None, max_categories: int | None = None
    ) -> FeatureRegistry:
        reg = cls([plain_name(n) for n in state["nominal_features"]], max_features, max_categories)
        names, kinds = state["names"], state["kinds"]
        if len(names) != len(kinds) or not all(k in (NUMERIC, NOMINAL) for k in kinds):
            raise ValueError(f"registry: {len(names)} names and kinds {kinds!r}, not one NUMERIC or NOMINAL a name")
        if max_features is not None and len(names) > max_features:
            raise ValueError(f"registry: {len(names)} features, more than max_features={max_features}")
        for name, kind in zip(names, kinds):
            if not saveable(plain_name(name)) or plain_name(name) in reg.index:
                raise ValueError(f"registry: feature {name!r} not a name or more than once")
            reg.register(name, int(kind))
        if len(state["values"]) != reg.n_nominal:
            raise ValueError(f"registry: values of {len(state['values'])} nominal features, not {reg.n_nominal}")
        other = state.get("other") or [0] * len(reg.values)
        for col, values in enumerate(state["values"]):
            if not all(map(saveable, values)) or len({plain(v) for v in values}) != len(values):
                raise ValueError(
                    f"registry: a value of feature {reg.names_by_kind[NOMINAL][col]!r} not a value or twice"
                )
            reg.values[col] = list(values)
            reg.codes[col] = {v: i for i, v in enumerate(values)}
            reg.max_values = max(reg.max_values, len(values))
            reg.other[col] = n = int(other[col])
            if n:  # the column has its other code, right after its values
                reg.unseen[col] = len(values)
                reg.max_values = max(reg.max_values, len(values) + 1)
        return reg
