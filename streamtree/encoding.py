"""Encoding examples into the numeric and nominal matrices the kernels read.

A batch (a pandas DataFrame, a 2-D numpy array with features named 0, 1, ..., or a list of
dicts) becomes a float matrix ``num[row, column]`` (NaN: missing) and an int matrix
``nom[row, column]`` of nominal value codes (-1: missing, or unseen at prediction time by a
feature without an other code, :mod:`streamtree.features`), with
columns as the :class:`~streamtree.features.FeatureRegistry` numbers them. Learning registers
new features and values in order of first appearance, row by row, so a batch registers exactly
what the same rows one at a time would.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from streamtree.exceptions import InputError
from streamtree.features import EncodedRow, FeatureRegistry
from streamtree.values import INFINITE, MAX_INT, NOMINAL, NUMERIC, check_name

__all__ = ["encode_batch", "encode_for_prediction", "encode_one", "encode_row", "unseen_rows"]


#: Batches of dicts of at least this many rows are encoded column by column
#: (:meth:`FeatureRegistry.encode_known_many`: a fixed cost per feature, then less per feature
#: and row), smaller ones row by row (:meth:`FeatureRegistry.encode_known`): where the two
#: cross, ``docs/decisions/compiled-core.md``.
_BY_COLUMN = 128


def _as_batch(
    X: Any, registry: FeatureRegistry
) -> tuple[int, list[tuple[Hashable, np.ndarray]] | None, np.ndarray | None]:
    """Row count, ``(name, values)`` per column for column-shaped inputs (``None`` for a list
    of dicts), and the float matrix of those columns when the input is one (a DataFrame of
    numbers none declared nominal, under unique names, or a numeric array; else ``None``).
    Raises :class:`InputError` for anything else."""
    if isinstance(X, pd.DataFrame):
        if not X.columns.is_unique:
            twice = X.columns[X.columns.duplicated()][0]
            raise InputError(f"X has the column {twice!r} more than once; a feature is one column.", field="X")
        values = X.to_numpy()  # one array of the columns' common type (X.dtypes alone cost 15 us)
        if values.dtype.kind in "fiu" and registry.nominal_features.isdisjoint(X.columns):
            # numbers only, none declared nominal: one conversion, not a Series per column
            values = values.astype(np.float64, copy=False)
            return len(X), [(name, values[:, j]) for j, name in enumerate(X.columns)], values
        return len(X), [(name, X[name].to_numpy()) for name in X.columns], None
    if isinstance(X, np.ndarray):
        if X.ndim != 2:
            raise InputError(f"X must be 2-dimensional. Got an array of shape {X.shape} instead.", field="X")
        columns: list[tuple[Hashable, np.ndarray]] = [(j, X[:, j]) for j in range(X.shape[1])]
        numeric = X.dtype.kind in "fiu" and registry.nominal_features.isdisjoint(range(X.shape[1]))
        return X.shape[0], columns, X.astype(np.float64, copy=False) if numeric else None
    if isinstance(X, Sequence) and not isinstance(X, (str, bytes)):
        return len(X), None, None
    raise InputError(
        f"X must be a pandas DataFrame, a 2-D numpy array or a list of dicts. Got {type(X).__name__} instead.",
        field="X",
    )


def _numeric_targets(registry: FeatureRegistry, columns: list[tuple[Hashable, np.ndarray]]) -> list[int] | None:
    """For a matrix of numbers (:func:`_as_batch`), the numeric column each of its columns
    encodes into (-1: a feature the model does not know), or ``None`` when one is a known
    nominal feature (its numbers are values to look up, column by column)."""
    targets = []
    for name, _ in columns:
        fid = registry.index.get(name)
        if fid is None:
            targets.append(-1)
        elif registry.kinds[fid] == NUMERIC:
            targets.append(registry.cols[fid])
        else:
            return None
    return targets


def _numeric_matrix(registry: FeatureRegistry, matrix: np.ndarray, targets: list[int]) -> np.ndarray:
    """The numeric matrix of a batch of numbers whose columns go to ``targets`` (-1: left
    out), NaN where a value is missing or not finite; in one fancy assignment, not a pass per
    column (``docs/decisions/compiled-core.md``)."""
    n = matrix.shape[0]
    if targets == list(range(registry.n_numeric)):
        return np.array(matrix, dtype=np.float64, order="C")  # the registry's own order: a copy
    num = np.full((n, registry.n_numeric), np.nan)
    keep = [j for j, col in enumerate(targets) if col >= 0]
    num[:, [targets[j] for j in keep]] = matrix[:, keep]
    return num


def encode_batch(registry: FeatureRegistry, X: Any) -> tuple[FeatureRegistry, np.ndarray, np.ndarray, dict[int, float]]:
    """Validate and encode a batch against a copy of ``registry``.

    Returns the updated copy (features and values registered in order of first appearance,
    row by row, as one example at a time would), the numeric matrix (NaN missing), the
    nominal code matrix (-1 missing), and the first value of every new numeric column.
    Raises :class:`InputError` for a bad value, leaving ``registry`` untouched.
    """
    n, columns, matrix = _as_batch(X, registry)
    targets = _numeric_targets(registry, columns) if matrix is not None else None  # type: ignore[arg-type]
    if targets is not None and -1 not in targets and not np.isinf(matrix).any():  # type: ignore[arg-type]
        # numbers of known numeric features only: nothing to register or look up
        nom = np.full((n, registry.n_nominal), -1, dtype=np.int64)
        return registry, _numeric_matrix(registry, matrix, targets), nom, {}  # type: ignore[arg-type]
    if columns is None and n < _BY_COLUMN:  # dicts whose features and values are all known: nothing to register
        rows = [registry.encode_known(x) for x in X]
        if all(row is not None for row in rows):
            num = np.array([row[0] for row in rows], dtype=np.float64).reshape(n, registry.n_numeric)  # type: ignore[index]
            nom = np.array([row[1] for row in rows], dtype=np.int64).reshape(n, registry.n_nominal)  # type: ignore[index]
            return registry, num, nom, {}
    elif columns is None:
        known = registry.encode_known_many(X)
        if known is not None:
            return registry, known[0], known[1], {}
    reg = copy.deepcopy(registry)
    if columns is None:
        num, nom = _fill(reg, [reg.encode(x, learn=True) for x in X])
    else:
        num, nom = _encode_columns(reg, columns, n)
    first_values = {}
    for col in range(registry.n_numeric, reg.n_numeric):
        present = np.flatnonzero(~np.isnan(num[:, col]))
        first_values[col] = float(num[present[0], col])
    return reg, num, nom, first_values


def encode_for_prediction(registry: FeatureRegistry, X: Any) -> tuple[np.ndarray, np.ndarray]:
    """Numeric (NaN missing) and nominal code (-1 missing or unseen; an unseen value of a
    feature with an other code gets that code) matrices for prediction,
    with :meth:`FeatureRegistry.encode` semantics without ``learn``: unknown features are
    ignored and unusable values count as missing. Registers nothing."""
    n, columns, matrix = _as_batch(X, registry)
    if columns is None:
        return _fill(registry, [registry.encode(x, learn=False) for x in X])
    targets = _numeric_targets(registry, columns) if matrix is not None else None
    if targets is not None:  # numbers, none for a nominal feature: one assignment
        num = _numeric_matrix(registry, matrix, targets)  # type: ignore[arg-type]
        finite = np.isfinite(num)
        if not finite.all():
            num[~finite] = np.nan  # an infinite value is unusable: missing, as one at a time
        return num, np.full((n, registry.n_nominal), -1, dtype=np.int64)
    num = np.full((n, registry.n_numeric), np.nan)
    nom = np.full((n, registry.n_nominal), -1, dtype=np.int64)
    for name, values in columns:
        fid = registry.index.get(name)
        if fid is None:
            continue
        kind, col = registry.kinds[fid], registry.cols[fid]
        if kind == NUMERIC and values.dtype.kind in "fiu":
            vals = values.astype(np.float64)
            num[:, col] = np.where(np.isfinite(vals), vals, np.nan)
            continue
        out = num if kind == NUMERIC else nom
        for i, value in enumerate(values.tolist()):
            v = registry.value_of(kind, col, value)
            if v is not None and (kind == NOMINAL or math.isfinite(v)):
                out[i, col] = v
    return num, nom


def encode_one(registry: FeatureRegistry, x: Mapping[Hashable, Any]) -> tuple[list[float], list[int]]:
    """One example's values and codes by column (NaN and -1 where missing, unusable or
    unseen), as :func:`encode_for_prediction` reads them; only the model's features are read."""
    numeric, nominal = registry.names_by_kind
    value_of, codes_of, unseen = registry.value_of, registry.codes, registry.unseen
    values = []
    for c, name in enumerate(numeric):
        v: Any = x.get(name)
        t = type(v)
        if not (t is float or (t is int and -MAX_INT <= v <= MAX_INT)):
            v = None if v is None else value_of(NUMERIC, c, v)
        values.append(math.nan if v is None or v in INFINITE else float(v))
    codes = []
    for c, name in enumerate(nominal):
        v = x.get(name)
        t = type(v)
        code: float | int | None
        if t is str or t is bool:
            code = codes_of[c].get(v, unseen[c])
        else:
            code = None if v is None else value_of(NOMINAL, c, v)
        codes.append(-1 if code is None else int(code))
    return values, codes


