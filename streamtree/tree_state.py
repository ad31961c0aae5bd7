"""``TreeState``: one tree's arrays and what keeps them, without labels or feature names.

A tree model's state is its tree (:class:`~streamtree.state.TreeArrays`), the background tree
learning beside it after a detected change, the change detector and its history
(:class:`~streamtree.state.DriftArrays`), the compiled handles of those arrays
(:mod:`streamtree.kernels.handle`) and the configuration as the kernels read it (the ``C_*``
indexes of :mod:`streamtree.kernels.learn`). :class:`TreeState` owns them: it makes room in
the arrays (:mod:`streamtree.growth`), runs the compiled learning loop and prediction over
encoded rows, and does what the loop stops for (grow, start, adopt or drop a background tree).

It knows no labels and no feature names: :class:`~streamtree.tree.ProbabilityTree` encodes
examples into rows and class ids and hands them here; a forest
(:mod:`streamtree.forest`) drives its members' states; :mod:`streamtree.persistence`
writes and reads a state's arrays; :mod:`streamtree.inspection` reads them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from streamtree import growth
from streamtree.dispatch import direct
from streamtree.exceptions import InputError
from streamtree.features import FeatureRegistry
from streamtree.integrity import check_capacities
from streamtree.kernels.codes import (
    ADOPT,
    C_CRITERION,
    C_DELTA,
    C_DRIFT,
    C_GRACE,
    C_HALF_LIFE,
    C_HONEST,
    C_INHERIT,
    C_LINEAR,
    C_M,
    C_MAX_DEPTH,
    C_MAX_NODES,
    C_MIN_BRANCH,
    C_NB,
    C_PATIENCE,
    C_REFIT_EVERY,
    C_REFIT_STEPS,
    C_REPEATS_SEEN,
    C_SEED,
    C_SMOOTHER,
    C_SPLIT_POINTS,
    C_SPLITTER,
    C_SUBSPACE,
    C_TAU,
    C_TAU_RANGE,
    CONFIG_FLOATS,
    CONFIG_INTS,
    DONE,
    GROW,
    SPLITTER_CODES,
    START,
)
from streamtree.kernels.criteria import CRITERION_CODES
from streamtree.kernels.event import NO_PROBA, ONCE, event_handle, learn_event, predict_event
from streamtree.kernels.handle import drift_handle, tree_handle
from streamtree.kernels.hgs import sync_alpha
from streamtree.kernels.learn import learn_rows
from streamtree.kernels.predict import predict_rows
from streamtree.smoothing import smoother_of_config
from streamtree.state import (
    ADWIN_SCALARS,
    ALPHA,
    D_ACTIVE,
    D_COMPARED,
    D_GAP,
    M_CLASSES,
    M_FREE,
    M_NB_VALUES,
    M_NODES,
    M_NOMINAL,
    M_NUMERIC,
    M_VALUES,
    DriftArrays,
    TreeArrays,
    new_arrays,
    new_drift,
)
from streamtree.typing import FloatArray

__all__ = ["CAPACITY_AXES", "NO_DRIFT", "TreeState", "kernel_config", "prefixed", "registry_shapes", "slots_in_use"]

#: What the loop is given (and never reads) when change detection is off.
NO_DRIFT = new_drift(0.002)
_LINEAR_FIELDS = ("lr_w", "lr_bias", "lr_scale", "mix_a", "mix_b", "mix_y", "mix_u")  # absent: no linear component


def kernel_config(config: Mapping[str, Any], smoother_code: int) -> tuple[np.ndarray, np.ndarray]:
    """A tree configuration (:meth:`ProbabilityTree.get_config`) as the kernels read it: the
    ``C_*`` indexes of :mod:`streamtree.kernels.codes` in an int64 and a float64 array."""
    cfg_i = np.zeros(CONFIG_INTS, dtype=np.int64)
    cfg_i[C_GRACE] = config["grace_period"]
    cfg_i[C_MAX_DEPTH] = -1 if config["max_depth"] is None else config["max_depth"]
    cfg_i[C_MAX_NODES] = config["max_nodes"]
    cfg_i[C_SPLIT_POINTS] = config["n_split_points"]
    cfg_i[C_CRITERION] = CRITERION_CODES[config["split_criterion"]]
    cfg_i[C_INHERIT] = config["leaf_init"] == "inherit"
    cfg_i[C_HONEST] = config["loocv_counts"] == "honest"
    cfg_i[C_REFIT_EVERY] = config["refit_every"]
    cfg_i[C_REFIT_STEPS] = config["refit_steps"]
    cfg_i[C_SMOOTHER] = smoother_code
    cfg_i[C_NB] = config["naive_bayes"]
    cfg_i[C_LINEAR] = config["linear"]
    cfg_i[C_DRIFT] = config["drift_delta"] is not None
    cfg_i[C_PATIENCE] = config["drift_patience"]
    cfg_i[C_HALF_LIFE] = -1 if config["half_life"] is None else config["half_life"]
    cfg_i[C_SPLITTER] = SPLITTER_CODES[config["splitter"]]
    cfg_i[C_SEED] = config["seed"]
    cfg_i[C_SUBSPACE] = 0 if config["subspace_size"] is None else config["subspace_size"]
    cfg_i[C_TAU_RANGE] = config["tau_scale"] == "range"
    cfg_i[C_REPEATS_SEEN] = config["repeats_as_seen"]
    cfg_f = np.zeros(CONFIG_FLOATS)
    cfg_f[C_DELTA] = config["delta"]
    cfg_f[C_TAU] = config["tau"]
    cfg_f[C_MIN_BRANCH] = config["min_branch_fraction"]
    cfg_f[C_M] = config["m"]
    return cfg_i, cfg_f


def registry_shapes(registry: FeatureRegistry, n_classes: int) -> tuple[int, int, int, int]:
    """(classes, numeric columns, nominal columns, value codes) a tree's arrays must hold for
    ``n_classes`` classes and ``registry``'s features: :meth:`TreeState.make_room`'s ``shapes``."""
    return n_classes, registry.n_numeric, registry.n_nominal, registry.max_values


class TreeState:
    """One tree's arrays, its background tree and change detector, their compiled handles and
    the kernels' configuration (module docstring).

    ``config`` is a complete tree configuration (:meth:`ProbabilityTree.get_config`, already
    validated); the state starts empty: a root leaf, no background tree, a fresh detector
    (``None`` when ``drift_delta`` is ``None``).

    Attributes
    ----------
    tree, background, drift
        The arrays (``background`` ``None`` but while a background tree is compared). Each is
        replaced, never resized in place, when it grows or is adopted, so a holder compares
        them by identity to follow them (a forest does).
    cfg_i, cfg_f
        The configuration as the kernels read it (:func:`kernel_config`).
    smoother
        The leaf smoother the configuration names (:func:`~streamtree.smoothing.smoother_of_config`).
    shapes, before, fkeys
        What the arrays were last fitted to (:func:`registry_shapes`), the registry's sizes
        before the batch being learned when it grew (``None``: as the tree's), and the
        registry's feature keys (for the randomized splitters).
    handles
        ``id(arrays) -> (arrays, handle)`` for the arrays held (:meth:`handle`).
    current
        The tree's, the background tree's and the detector's arrays and the event handle made
        of them (:meth:`event`; ``None``: make it again).
    """

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.config = dict(config)
        self.smoother = smoother_of_config(
            config["smoothing"], steps=config["refit_steps"], prior_weight=config["prior_weight"], m=config["m"]
        )
        self.cfg_i, self.cfg_f = kernel_config(config, self.smoother.code)
        self.max_bytes: int | None = config["max_bytes"]
        self.tree: TreeArrays = self.new_tree()
        self.background: TreeArrays | None = None
        delta = config["drift_delta"]
        self.drift: DriftArrays | None = new_drift(delta) if delta is not None else None
        self.shapes: tuple[int, ...] = ()
        self.before: tuple[int, int, int] | None = None
        self.fkeys = np.zeros(0, dtype=np.int64)
        self.handles: dict[int, tuple[Any, Any]] = {}
        self.current: tuple[Any, ...] | None = None

    def __getstate__(self) -> dict[str, Any]:
        """Pickling and deep copies leave out the compiled handles (made again on first use)."""
        return self.__dict__ | {"handles": {}, "current": None}

    def new_tree(self, **capacities: int) -> TreeArrays:
        """Empty arrays of this configuration (:func:`~streamtree.state.new_arrays`; its
        ``capacities``, the defaults when none are given)."""
        c = self.config
        return new_arrays(
            **capacities, naive_bayes=c["naive_bayes"], prior_weight=c["prior_weight"], linear=c["linear"]
        )

    def handle(self, arrays: TreeArrays | DriftArrays) -> Any:
        """The compiled handle of a tree's or a detector's arrays (:mod:`streamtree.kernels.handle`),
        made once per set of arrays: a tree grown, adopted or loaded is a new set (the handles of
        sets no longer held are let go)."""
        held = self.handles.get(id(arrays))
        if held is None or held[0] is not arrays:
            live = {id(a) for a in (self.tree, self.background, self.drift, NO_DRIFT)}
            self.handles = {i: h for i, h in self.handles.items() if i in live}
            handle = drift_handle(arrays) if isinstance(arrays, DriftArrays) else tree_handle(arrays)
            held = self.handles[id(arrays)] = (arrays, handle)
        return held[1]

    # -- learning -----------------------------------------------------------------------
    def check_budget(self, shapes: tuple[int, ...]) -> None:
        """:class:`InputError` naming ``max_bytes`` when :meth:`make_room` for ``shapes`` would take
        either tree past it even with growth stopped (:func:`~streamtree.growth.budget_error`)."""
        if self.max_bytes is None or shapes == self.shapes:
            return
        for t in (self.tree, self.background):
            error = None if t is None else growth.budget_error(t, self.max_bytes, shapes)
            if error is not None:
                raise InputError(error)  # a limit of the model, as max_features: no field

    def make_room(self, registry: FeatureRegistry, first_values: dict[int, float], shapes: tuple[int, ...]) -> None:
        """Before a batch (classes registered): when ``shapes`` (:func:`registry_shapes` of the
        registry and the classes) changed, or the arrays were replaced since the last check,
        fit both trees to them (:func:`~streamtree.growth.fit_shapes`), keeping the sizes they
        grow from (:class:`~streamtree.growth.Sizes`), and refresh the feature keys. A forest
        calls it on each member with the shapes of the registry they share."""
        if shapes != self.shapes:
            self.current = None  # the arrays are replaced: let the old ones go
            n_classes = shapes[0]
            self.before = growth.registry_sizes(self.tree)
            tree = growth.fit_within(self.tree, self.max_bytes, shapes)  # within the budget (check_budget)
            self.tree = growth.fit_shapes(tree, registry, n_classes, first_values)
            if self.background is not None:
                background = growth.fit_within(self.background, self.max_bytes, shapes)
                self.background = growth.fit_shapes(background, registry, n_classes, first_values)
            self.shapes = shapes
            self.fkeys = registry.feature_keys()
        else:
            self.before = None  # nothing new since the last fit: the sizes are the registry's

    def learn(
        self,
        num: np.ndarray,
        nom: np.ndarray,
        ks: np.ndarray,
        reps: np.ndarray,
        n_examples: int,
        want_proba: bool,
        at_entry: bool,
        start: int = 0,
    ) -> FloatArray:
        """Run encoded rows (class ids ``ks``, row ``i`` learned ``reps[i]`` times) through the
        learning loop (:func:`~streamtree.kernels.learn.learn_rows`), resolving each of its
        stops (:meth:`resolve`), the model having learned ``n_examples`` before them; after
        :meth:`make_room`. Returns the prequential predictions (every class column the arrays
        hold) when ``want_proba``. ``at_entry``: the loop is called at its compiled entry point
        (:func:`~streamtree.dispatch.at_entry`). ``start``: the first row not yet learned."""
        proba = np.zeros((len(ks), self.tree.counts.shape[1])) if want_proba else NO_PROBA
        drift = self.handle(self.drift if self.drift is not None else NO_DRIFT)
        reason = -1
        while reason != DONE:
            tree = self.handle(self.tree)
            background = tree if self.background is None else self.handle(self.background)
            args = (
                tree,
                background,
                drift,
                self.cfg_i,
                self.cfg_f,
                num,
                nom,
                ks,
                reps,
                self.fkeys,
                start,
                n_examples + start,
                proba,
                want_proba,
            )
            stop, reason = direct(learn_rows, *args) if at_entry else learn_rows(*args)
            start = stop
            self.resolve(reason, reps, stop, None if reason == DONE else (self.before, num, nom, ks))
        return proba

    def learn_one(self, num: np.ndarray, nom: np.ndarray, ks: np.ndarray, n_examples: int) -> None:
        """:meth:`learn` of one event learned once, at the loop's entry point, without a
        prediction: the same call of the loop, through the event handle (:meth:`event`)."""
        stop, reason = direct(learn_event, self.event(), num, nom, ks, n_examples)
        if reason == DONE and self.background is None:
            return  # nothing to resolve: no swap, no background tree to drop
        self.resolve(reason, ONCE, stop, None if reason == DONE else (self.before, num, nom, ks))
        if reason != DONE:  # the rest of the batch of one, as learn() would go on
            self.learn(num, nom, ks, ONCE, n_examples, False, True, start=stop)

    def event(self) -> Any:
        """The event handle (:mod:`streamtree.kernels.event`) of the tree, the background tree
        and the detector as they are now, kept in :attr:`current` until one of them, or the
        feature keys, is replaced."""
        tree, background, drift = self.tree, self.background, self.drift
        current = self.current
        if current is None or current[0] is not tree or current[1] is not background or current[2] is not drift:
            handle = self.handle(tree)
            event = event_handle(
                handle,
                handle if background is None else self.handle(background),
                self.handle(drift if drift is not None else NO_DRIFT),
                self.cfg_i,
                self.cfg_f,
                self.fkeys,
            )
            current = self.current = (tree, background, drift, event)
        return current[3]

    def resolve(self, reason: int, reps: np.ndarray, row: int, rows: tuple[Any, ...] | None = None) -> None:
        """Do what the learning loop stopped for, before it resumes at ``row``.

        Called after every return of the loop (``DONE`` included): a background tree that was
        adopted becomes the tree (one assignment); one the loop dropped (inactive detector) is
        let go; ``GROW`` makes room for row ``row`` learned ``reps[row]`` times (a split per
        repetition at most, in each tree) within ``max_bytes`` given the batch ``rows``
        (:class:`~streamtree.growth.Sizes`); ``START`` makes a background tree. A tree and a
        forest (:mod:`streamtree.kernels.forest`, one member at a time) share it, so a
        member's arrays evolve exactly as a tree's."""
        if reason == ADOPT:
            assert self.background is not None
            self.tree, self.background = self.background, None  # the swap: one assignment
            self.current = None  # let the old arrays go
        elif self.background is not None and self.drift is not None and self.drift.drift_s[D_ACTIVE] == 0.0:
            self.background = None  # dropped
            self.current = None
        if reason == DONE:
            return  # nothing else changed: the event handle stays (every event while a background tree is compared)
        self.current = None  # the arrays are grown or a background tree is made below
        if reason == GROW:
            room = 2 * max(int(reps[row]), 1)
            sizes = None if rows is None else growth.Sizes(rows[0] or growth.registry_sizes(self.tree), *rows[1:])
            self.tree = growth.grow_for_row(self.tree, room, self.max_bytes, sizes, row)
            if self.background is not None:
                self.background = growth.grow_for_row(self.background, room, self.max_bytes, sizes, row)
        elif reason == START:
            self.background = self.start_background()
        self.shapes = ()  # a grown or new tree: check every shape again next time

    def start_background(self) -> TreeArrays:
        """An empty tree with the tree's shapes, classes and shifts; comparison from zero."""
        background = growth.fit_within(growth.like(self.new_tree(), self.tree), self.max_bytes, None)  # its budget
        assert self.drift is not None
        self.drift.drift_s[D_ACTIVE] = 1.0
        self.drift.drift_s[D_GAP] = 0.0
        self.drift.drift_s[D_COMPARED] = 0.0
        return background

    # -- prediction ---------------------------------------------------------------------
    def predict(self, num: np.ndarray, nom: np.ndarray, at_entry: bool) -> FloatArray:
        """The tree's probabilities of encoded rows, every class column the arrays hold."""
        out = np.empty((num.shape[0], self.tree.counts.shape[1]))
        tree = self.handle(self.tree)
        if at_entry:
            direct(predict_rows, tree, self.cfg_i, self.cfg_f, num, nom, out)
        else:
            predict_rows(tree, self.cfg_i, self.cfg_f, num, nom, out)
        return out

    def predict_one(self, num: np.ndarray, nom: np.ndarray, n_classes: int) -> list[float]:
        """The tree's probabilities of one encoded event (the first ``n_classes``), at the
        prediction loop's entry point, through the event handle (:meth:`event`)."""
        return direct(predict_event, self.event(), num, nom, n_classes)  # type: ignore[no-any-return]

    # -- as named arrays ----------------------------------------------------------------
    def to_arrays(self) -> dict[str, np.ndarray]:
        """The state as named arrays (views, not copies): ``tree.<name>`` for every
        :class:`~streamtree.state.TreeArrays` field, ``background.<name>`` while a background
        tree is compared, ``drift.<name>`` for the detector and its history. Node arrays are
        cut to the nodes in use and class, column and value axes to their logical sizes;
        ``slot_seen`` keeps every slot (the free-slot stack comes back as it was) and the
        slots' statistics stop after the last slot a leaf holds (:func:`slots_in_use`). The
        HGS weights are left out: ``exp`` of their logs, recomputed by :meth:`restore`."""
        arrays = {f"tree.{name}": a for name, a in _logical(self.tree).items()}
        if self.background is not None:
            arrays.update({f"background.{name}": a for name, a in _logical(self.background).items()})
        if self.drift is not None:
            arrays.update({f"drift.{name}": a for name, a in self.drift._asdict().items()})
        return arrays

    def capacities(self) -> dict[str, list[int]]:
        """``tree`` (and ``background``, while there is one): capacities of nodes, classes,
        numeric and nominal columns and value codes, so that a state restored from
        :meth:`to_arrays` holds (and reports) the memory this one holds."""
        return {
            name: _capacity(t) for name, t in (("tree", self.tree), ("background", self.background)) if t is not None
        }

    def restore(self, arrays: Mapping[str, np.ndarray], capacities: Mapping[str, list[int]]) -> None:
        """The inverse of :meth:`to_arrays` and :meth:`capacities`: the tree, the background
        tree (when ``arrays`` has one) and the detector (when this state has one and
        ``arrays`` has it) at the given capacities with the given values. Arrays without the
        linear component's fields (``lr_*``, ``mix_*``) are a tree without it; a detector's
        ``adwin_s`` saved before it had ``A_DETECTED_AT`` gets it 0 (no detection on record, so
        the detector reports its next cut). ``KeyError``, ``IndexError``, ``ValueError`` or
        ``TypeError`` for arrays that are not such a state's, or a capacity far beyond them
        (:func:`~streamtree.integrity.check_capacities`, before anything is allocated)."""
        self.tree = self._restored(prefixed(arrays, "tree."), capacities["tree"], "tree")
        if "background.meta" in arrays:
            self.background = self._restored(prefixed(arrays, "background."), capacities["background"], "background")
        if self.drift is not None and "drift.drift_s" in arrays:
            self.drift = _drift_arrays(prefixed(arrays, "drift."))

    def _restored(self, arrays: Mapping[str, np.ndarray], capacity: list[int], name: str) -> TreeArrays:
        check_capacities(capacity, [arrays[a].shape[axis] for a, axis in CAPACITY_AXES], name)
        nodes, classes, numeric, nominal, values = capacity
        t = self.new_tree(
            nodes=nodes,
            slots=arrays["slot_seen"].shape[0],
            classes=classes,
            numeric=numeric,
            nominal=nominal,
            values=values,
        )
        fields = TreeArrays._fields if "lr_w" in arrays else [f for f in TreeArrays._fields if f not in _LINEAR_FIELDS]
        for name in fields:  # every one must be there (KeyError)
            saved = arrays[name]
            getattr(t, name)[tuple(slice(0, s) for s in saved.shape)] = saved
        sync_alpha(t.hgs, t.hgs.shape[0])  # the weights: exp(theta), as a refit sets them
        return t


def prefixed(arrays: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    """The entries of ``arrays`` under ``prefix`` (``"tree."`` of ``tree.counts``), keyed without it."""
    return {key[len(prefix) :]: value for key, value in arrays.items() if key.startswith(prefix)}


def _logical(t: TreeArrays) -> dict[str, np.ndarray]:
    """The tree's arrays cut to their logical sizes (:meth:`TreeState.to_arrays`)."""
    n, k = int(t.meta[M_NODES]), int(t.meta[M_CLASSES])
    f, c, v = int(t.meta[M_NUMERIC]), int(t.meta[M_NOMINAL]), int(t.meta[M_VALUES])
    nb = t.nb_seen.shape[0]
    nb_v = int(t.meta[M_NB_VALUES]) + 1
    lin = 1 if t.mix_y.shape[0] else 0
    m = slots_in_use(t)
    return {
        "node": t.node[:n],
        "thr": t.thr[:n],
        "counts": t.counts[:n, :k],
        "inherited": t.inherited[:n, :k],
        "hgs": t.hgs[:n, :ALPHA],
        "num_stats": t.num_stats[:m, :f, :k],
        "num_range": t.num_range[:m, :f],
        "nom_stats": t.nom_stats[:m, :c, :v, :k],
        "slot_seen": t.slot_seen,
        "free_slots": t.free_slots[: int(t.meta[M_FREE])],
        "shift": t.shift[:f],
        "nb_num": t.nb_num[:, :f, :k],
        "nb_range": t.nb_range[:, :f],
        "nb_nom": t.nb_nom[:, :c, :v, :k],
        "nb_seen": t.nb_seen,
        "nb_mean": t.nb_mean[: f * nb, : k * nb],
        "nb_inv2var": t.nb_inv2var[: f * nb, : k * nb],
        "nb_const": t.nb_const[: f * nb, : k * nb],
        "nb_table": t.nb_table[: c * nb, : nb_v * nb, : k * nb],
        "nb_a": t.nb_a[:, : k * nb],
        "nb_b": t.nb_b[:, : k * nb],
        "nb_y": t.nb_y,
        "lr_w": t.lr_w[: k * lin, : f * lin],
        "lr_bias": t.lr_bias[: k * lin],
        "lr_scale": t.lr_scale[: f * lin],
        "mix_a": t.mix_a[:, : k * lin],
        "mix_b": t.mix_b[:, : k * lin],
        "mix_y": t.mix_y,
        "mix_u": t.mix_u,
        "meta": t.meta,
        "meta_f": t.meta_f,
    }


def slots_in_use(t: TreeArrays) -> int:
    """One past the highest slot a leaf holds: the slots after it are free, and a free slot
    holds the statistics of an empty one (zeros, an empty range), as a new array does."""
    free = np.zeros(t.slot_seen.shape[0], dtype=bool)
    free[t.free_slots[: int(t.meta[M_FREE])]] = True
    held = np.flatnonzero(~free)
    return int(held[-1]) + 1 if held.size else 0


#: The array and axis of each capacity (:meth:`TreeState.capacities`): nodes, classes, numeric
#: and nominal columns, values.
CAPACITY_AXES = (("node", 0), ("counts", 1), ("shift", 0), ("nom_stats", 1), ("nom_stats", 2))


def _capacity(t: TreeArrays) -> list[int]:
    return [getattr(t, a).shape[axis] for a, axis in CAPACITY_AXES]


def _drift_arrays(arrays: dict[str, np.ndarray]) -> DriftArrays:
    """A detector and drift history from its named arrays (:meth:`TreeState.restore`)."""
    blank = new_drift(0.002)  # the dtypes and dimensions every detector has (kernels.handle)
    drift = DriftArrays(**{name: np.array(a, dtype=getattr(blank, name).dtype) for name, a in arrays.items()})
    for name, a in zip(DriftArrays._fields, drift):
        if a.ndim != getattr(blank, name).ndim:
            raise ValueError(f"drift.{name} has {a.ndim} dimensions, not {getattr(blank, name).ndim}")
    if drift.adwin_s.shape != (ADWIN_SCALARS,):
        if drift.adwin_s.ndim != 1 or drift.adwin_s.shape[0] > ADWIN_SCALARS:
            raise ValueError(f"drift.adwin_s has shape {drift.adwin_s.shape}, not ({ADWIN_SCALARS},) or shorter")
        adwin_s = np.zeros(ADWIN_SCALARS)
        adwin_s[: drift.adwin_s.shape[0]] = drift.adwin_s
        drift = drift._replace(adwin_s=adwin_s)
    return drift
