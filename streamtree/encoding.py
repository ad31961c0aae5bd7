"""Learning a batch at once, giving exactly the model that one example at a time gives.

``learn_one`` does, for each example in order: register its class and features, route it,
add 1 to its class count at every node of its path, add it to its leaf's split statistics,
attempt a split when the leaf has seen ``grace_period`` examples since its last attempt, and
refit the smoothing every ``refit_every`` examples.

Here the batch is routed once and cut into chunks at the only moments that change anything
for later examples: a leaf's split attempt (a heap knows which row triggers each), a refit,
and the first example of a new class. Each chunk's counts and statistics are added with
``np.add.at`` in row order, so every floating-point sum sees the same additions in the same
order as one example at a time; after a split, only the rows waiting at the split leaf are
routed on.

With the naive-Bayes factor on, every ``SAMPLE_EVERY``-th row is scored before it is
learned, at the start of a chunk. With change detection on, each row's error (computed from
its leaf's counts as they stand before the row, rows of the same chunk included) feeds the
detector in order, and a detected change ends the chunk at its row. While a background tree is compared with the tree, rows go
one at a time (both trees score each row before learning it); after the background tree
replaces the tree, the remaining rows are routed in the new tree.
"""

from __future__ import annotations

import copy
import heapq
import math
from collections.abc import Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from streamtree.exceptions import InputError
from streamtree.features import _INFINITE, NOMINAL, NUMERIC, EncodedRow, FeatureRegistry
from streamtree.naive_bayes import SAMPLE_EVERY

if TYPE_CHECKING:
    from streamtree.tree import ProbabilityTree

__all__ = ["encode_batch", "encode_for_prediction", "encode_one", "learn_encoded"]

_NEVER = 1 << 62


def _as_batch(X: Any) -> tuple[int, list[tuple[Hashable, np.ndarray]] | None]:
    """Row count and ``(name, values)`` per column for column-shaped inputs (``None`` for a
    list of dicts); raises :class:`InputError` for anything else."""
    if isinstance(X, pd.DataFrame):
        return len(X), [(name, X[name].to_numpy()) for name in X.columns]
    if isinstance(X, np.ndarray):
        if X.ndim != 2:
            raise InputError(f"X must be 2-dimensional. Got an array of shape {X.shape} instead.", field="X")
        return X.shape[0], [(j, X[:, j]) for j in range(X.shape[1])]
    if isinstance(X, Sequence) and not isinstance(X, (str, bytes)):
        return len(X), None
    raise InputError(
        f"X must be a pandas DataFrame, a 2-D numpy array or a list of dicts. Got {type(X).__name__} instead.",
        field="X",
    )


def encode_batch(
    registry: FeatureRegistry, X: Any
) -> tuple[FeatureRegistry, np.ndarray, np.ndarray, dict[int, float]]:
    """Validate and encode a batch against a copy of ``registry``.

    Returns the updated copy (features and values registered in order of first appearance,
    row by row, as one example at a time would), the numeric matrix (NaN missing), the
    nominal code matrix (-1 missing), and the first value of every new numeric column.
    Raises :class:`InputError` for a bad value, leaving ``registry`` untouched.
    """
    reg = copy.deepcopy(registry)
    n, columns = _as_batch(X)
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
    """Numeric (NaN missing) and nominal code (-1 missing or unseen) matrices for prediction,
    with :meth:`FeatureRegistry.encode` semantics without ``learn``: unknown features are
    ignored and unusable values count as missing. Registers nothing."""
    n, columns = _as_batch(X)
    if columns is None:
        return _fill(registry, [registry.encode(x, learn=False) for x in X])
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
    value_of, codes_of = registry.value_of, registry.codes
    values = []
    for c, name in enumerate(numeric):
        v = x.get(name)
        t = type(v)
        if not (t is float or t is int):
            v = None if v is None else value_of(NUMERIC, c, v)
        values.append(math.nan if v is None or v in _INFINITE else float(v))
    codes = []
    for c, name in enumerate(nominal):
        v = x.get(name)
        t = type(v)
        code = codes_of[c].get(v, -1) if t is str or t is bool else (None if v is None else value_of(NOMINAL, c, v))
        codes.append(-1 if code is None else int(code))
    return values, codes


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
            if fid is not None and reg.kinds[fid] != NUMERIC and present.any():
                raise InputError(
                    f"Feature {name!r} is nominal (str or bool) in this model. Got {values[np.argmax(present)]!r} instead.",
                    field=name,
                )
            encoded.append((int(np.argmax(present)) if present.any() else n, name, NUMERIC, vals))
            continue
        classified = [reg._classify(name, value) for value in values.tolist()]
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
            encoded.append((first, name, NOMINAL, np.array([v if k is not None else None for k, v in classified], dtype=object)))
    # register new features in order of first appearance (ties: column order), as row by row
    for first, name, kind, _ in sorted(encoded, key=lambda e: e[0]):
        if first < n and name not in reg.index:
            reg._register(name, kind)
    num = np.full((n, reg.n_numeric), np.nan)
    nom = np.full((n, reg.n_nominal), -1, dtype=np.int64)
    for _first, name, kind, values in encoded:
        if name not in reg.index:
            continue
        col = reg.cols[reg.index[name]]
        if kind == NUMERIC:
            num[:, col] = values
            continue
        codes_of, known = reg.codes[col], reg.values[col]
        codes = np.full(n, -1, dtype=np.int64)
        for i, value in enumerate(values.tolist()):
            if value is None:
                continue
            code = codes_of.get(value)
            if code is None:
                code = len(known)
                codes_of[value] = code
                known.append(value)
                reg.max_values = max(reg.max_values, code + 1)
            codes[i] = code
        nom[:, col] = codes
    return num, nom


