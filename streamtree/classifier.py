"""The river/numpy/pandas face shared by streamtree's models: learning and prediction over
encoded rows.

:class:`Classifier` turns examples (mappings, DataFrames, arrays) into the encoded rows of
:mod:`streamtree.encoding`, checks labels, and hands the rows to the model's ``_learn`` and
``_predict``; :class:`~streamtree.tree.ProbabilityTree` and
:class:`~streamtree.forest.ProbabilityForest` differ only in those two.
"""

from __future__ import annotations

import copy
import numbers
from collections.abc import Hashable, Mapping
from collections.abc import Set as AbstractSet
from typing import Any, Literal, overload

import numpy as np
import pandas as pd
from river import base

from streamtree import decision, growth
from streamtree.decision import CostMatrix, Costs, Decision, Decisions
from streamtree.encoding import encode_batch, encode_for_prediction, encode_one, encode_row, unseen_rows
from streamtree.exceptions import ConfigError, InputError
from streamtree.features import FeatureRegistry
from streamtree.row_plan import Read, RowPlan, one_row
from streamtree.typing import ClassLabel, FloatArray
from streamtree.values import check_mapping

__all__ = ["Classifier", "check_label", "check_labels"]


def check_label(y: Any) -> ClassLabel:
    """A label as the models keep it (str, int or bool); :class:`InputError` naming ``label``
    for anything else."""
    t = type(y)
    if t is str or t is int or t is bool:  # the common case, without the ABC checks below
        return y  # type: ignore[no-any-return]
    if isinstance(y, np.generic):
        y = y.item()
    if isinstance(y, (bool, str)):
        return y
    if isinstance(y, numbers.Integral):
        return int(y)
    if isinstance(y, float) and y.is_integer():
        return int(y)
    raise InputError(f"The label must be a str, an int or a bool. Got {y!r} instead.", field="label")


_PLAIN_LABELS = frozenset({str, int, bool})


def _rows(X: Any, start: int, stop: int) -> Any:
    """Rows ``start:stop`` of a batch (a DataFrame, a 2-D array or a sequence of mappings)."""
    return X.iloc[start:stop] if isinstance(X, pd.DataFrame) else X[start:stop]


def _joined(bounds: list[int], parts: list[FloatArray]) -> FloatArray:
    """The prequential predictions of the parts of a batch (part ``i`` its rows from
    ``bounds[i]``) as one array, in the columns of the last part's classes (0 for a class not
    seen yet at a row)."""
    out = np.zeros((bounds[-1], parts[-1].shape[1]))
    for a, part in zip(bounds, parts):
        out[a : a + part.shape[0], : part.shape[1]] = part
    return out


def check_labels(y: Any) -> list[ClassLabel]:
    """:func:`check_label` of each label of a batch: one label per row, in row order (a
    sequence, a 1-D numpy array or a pandas Series); a batch of plain labels (the common case)
    is checked by the set of its types alone. :class:`InputError` naming ``y`` for anything
    else: a DataFrame (it iterates its column names), an array of more than one dimension, an
    unordered collection (a set: which row gets which label would depend on the hash seed)."""
    if isinstance(y, pd.DataFrame):
        raise InputError(
            "y must be one label per row (a list, 1-D numpy array or pandas Series), not a DataFrame: "
            f"select its label column, df[name]. Got a DataFrame of {y.shape[1]} column(s) instead.",
            field="y",
        )
    if isinstance(y, (str, bytes, Mapping, AbstractSet)) or not hasattr(y, "__iter__"):
        unordered = " (unordered)" if isinstance(y, AbstractSet) else ""
        raise InputError(
            "y must be a sequence of labels in row order (a list, numpy array or pandas Series). "
            f"Got {type(y).__name__}{unordered} instead.",
            field="y",
        )
    ndim = getattr(y, "ndim", 1)
    if ndim != 1:
        raise InputError(
            "y must be one-dimensional, one label per row. "
            f"Got a {type(y).__name__} of shape {tuple(np.shape(y))} instead.",
            field="y",
        )
    labels = y.tolist() if hasattr(y, "tolist") else list(y)
    dtype = getattr(y, "dtype", None)
    if isinstance(dtype, np.dtype) and dtype.kind in "biu":  # numpy's bools and ints: Python's, by tolist
        return labels  # type: ignore[no-any-return]
    if set(map(type, labels)) <= _PLAIN_LABELS:
        return labels  # type: ignore[no-any-return]
    return [check_label(v) for v in labels]