def encode_row(registry: FeatureRegistry, row: EncodedRow) -> tuple[np.ndarray, np.ndarray]:
    """One registered example as ``(1, n_numeric)`` and ``(1, n_nominal)`` matrices (lists
    first: one conversion each is cheaper than numpy's fancy assignment for one row)."""
    values = [math.nan] * registry.n_numeric
    for col, value in zip(row.num_cols, row.num_vals):
        values[col] = value
    codes = [-1] * registry.n_nominal
    for col, code in zip(row.nom_cols, row.nom_codes):
        codes[col] = code
    return np.array([values], dtype=np.float64), np.array([codes], dtype=np.int64)


def _fill(registry: FeatureRegistry, rows: list[EncodedRow]) -> tuple[np.ndarray, np.ndarray]:
    """The numeric and nominal matrices of encoded rows, filled with one assignment each."""
    num = np.full((len(rows), registry.n_numeric), np.nan)
    nom = np.full((len(rows), registry.n_nominal), -1, dtype=np.int64)
    r_num: list[int] = []
    c_num: list[int] = []
    v_num: list[float] = []
    r_nom: list[int] = []
    c_nom: list[int] = []
    v_nom: list[int] = []
    for i, row in enumerate(rows):
        r_num.extend([i] * len(row.num_cols))
        c_num.extend(row.num_cols)
        v_num.extend(row.num_vals)
        r_nom.extend([i] * len(row.nom_cols))
        c_nom.extend(row.nom_cols)
        v_nom.extend(row.nom_codes)
    num[r_num, c_num] = v_num
    nom[r_nom, c_nom] = v_nom
    return num, nom