class _Triggers:
    """Which row triggers each leaf's next split attempt, earliest first."""

    def __init__(self, model: ProbabilityTree, num: np.ndarray, nom: np.ndarray, nodes: np.ndarray, first: int = 0) -> None:
        self.model = model
        self.num, self.nom = num, nom
        self.heap: list[tuple[int, int]] = []
        self.rows: dict[int, np.ndarray] = {}  # leaf -> its rows in the batch from ``first``, in order
        rows = np.arange(first, nodes.shape[0])
        self._add_rows(nodes[rows], rows)

    def _add_rows(self, nodes: np.ndarray, rows: np.ndarray) -> None:
        order = np.argsort(nodes, kind="stable")
        cuts = np.flatnonzero(np.diff(nodes[order])) + 1
        for group in np.split(order, cuts):
            node = int(nodes[group[0]])
            if self.model._slot[node] >= 0:
                self.rows[node] = rows[group]
                self._push(node, after=-1)

    def _push(self, node: int, after: int) -> None:
        """Schedule ``node``'s next attempt among its rows after position ``after``."""
        stats = self.model._stats
        slot = self.model._slot[node]
        need = max(math.ceil(self.model.grace_period - (stats.seen[slot] - stats.last_attempt[slot])), 1)
        rows = self.rows[node]
        i = int(np.searchsorted(rows, after, side="right")) + need - 1
        if i < rows.size:
            heapq.heappush(self.heap, (int(rows[i]), node))

    def next(self) -> tuple[int, int]:
        """``(row, leaf)`` of the earliest attempt still due, ``(_NEVER, -1)`` if none."""
        while self.heap:
            row, node = self.heap[0]
            if node in self.rows:
                return row, node
            heapq.heappop(self.heap)
        return _NEVER, -1

    def attempted(self, node: int, row: int, nodes: np.ndarray) -> None:
        """After ``node``'s attempt at ``row``: reschedule it, or route its later rows on."""
        heapq.heappop(self.heap)
        model = self.model
        later = self.rows.pop(node)
        if model.growth_stopped:
            self.rows.clear()
            self.heap.clear()
        elif model._kind[node] < 0:  # still a leaf: next attempt grace rows later
            self.rows[node] = later
            self._push(node, after=row)
        else:
            later = later[later > row]
            if later.size:
                nodes[later] = model._route_matrix(self.num[later], self.nom[later], node)
                self._add_rows(nodes[later], later)