class Classifier(base.MiniBatchClassifier):
    """Learning and prediction over encoded rows; a model provides the rest.

    A subclass holds ``registry`` (a :class:`~streamtree.features.FeatureRegistry`),
    ``classes_`` (labels in order of first appearance) and implements

    - ``_learn(num, nom, labels, first_values, want_proba)``: learn encoded, validated rows in
      order (returning the prequential predictions when asked), and
    - ``_predict(num, nom)``: the ``(n, len(classes_))`` probabilities of encoded rows.
    """

    registry: FeatureRegistry
    classes_: list[ClassLabel]
    class_index: dict[ClassLabel, int]
    #: Whether :meth:`learn_many` refuses a batch past the memory budget (``max_bytes``); set
    #: False to replay a log written by a version that did not refuse it (its events must all be
    #: learned again: growth still stops for the budget). Not part of the model's state.
    refuse_past_budget: bool = True
    #: The last predicted dict, the row plan that read it and what it read
    #: (read again by :meth:`learn_one`); not part of the model (left out of copies and pickles).
    _last_row: tuple[Any, RowPlan, Read] | None = None

    def __getstate__(self) -> dict[str, Any]:
        """Pickling and deep copies leave out the last prediction's row (it holds the caller's dict)."""
        state = self.__dict__.copy()
        state.pop("_last_row", None)
        return state

    def _learn(
        self,
        num: np.ndarray,
        nom: np.ndarray,
        labels: list[ClassLabel],
        first_values: dict[int, float],
        want_proba: bool,
    ) -> FloatArray | None:
        raise NotImplementedError

    def _predict(self, num: np.ndarray, nom: np.ndarray) -> FloatArray:
        raise NotImplementedError

    def _check_budget(self, shapes: tuple[int, int, int, int]) -> None:
        """Refuse (:class:`InputError` naming ``max_bytes``) before anything changes when the
        model's arrays, fitted to ``shapes`` (classes, numeric and nominal columns, value
        codes), would pass its memory budget even with growth stopped. A model with a budget
        implements it."""

    def _check_new_class(self) -> None:
        """:meth:`_check_budget` of one more class, the features and values as they are."""
        reg = self.registry
        self._check_budget((len(self.classes_) + 1, reg.n_numeric, reg.n_nominal, reg.max_values))

    @property
    def _multiclass(self) -> bool:
        return True

    # -- learning -----------------------------------------------------------------------
    def learn_one(self, x: Mapping[Hashable, Any], y: ClassLabel, w: float = 1) -> None:
        """Learn one labelled example. Raises :class:`InputError` and changes nothing when the
        label or a feature value cannot be used, or when its new class, features or values
        would take the model's arrays past ``max_bytes`` even with growth stopped.

        ``w`` is river's sample weight: only 1 is taken (examples are not weighted), and
        being in the signature, a river pipeline hands it over rather than dropping it."""
        if w.__class__ is not int or w != 1:
            _check_unit_weight(w)
        t = type(y)
        if not (t is str or t is int or t is bool):  # check_label's common case, without its call
            y = check_label(y)
        reg = self.registry
        # test-then-train: x was encoded a moment ago, by the last predict_proba_one. Its row is
        # x's when x is that very dict, the registry's row plan is the one that read it (no
        # feature registered since) and x still holds the very objects it read
        # (RowPlan.unchanged): registered features and codes never change.
        last = self._last_row
        if last is not None and last[0] is x and last[1] is reg.plan and last[1].unchanged(x, last[2]):
            read = last[2]
            if y not in self.class_index:  # a new class: within the memory budget?
                self._check_new_class()
            self._learn_one(read[2], read[3], y)
            return
        row = reg.encode_known_row(x)  # the steady state: nothing new to validate or register
        if row is not None:
            if y not in self.class_index:
                self._check_new_class()
            self._learn_one(row[0], row[1], y)
            return
        k = len(self.classes_) + (y not in self.class_index)
        n_numeric = reg.n_numeric
        # validates, then checks the budget at the sizes x would give, before it registers anything
        encoded = reg.encode(x, learn=True, check=lambda sizes: self._check_budget((k, *sizes)))
        num, nom = encode_row(reg, encoded)
        first_values = {c: v for c, v in zip(encoded.num_cols, encoded.num_vals) if c >= n_numeric}
        self._learn(num, nom, [y], first_values, want_proba=False)

    def clone(self, new_params: dict[str, Any] | None = None, include_attributes: bool = False) -> Any:
        """A new model of the same parameters (river's ``clone``); with ``include_attributes``,
        a copy of this one as it has learned (:func:`copy.deepcopy`: one copy keeps what the
        model shares within itself, a forest's one registry and classes for all members)."""
        if not include_attributes:
            return super().clone(new_params)
        if new_params:
            raise ConfigError(
                "A learned model's state was built under its own parameters: clone(new_params) "
                "starts a new model, clone(include_attributes=True) copies this one. "
                f"Got both (new_params={sorted(new_params)}).",
                param="new_params",
            )
        return copy.deepcopy(self)

    def _learn_one(self, num: np.ndarray, nom: np.ndarray, y: ClassLabel) -> None:
        """Learn one event of registered features (its ``(1, n)`` values and codes, built by
        this class, so at the loop's compiled entry point)."""
        self._learn(num, nom, [y], {}, want_proba=False)

    @overload
    def learn_many(self, X: Any, y: Any, *, return_proba: Literal[False] = False) -> None: ...

    @overload
    def learn_many(self, X: Any, y: Any, *, return_proba: Literal[True]) -> FloatArray: ...

    def learn_many(self, X: Any, y: Any, *, return_proba: bool = False) -> FloatArray | None:
        """Learn a batch: exactly the model that :meth:`learn_one` on each row in order gives.

        ``X`` is a pandas DataFrame, a 2-D numpy array (features named 0, 1, ...) or a list of
        dicts. The whole batch is validated first: a bad value raises :class:`InputError` and
        nothing of the batch is learned.

        With ``return_proba=True`` it returns the prequential (test-then-train) predictions:
        row ``i`` is what :meth:`predict_proba_one` gave for ``X[i]`` just before it was
        learned, in columns following :attr:`classes_` as they are after the batch (0 for a
        class the model had not seen yet at that row).
        """
        labels, (registry, num, nom, first_values), new = self._checked(X, y)
        if self.registry.n_numeric == 0 < registry.n_numeric:
            first = int(np.flatnonzero(~np.isnan(num).all(axis=1))[0])
            if first > 0:  # the model's first numeric feature comes at row `first`: learn_one
                # learns the rows before it without a numeric column (so without the linear
                # component), and so must the batch: in two parts, the whole already checked
                return self._learn_parts(X, labels, [first], return_proba)
        if new or registry is not self.registry:  # the arrays grow: where would learn_one fit them?
            old = self.registry
            cuts = growth.capacity_cuts(
                (old.n_numeric, old.n_nominal, old.max_values), num, nom, self._n_classes(labels, new)
            )
            if cuts:  # learn_one may stop growth at any of them (growth.fit_within): so must the batch
                return self._learn_parts(X, labels, cuts, return_proba)
        old = self.registry
        # the batch is accepted (labels, values and lengths all checked): only now does the model
        # take the batch's registry, which _learn needs (its new columns' first values, make_room)
        self.registry = registry
        if return_proba and registry is not old:
            # the loop predicts each row with the batch's codes, where predict_proba_one, before
            # the row, saw a feature or value new at that row as unseen: such rows are predicted
            # as it would, each first in a part of the batch
            unseen = unseen_rows(old, num, nom)
            if unseen:
                return self._learn_predicting(num, nom, labels, first_values, unseen)
        return self._learn(num, nom, labels, first_values, want_proba=return_proba)

    def _learn_predicting(
        self,
        num: np.ndarray,
        nom: np.ndarray,
        labels: list[ClassLabel],
        first_values: dict[int, float],
        unseen: dict[int, tuple[list[int], list[int]]],
    ) -> FloatArray:
        """:meth:`_learn` with the prequential predictions of encoded rows, in parts each
        starting at a row of ``unseen`` (row -> its new numeric columns and nominal columns),
        predicted with those columns missing (NaN, -1) before it is learned: what
        :meth:`predict_proba_one` gave for it."""
        bounds = sorted({0, *unseen, len(labels)})
        parts = []
        for a, b in zip(bounds, bounds[1:]):
            before = None
            if a in unseen and self.classes_:
                num_row, nom_row = num[a : a + 1].copy(), nom[a : a + 1].copy()
                num_row[0, unseen[a][0]] = np.nan
                nom_row[0, unseen[a][1]] = -1
                before = self._predict(num_row, nom_row)[0]
            proba = self._learn(num[a:b], nom[a:b], labels[a:b], first_values if a == 0 else {}, want_proba=True)
            assert proba is not None
            if before is not None:
                proba[0] = 0.0
                proba[0, : before.shape[0]] = before
            parts.append(proba)
        return _joined(bounds, parts)

    def check_batch(self, X: Any, y: Any) -> None:
        """Raise :class:`InputError` where :meth:`learn_many` would refuse ``(X, y)`` (its
        labels, values, lengths, the memory budget), learning nothing: a caller that learns a
        batch in parts checks it whole first (the budget's refusal depends on the sizes alone,
        so no part of a batch that passes is refused)."""
        self._checked(X, y)

    def _checked(self, X: Any, y: Any) -> tuple[list[ClassLabel], Any, set[ClassLabel]]:
        """The checks :meth:`learn_many` makes before learning any of a batch: its labels, its
        encoding (``(registry, num, nom, first_values)`` on a copy of the registry) and its new
        labels, or :class:`InputError`."""
        labels = check_labels(y)
        encoded = encode_batch(self.registry, X)
        registry, num = encoded[0], encoded[1]
        if len(labels) != num.shape[0]:
            raise InputError(f"X and y must have the same length. Got {num.shape[0]} and {len(labels)}.", field="y")
        new = set(labels).difference(self.class_index)
        if self.refuse_past_budget:  # the whole batch within the memory budget
            self._check_budget(
                (len(self.classes_) + len(new), registry.n_numeric, registry.n_nominal, registry.max_values)
            )
        return labels, encoded, new

    def _n_classes(self, labels: list[ClassLabel], new: set[ClassLabel]) -> np.ndarray:
        """The number of classes after each row of a batch whose unknown labels are ``new``."""
        steps = np.zeros(len(labels), dtype=np.int64)
        seen: set[ClassLabel] = set()
        for i, label in enumerate(labels if new else ()):
            if label in new and label not in seen:
                seen.add(label)
                steps[i] = 1
        return len(self.classes_) + np.cumsum(steps)

    def _learn_parts(self, X: Any, labels: list[ClassLabel], cuts: list[int], want_proba: bool) -> FloatArray | None:
        """:meth:`learn_many` of the rows of a checked batch between ``cuts``, in order; the
        prequential predictions of all in the columns of :attr:`classes_` after the batch. No
        part is refused: the batch was checked whole, at sizes no part passes (the memory
        budget's refusal depends on the sizes alone: :func:`streamtree.growth.budget_error`)."""
        bounds = [0, *cuts, len(labels)]
        parts = [
            self.learn_many(_rows(X, a, b), labels[a:b], return_proba=want_proba)  # type: ignore[call-overload]
            for a, b in zip(bounds, bounds[1:])
        ]
        return _joined(bounds, parts) if want_proba else None

    # -- prediction ---------------------------------------------------------------------
    def predict_proba_one(self, x: Mapping[Hashable, Any], **kwargs: Any) -> dict[ClassLabel, float]:
        """Probability of every class seen so far (``{}`` before any label); each > 0."""
        classes = self.classes_
        reg = self.registry
        if type(x) is dict:
            if not classes:
                return {}
            plan = reg.plan or reg.row_plan()  # the registry's plan, made on first use
            read = plan.read_row(x)
            if read is not None:  # the steady state: the very values encode_one gives
                # kept for learn_one(x, y) right after (one tuple: a thread reads all of it or none)
                self._last_row = (x, plan, read)
                return dict(zip(classes, self._predict_one(read[2], read[3])))
            known = reg.encode_known_row_by_name(x)
        else:
            check_mapping(x)
            if not classes:
                return {}
            known = None
        num, nom = one_row(*encode_one(reg, x)) if known is None else known
        return dict(zip(classes, self._predict_one(num, nom)))

    def _predict_one(self, num: np.ndarray, nom: np.ndarray) -> list[float]:
        """The probabilities of one encoded event (built by this class), one per class."""
        return self._predict(num, nom)[0].tolist()  # type: ignore[no-any-return]

    def predict_one(self, x: Mapping[Hashable, Any], **kwargs: Any) -> ClassLabel | None:
        proba = self.predict_proba_one(x)
        return max(proba, key=proba.__getitem__) if proba else None

    def predict_proba(self, X: Any) -> FloatArray:
        """``(n, len(classes_))`` probabilities; columns follow :attr:`classes_`."""
        num, nom = encode_for_prediction(self.registry, X)
        if not self.classes_:
            return np.zeros((num.shape[0], 0))
        return self._predict(num, nom)

    def predict_proba_many(self, X: Any) -> pd.DataFrame:
        """:meth:`predict_proba` as a DataFrame indexed like ``X``, one column per class."""
        index = X.index if isinstance(X, pd.DataFrame) else None
        return pd.DataFrame(self.predict_proba(X), columns=list(self.classes_), index=index)

    def predict_many(self, X: Any) -> pd.Series:
        proba = self.predict_proba_many(X)
        if proba.shape[1] == 0:
            return pd.Series([None] * len(proba), index=proba.index, dtype=object)
        return proba.idxmax(axis=1)

    # -- decisions ----------------------------------------------------------------------
    def decide_one(self, x: Mapping[Hashable, Any], costs: Costs | CostMatrix) -> Decision:
        """The decision of least expected cost for ``x`` under ``costs`` (decision to
        ``{label: cost}``): :func:`streamtree.decide` on :meth:`predict_proba_one`. Raises
        :class:`~streamtree.exceptions.DecisionError` before any label (no probabilities)."""
        return decision.decide(self.predict_proba_one(x), costs)

    def decide_many(self, X: Any, costs: Costs | CostMatrix) -> Decisions:
        """:meth:`decide_one` for each row of ``X``, in one vectorised pass
        (:func:`streamtree.decide_many` on :meth:`predict_proba`)."""
        return decision.decide_many(self.predict_proba(X), costs, classes=self.classes_, check_input=False)


def _check_unit_weight(w: object) -> None:
    """Refuse a sample weight other than 1 (:class:`InputError` naming ``w``)."""
    if isinstance(w, numbers.Real) and not isinstance(w, bool) and float(w) == 1.0:
        return
    raise InputError(
        f"Sample weights are not supported: the 'w' parameter of learn_one must be 1. Got {w!r} instead.",
        field="w",
    )