def _encode_columns(
    reg: FeatureRegistry, columns: list[tuple[Hashable, np.ndarray]], n: int
) -> tuple[np.ndarray, np.ndarray]:
    """Column-wise encoding: vectorised for numeric columns, value by value otherwise."""
    encoded: list[tuple[int, Hashable, int, np.ndarray]] = []  # (first row, name, kind, values)
    for name, values in columns:
        fid = reg.index.get(name)
        if values.dtype.kind in "fiu" and name not in reg.nominal_features:
            vals = values.astype(np.float64)
            bad = np.isinf(vals)
            if bad.any():
                raise InputError(
                    f"Feature {name!r} must be a finite number. Got {values[np.argmax(bad)]!r} instead.", field=name
                )
            present = ~np.isnan(vals)
            if fid is not None and reg.kinds[fid] != NUMERIC:
                if present.any():
                    raise InputError(
                        f"Feature {name!r} is nominal (str or bool) in this model. "
                        f"Got {values[np.argmax(present)]!r} instead.",
                        field=name,
                    )
                continue  # all missing (a chunk's empty column of a nominal feature reads as NaN)
            encoded.append((int(np.argmax(present)) if present.any() else n, name, NUMERIC, vals))
            continue
        classified = [reg.classify(name, value) for value in values.tolist()]
        kind = reg.kinds[fid] if fid is not None else next((k for k, _ in classified if k is not None), None)
        for k, value in classified:
            if k is not None and k != kind:
                expected = "numeric" if kind == NUMERIC else "nominal (str or bool)"
                raise InputError(f"Feature {name!r} is {expected} in this model. Got {value!r} instead.", field=name)
        first = next((i for i, (k, _) in enumerate(classified) if k is not None), n)
        if kind == NUMERIC:
            vals = np.array([np.nan if k is None else v for k, v in classified], dtype=np.float64)
            encoded.append((first, name, NUMERIC, vals))
        else:
            encoded.append(
                (first, name, NOMINAL, np.array([v if k is not None else None for k, v in classified], dtype=object))
            )
    # register new features in order of first appearance (ties: column order), as row by row
    new = [name for first, name, _, _ in encoded if first < n and name not in reg.index]
    for name in new:
        check_name(name)
    reg.check_room(len(new), "this batch")
    for first, name, kind, _ in sorted(encoded, key=lambda e: e[0]):
        if first < n and name not in reg.index:
            reg.register(name, kind)
    num = np.full((n, reg.n_numeric), np.nan)
    nom = np.full((n, reg.n_nominal), -1, dtype=np.int64)
    for _first, name, kind, values in encoded:
        if name not in reg.index:
            continue
        col = reg.cols[reg.index[name]]
        if kind == NUMERIC:
            num[:, col] = values
            continue
        codes_of = reg.codes[col]
        codes = np.full(n, -1, dtype=np.int64)
        for i, value in enumerate(values.tolist()):
            if value is None:
                continue
            code = codes_of.get(value)
            codes[i] = reg.learn_code(col, value) if code is None else code
        nom[:, col] = codes
    return num, nom