def learn_encoded(model: ProbabilityTree, num: np.ndarray, nom: np.ndarray, labels: Sequence[Any]) -> None:
    """Learn encoded rows in order; see the module docstring."""
    n = len(labels)
    if n == 0:
        return
    nodes = model._route_matrix(num, nom, 0)
    known = model._class_index
    new_class_rows: list[int] = []
    firsts: set[Any] = set()
    for i, label in enumerate(labels):
        if label not in known and label not in firsts:
            firsts.add(label)
            new_class_rows.append(i)
    ks = np.array([known.get(label, -1) for label in labels], dtype=np.int64)
    label_array = np.array(labels, dtype=object)
    triggers = _Triggers(model, num, nom, nodes)
    i = next_new = 0
    while i < n:
        if next_new < len(new_class_rows) and new_class_rows[next_new] == i:
            label = labels[i]
            ks[i:][label_array[i:] == label] = model._class_id(label)
            next_new += 1
        class_end = new_class_rows[next_new] - 1 if next_new < len(new_class_rows) else n - 1
        refit_row = i + model.refit_every - model.n_examples % model.refit_every - 1
        trigger_row, trigger_node = triggers.next()
        end = min(class_end, refit_row, trigger_row)
        if model._nb is not None:
            end = min(end, _score_for_factor(model, num, nom, nodes, ks, i))
        drift = model._drift
        background = model._background
        detected = False
        if drift is not None:
            if background is not None:  # both trees score each row before learning it
                end = i
                leaf = background._route_matrix(num[i : i + 1], nom[i : i + 1], 0)[0]
                model._compare(_path(model, int(nodes[i])), _path(background, int(leaf)), num[i].tolist(), nom[i].tolist(), int(ks[i]))
            end, detected = _detect(model, nodes, ks, i, end)
        _apply(model, num, nom, nodes, ks, i, end)
        if background is not None:
            learn_encoded(background, num[i : i + 1], nom[i : i + 1], labels[i : i + 1])
        if end == trigger_row:
            model._attempt_split(trigger_node)
            triggers.attempted(trigger_node, end, nodes)
        if end == refit_row:
            model._refit()
        if drift is not None:
            swaps = drift.n_swaps
            model._watch(detected)
            if drift.n_swaps != swaps and end + 1 < n:  # a new tree: route the rest in it
                nodes[end + 1 :] = model._route_matrix(num[end + 1 :], nom[end + 1 :], 0)
                triggers = _Triggers(model, num, nom, nodes, first=end + 1)
        i = end + 1


def _score_for_factor(model: ProbabilityTree, num: np.ndarray, nom: np.ndarray, nodes: np.ndarray, ks: np.ndarray, i: int) -> int:
    """Score row ``i`` for the naive-Bayes factor if ``learn_one`` would (every
    ``SAMPLE_EVERY``-th example, before it is learned); returns the last row the chunk may
    reach, so that the next scored row starts a chunk of its own."""
    nb = model._nb
    assert nb is not None
    scored_row = i + (SAMPLE_EVERY - 1 - model.n_examples % SAMPLE_EVERY)
    if scored_row == i:
        nb.score(model._smoothed(_path(model, int(nodes[i]))), nb.row_loglik(num[i].tolist(), nom[i].tolist(), len(model.classes_)), int(ks[i]))
        scored_row += SAMPLE_EVERY
    return scored_row - 1


def _path(model: ProbabilityTree, node: int) -> list[int]:
    """Root-to-``node`` path."""
    path = [node]
    parent = model._parent
    while parent[node] >= 0:
        node = parent[node]
        path.append(node)
    return path[::-1]


def _detect(model: ProbabilityTree, nodes: np.ndarray, ks: np.ndarray, i: int, end: int) -> tuple[int, bool]:
    """Feed rows ``i..end``'s errors to the detector in order, each from its leaf's counts as
    ``learn_one`` would see them (earlier rows of the chunk added one by one, as floats);
    returns the row the chunk must end at and whether a change was detected there."""
    drift = model._drift
    assert drift is not None
    n_classes = len(model.classes_)
    leaf_counts: dict[int, list[float]] = {}
    for r in range(i, end + 1):
        node, k = int(nodes[r]), int(ks[r])
        row = leaf_counts.get(node)
        if row is None:
            row = leaf_counts[node] = model.counts_[node, :n_classes].tolist()
        error = drift.error(row, k)
        row[k] += 1.0
        if drift.error_rose(error):
            return r, True
    return end, False


def _apply(
    model: ProbabilityTree, num: np.ndarray, nom: np.ndarray, nodes: np.ndarray, ks: np.ndarray, i: int, end: int
) -> None:
    """Add rows ``i..end`` (already routed) to the counts of their paths and their leaves."""
    node = nodes[i : end + 1]
    k = ks[i : end + 1]
    parent = model.parent_
    cur, kk = node, k
    while cur.size:  # every addend is 1.0, so the order of additions cannot change a sum
        np.add.at(model.counts_, (cur, kk), 1.0)
        up = parent[cur]
        keep = up >= 0
        cur, kk = up[keep], kk[keep]
    if model._nb is not None:
        model._nb.stats.update_many(np.zeros(node.shape[0], dtype=np.int64), k, num[i : end + 1], nom[i : end + 1])
    slots = np.asarray(model._slot, dtype=np.int64)[node]
    at_leaf = slots >= 0
    if at_leaf.any():
        rows = np.arange(i, end + 1)[at_leaf]
        model._stats.update_many(slots[at_leaf], k[at_leaf], num[rows], nom[rows])
    model.n_examples += end + 1 - i