def unseen_rows(before: FeatureRegistry, num: np.ndarray, nom: np.ndarray) -> dict[int, tuple[list[int], list[int]]]:
    """The rows of a batch (its values ``num`` and codes ``nom``, encoded with ``before`` and
    registering) at which a feature or a value comes for the first time, each with the
    numeric and nominal columns that :meth:`FeatureRegistry.encode` without ``learn``, with
    the registry ``before`` the row, would not give as encoded: a new feature is ignored
    there (its column is missing), and an unseen value is -1 (or the feature's other code,
    once it has one: then it is coded so at learning too). From the next row on they are
    registered."""
    rows: dict[int, tuple[list[int], list[int]]] = {}
    for col in range(before.n_numeric, num.shape[1]):  # a new numeric feature: at its first row
        present = np.flatnonzero(~np.isnan(num[:, col]))
        if present.size:
            rows.setdefault(int(present[0]), ([], []))[0].append(col)
    for col in range(nom.shape[1]):
        known = len(before.values[col]) if col < before.n_nominal else 0
        codes = nom[:, col]
        new = codes >= known  # -1 (missing) never is
        if not new.any():  # the steady state: one comparison per column
            continue
        unseen = before.unseen[col] if col < before.n_nominal else -1
        fresh = np.flatnonzero(new)
        for r in fresh[np.unique(codes[fresh], return_index=True)[1]]:
            if codes[r] != unseen:
                rows.setdefault(int(r), ([], []))[1].append(col)
    return rows
