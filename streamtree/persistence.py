"""Streamtree's safe, versioned model format: a JSON header and numpy arrays, never pickle.

Layout: the magic bytes ``b"STREAMTREE"``, a big-endian uint32 header length, the UTF-8 JSON
header (format version, configuration, classes, feature registry, example count), then an
``.npz`` archive of the arrays, read back with ``allow_pickle=False``.

Version 4 stores exactly the model's arrays (:mod:`streamtree.state`): ``tree.<name>`` for
every :class:`~streamtree.state.TreeArrays` field, ``background.<name>`` for a background tree
being compared, ``drift.<name>`` for the change detector and its history. Node arrays are cut
to the nodes in use and class, column and value axes to their logical sizes (capacity depends
on growth history, not on data); ``slot_seen`` keeps every slot, so the free-slot stack
reloads as it was, and the slots' statistics stop after the last slot a leaf holds (a free
slot holds an empty one's, as a new array: a tree that stopped growing saves none); a detector saved before ``adwin_s`` held ``A_DETECTED_AT`` loads with it 0 (no detection
on record). Version 3 is version 4 without the linear component's arrays (``lr_*``,
``mix_*``): such a file was written by a model without it, and its configuration loads with
``linear=False`` whatever today's default. Any parameter added since a file was written loads
with the value that rebuilds its model (:data:`~streamtree.config.ADDED`: ``linear=False``,
``tau_scale="absolute"``, and no ``max_categories`` or ``max_bytes``: such a model keeps a code
for every value and grows as it did). A file's size is linear in what the model holds: nodes
and slots, times columns, value codes (at most ``max_categories + 1`` a feature) and classes.
Versions 1 and 2 (the layout before the compiled core: per-structure lists, leaf statistics,
smoother, naive-Bayes and detector states) still load, converted to the arrays.
Loading a file written by a newer format version, or anything else, raises
:class:`~streamtree.exceptions.FormatError`.
"""

from __future__ import annotations

import io
import json
import struct
import zipfile
from typing import TYPE_CHECKING, Any

import numpy as np

from streamtree.config import ADDED, FOREST_ADDED
from streamtree.exceptions import FormatError
from streamtree.features import FeatureRegistry
from streamtree.kernels.adwin import adwin_from_state
from streamtree.kernels.hgs import sync_alpha
from streamtree.state import (
    ALPHA, ADWIN_SCALARS, COL, D_ACTIVE, D_COMPARED, D_DETECTIONS, D_DROPPED, D_GAP, D_N_EVENTS, D_SWAPS, D_TREE_SINCE, DEPTH,
    EVENTS_KEPT, F_GAMMA, F_GRAD0, F_STEP0, F_THETA0, KIND, LAST_ATTEMPT, LEFT, LOG_MIN_PROBA, M_CLASSES,
    M_EXAMPLES, M_FREE, M_NB_CLASSES, M_NB_NOMINAL, M_NB_NUMERIC, M_NB_SCORED, M_NB_VALUES, M_NODES, M_NOMINAL,
    M_NUMERIC, M_REFITS, M_STOPPED, M_VALUES, MAX, MIN, N_, PARENT, Q_, RIGHT, S_, SEEN, SLOT, DriftArrays,
    TreeArrays, grow, new_arrays, new_drift,
)

if TYPE_CHECKING:
    from streamtree.forest import ProbabilityForest
    from streamtree.tree import ProbabilityTree

__all__ = ["FORMAT_VERSION", "Capture", "capture", "capture_forest", "dump", "dump_forest", "load", "load_any", "load_forest"]

MAGIC = b"STREAMTREE"
FORMAT_VERSION = 4
_READS = (1, 2, 3, 4)
_LINEAR_FIELDS = ("lr_w", "lr_bias", "lr_scale", "mix_a", "mix_b", "mix_y", "mix_u")  # new in version 4
TREE, FOREST = "streamtree.ProbabilityTree", "streamtree.ProbabilityForest"
FOREST_VERSION = 2  # 2: the members' losses (weighted forests); 1 is still read
_EVENT_CODES = {"detection": 0, "swap": 1, "dropped": 2}


def _logical(t: TreeArrays) -> dict[str, np.ndarray]:
    """The tree's arrays cut to their logical sizes (the HGS weights, ``exp`` of their logs, are
    recomputed on loading: :func:`_restore`)."""
    n, k = int(t.meta[M_NODES]), int(t.meta[M_CLASSES])
    f, c, v = int(t.meta[M_NUMERIC]), int(t.meta[M_NOMINAL]), int(t.meta[M_VALUES])
    nb = t.nb_seen.shape[0]
    nb_v = int(t.meta[M_NB_VALUES]) + 1
    lin = 1 if t.mix_y.shape[0] else 0
    m = _slots_in_use(t)
    return {
        "node": t.node[:n], "thr": t.thr[:n], "counts": t.counts[:n, :k], "inherited": t.inherited[:n, :k],
        "hgs": t.hgs[:n, :ALPHA], "num_stats": t.num_stats[:m, :f, :k], "num_range": t.num_range[:m, :f],
        "nom_stats": t.nom_stats[:m, :c, :v, :k], "slot_seen": t.slot_seen, "free_slots": t.free_slots[: int(t.meta[M_FREE])],
        "shift": t.shift[:f], "nb_num": t.nb_num[:, :f, :k], "nb_range": t.nb_range[:, :f],
        "nb_nom": t.nb_nom[:, :c, :v, :k], "nb_seen": t.nb_seen, "nb_mean": t.nb_mean[: f * nb, : k * nb],
        "nb_inv2var": t.nb_inv2var[: f * nb, : k * nb], "nb_const": t.nb_const[: f * nb, : k * nb],
        "nb_table": t.nb_table[: c * nb, : nb_v * nb, : k * nb], "nb_a": t.nb_a[:, : k * nb], "nb_b": t.nb_b[:, : k * nb],
        "nb_y": t.nb_y, "lr_w": t.lr_w[: k * lin, : f * lin], "lr_bias": t.lr_bias[: k * lin],
        "lr_scale": t.lr_scale[: f * lin], "mix_a": t.mix_a[:, : k * lin], "mix_b": t.mix_b[:, : k * lin],
        "mix_y": t.mix_y, "mix_u": t.mix_u, "meta": t.meta, "meta_f": t.meta_f,
    }


def _slots_in_use(t: TreeArrays) -> int:
    """One past the highest slot a leaf holds: the slots after it are free, and a free slot
    holds the statistics of an empty one (zeros, an empty range), as a new array does."""
    free = np.zeros(t.slot_seen.shape[0], dtype=bool)
    free[t.free_slots[: int(t.meta[M_FREE])]] = True
    held = np.flatnonzero(~free)
    return int(held[-1]) + 1 if held.size else 0


def _capacity(t: TreeArrays) -> list[int]:
    return [t.node.shape[0], t.counts.shape[1], t.shift.shape[0], t.nom_stats.shape[1], t.nom_stats.shape[2]]


def _restore(arrays: dict[str, np.ndarray], capacity: list[int], model: ProbabilityTree) -> TreeArrays:
    """The inverse of :func:`_logical`: arrays at the saved capacities with the saved values
    (a version-3 file has no linear arrays: its model has no linear component)."""
    nodes, classes, numeric, nominal, values = capacity
    t = new_arrays(nodes=nodes, slots=arrays["slot_seen"].shape[0], classes=classes, numeric=numeric, nominal=nominal,
                   values=values, naive_bayes=model.naive_bayes, prior_weight=model.prior_weight, linear=model.linear)
    fields = TreeArrays._fields if "lr_w" in arrays else [f for f in TreeArrays._fields if f not in _LINEAR_FIELDS]
    for name in fields:  # every one must be there (KeyError: a corrupt file)
        saved = arrays[name]
        getattr(t, name)[tuple(slice(0, s) for s in saved.shape)] = saved
    sync_alpha(t.hgs, t.hgs.shape[0])  # the weights are not saved: exp(theta), as a refit sets them
    return t


class Capture:
    """A model's saved form at one moment, not yet encoded: its JSON header and copies of its
    arrays (a forest's: its members' captures).

    Taking one only copies memory; :meth:`to_bytes` does the encoding and may run in another
    thread while the model goes on learning, and gives the bytes ``to_bytes`` of the model
    would have given at the moment of the capture."""

    __slots__ = ("arrays", "head")

    def __init__(self, header: dict[str, Any], arrays: dict[str, np.ndarray | Capture]) -> None:
        try:
            self.head = json.dumps(header, allow_nan=False).encode()
        except (TypeError, ValueError) as err:
            raise FormatError(f"The model cannot be saved: feature names, values and labels must be JSON data ({err}).") from None
        self.arrays = {name: a if isinstance(a, Capture) else a.copy() for name, a in arrays.items()}

    def to_bytes(self) -> bytes:
        """The capture in the model format (see the module docstring)."""
        arrays = {name: np.frombuffer(a.to_bytes(), dtype=np.uint8) if isinstance(a, Capture) else a
                  for name, a in self.arrays.items()}
        buffer = io.BytesIO()
        np.savez(buffer, allow_pickle=False, **arrays)
        return MAGIC + struct.pack(">I", len(self.head)) + self.head + buffer.getvalue()


def capture(model: ProbabilityTree) -> Capture:
    """The model's saved form now (:class:`Capture`); see the module docstring for the layout."""
    arrays = {f"tree.{name}": a for name, a in _logical(model._tree).items()}
    if model._background is not None:
        arrays.update({f"background.{name}": a for name, a in _logical(model._background).items()})
    if model._drift is not None:
        arrays.update({f"drift.{name}": a for name, a in model._drift._asdict().items()})
    header = {
        "format": TREE,
        "version": FORMAT_VERSION,
        "config": model.get_config(),
        "classes": list(model.classes_),
        "registry": model.registry.to_state(),
        "n_examples": model.n_examples,
        # capacities: a reloaded model holds (and reports) the memory the saved one held
        "capacity": {name: _capacity(t) for name, t in (("tree", model._tree), ("background", model._background))
                     if t is not None},
    }
    return Capture(header, dict(arrays))


def dump(model: ProbabilityTree) -> bytes:
    """Serialise ``model``; see the module docstring for the layout."""
    return capture(model).to_bytes()


def _unpack(data: bytes) -> tuple[Any, dict[str, np.ndarray]]:
    if not isinstance(data, (bytes, bytearray, memoryview)) or bytes(data[: len(MAGIC)]) != MAGIC:
        raise FormatError("Not a streamtree model: the data does not start with the streamtree magic bytes.")
    data = bytes(data)
    try:
        (size,) = struct.unpack(">I", data[len(MAGIC) : len(MAGIC) + 4])
        start = len(MAGIC) + 4
        header = json.loads(data[start : start + size])
        with np.load(io.BytesIO(data[start + size :]), allow_pickle=False) as archive:
            arrays = {name: archive[name] for name in archive.files}
    except (struct.error, ValueError, zipfile.BadZipFile, OSError) as err:
        raise FormatError(f"Corrupt streamtree model: {err}.") from None
    return header, arrays


def _read(data: bytes, kind: str = TREE, versions: tuple[int, ...] = _READS) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    header, arrays = _unpack(data)
    if not isinstance(header, dict) or header.get("format") != kind:
        raise FormatError(f"Not a {kind.split('.')[-1]}: the format is "
                          f"{header.get('format') if isinstance(header, dict) else None!r}.")
    if header.get("version") not in versions:
        raise FormatError(
            f"Model format version {header.get('version')!r} is not supported; this streamtree reads version {max(versions)}."
        )
    return header, arrays


def _prefixed(arrays: dict[str, Any], prefix: str) -> dict[str, Any]:
    return {key[len(prefix) :]: value for key, value in arrays.items() if key.startswith(prefix)}


def load(cls: type[ProbabilityTree], data: bytes) -> ProbabilityTree:
    """Rebuild a model written by :func:`dump` (any version this streamtree reads)."""
    header, arrays = _read(data)
    config = header["config"]
    if isinstance(config, dict):  # parameters added since it was written: the values that rebuild it
        config = {**ADDED, **config}
    model = cls(**config)
    model.registry = FeatureRegistry.from_state(header["registry"], model.max_features, model.max_categories)
    model.classes_ = list(header["classes"])
    model._class_index = {c: i for i, c in enumerate(model.classes_)}
    model.n_examples = int(header["n_examples"])
    try:
        if header["version"] >= 3:
            capacity = header["capacity"]
            model._tree = _restore(_prefixed(arrays, "tree."), capacity["tree"], model)
            if "background.meta" in arrays:
                model._background = _restore(_prefixed(arrays, "background."), capacity["background"], model)
            if model._drift is not None and "drift.drift_s" in arrays:
                model._drift = _drift_arrays(_prefixed(arrays, "drift."))
        else:
            _from_version_2(model, header, arrays)
    except (KeyError, IndexError, ValueError, TypeError) as err:
        raise FormatError(f"Corrupt streamtree model: {err!r}.") from None
    return model


def _drift_arrays(arrays: dict[str, np.ndarray]) -> DriftArrays:
    """A version-3 file's detector and drift history. ``adwin_s`` saved before it had
    ``A_DETECTED_AT`` (10 scalars) gets it 0: no detection on record, so the detector reports
    its next cut, as it did when it was saved."""
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


# -- forests ----------------------------------------------------------------------------------
def capture_forest(forest: ProbabilityForest) -> Capture:
    """The forest's saved form now: a header with its config and each member's capture
    (:func:`capture`), packed as the member's bytes in a ``uint8`` array ``member.<i>``."""
    header = {"format": FOREST, "version": FOREST_VERSION, "config": forest.get_config(),
              "n_examples": forest.n_examples}
    arrays: dict[str, np.ndarray | Capture] = {f"member.{i}": m.capture() for i, m in enumerate(forest.members)}
    arrays["loss"] = forest.loss_
    return Capture(header, arrays)


def dump_forest(forest: ProbabilityForest) -> bytes:
    """Serialise a forest (:func:`capture_forest`)."""
    return capture_forest(forest).to_bytes()


def load_forest(cls: type[ProbabilityForest], data: bytes) -> ProbabilityForest:
    """Rebuild a forest written by :func:`dump_forest`."""
    from streamtree.tree import ProbabilityTree

    header, arrays = _read(data, FOREST, (1, FOREST_VERSION))
    try:
        # a version-1 forest averaged its members: it is read as one that still does
        forest = cls(**(FOREST_ADDED | header["config"]))
        members = [ProbabilityTree.from_bytes(arrays[f"member.{i}"].tobytes()) for i in range(forest.n_trees)]
        forest.members = members
        forest.n_examples = int(header["n_examples"])
        if "loss" in arrays:
            loss = np.array(arrays["loss"], dtype=np.float64)
            if loss.shape != (forest.n_trees,):
                raise TypeError(f"loss has shape {loss.shape}, not ({forest.n_trees},)")
            forest.loss_ = loss
    except (KeyError, TypeError) as err:
        raise FormatError(f"Corrupt streamtree forest: {err!r}.") from None
    # one registry and one list of classes again, as the forest had them
    forest.classes_ = list(members[0].classes_)
    forest._class_index = {c: i for i, c in enumerate(forest.classes_)}
    forest._share(members[0].registry)
    return forest


def load_any(data: bytes) -> ProbabilityTree | ProbabilityForest:
    """A tree or a forest, whichever ``data`` holds."""
    from streamtree.forest import ProbabilityForest
    from streamtree.tree import ProbabilityTree

    try:  # the header alone says which
        (size,) = struct.unpack(">I", bytes(data[len(MAGIC) : len(MAGIC) + 4]))
        header = json.loads(bytes(data[len(MAGIC) + 4 : len(MAGIC) + 4 + size]))
    except (struct.error, ValueError, TypeError):
        header = None  # load() says what is wrong
    if isinstance(header, dict) and header.get("format") == FOREST:
        return load_forest(ProbabilityForest, data)
    return load(ProbabilityTree, data)


# -- versions 1 and 2 -------------------------------------------------------------------------
def _from_version_2(model: ProbabilityTree, header: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
    """Convert a version 1 or 2 file (the layout before the compiled core) into arrays."""
    model._tree = _tree_from_v2(model, header, arrays, n_examples=model.n_examples)
    drift = header.get("drift")
    if model._drift is not None and drift is not None:  # absent in version 1
        d = new_drift(model.drift_delta if model.drift_delta is not None else 0.002)
        b, n, s = adwin_from_state({**_prefixed(arrays, "drift.detector."), **{
            key[len("detector."):]: value for key, value in drift.items() if key.startswith("detector.")}})
        d.adwin_b[:], d.adwin_n[:], d.adwin_s[:] = b, n, s
        for index, name in ((D_GAP, "gap"), (D_COMPARED, "compared"), (D_DETECTIONS, "n_detections"),
                            (D_SWAPS, "n_swaps"), (D_DROPPED, "n_dropped"), (D_TREE_SINCE, "tree_since")):
            d.drift_s[index] = float(drift[name])
        events = drift["events"][-EVENTS_KEPT:]
        for i, (kind, at) in enumerate(events):
            d.drift_ev[i] = (_EVENT_CODES[kind], at)
        d.drift_s[D_N_EVENTS] = len(events)
        model._drift = d
        if "background" in arrays:
            bg_header, bg_arrays = _read(arrays["background"].tobytes())
            model._background = _tree_from_v2(model, bg_header, bg_arrays, n_examples=int(bg_header["n_examples"]))
            d.drift_s[D_ACTIVE] = 1.0


def _tree_from_v2(model: ProbabilityTree, header: dict[str, Any], arrays: dict[str, np.ndarray], n_examples: int) -> TreeArrays:
    k = len(model.classes_)
    reg = model.registry
    parent = arrays["tree._parent"]
    n = parent.shape[0]
    stats = _prefixed(arrays, "stats.")
    slots = stats["seen"].shape[0]
    t = grow(new_arrays(slots=slots, naive_bayes=model.naive_bayes, prior_weight=model.prior_weight), nodes=n,
             classes=k, numeric=reg.n_numeric, nominal=reg.n_nominal, values=reg.max_values)
    for column, name in ((PARENT, "_parent"), (LEFT, "_left"), (RIGHT, "_right"), (KIND, "_kind"), (COL, "_col"),
                         (DEPTH, "_depth"), (SLOT, "_slot")):
        t.node[:n, column] = arrays["tree." + name]
    t.thr[:n] = arrays["tree._thr"]
    t.counts[:n, :k] = arrays["tree.counts"]
    t.inherited[:n, :k] = arrays["tree.inherited"]
    _stats_into(stats, t.num_stats, t.num_range, t.nom_stats, t.slot_seen)
    t.shift[: stats["shift"].shape[0]] = stats["shift"]
    free = header["stats"]["free"]
    t.free_slots[: len(free)] = free
    t.meta[M_FREE] = len(free)
    t.meta[M_NODES] = n
    t.meta[M_EXAMPLES] = n_examples
    t.meta[M_CLASSES] = k
    t.meta[M_NUMERIC], t.meta[M_NOMINAL], t.meta[M_VALUES] = reg.n_numeric, reg.n_nominal, reg.max_values
    t.meta[M_STOPPED] = bool(header["growth_stopped"])
    smoother = header.get("smoother") or {}
    if "theta0" in smoother:  # HGS: nodes created after the last refit take their parent's weight
        theta = arrays["smoother.theta"]
        grown = theta.shape[0]
        t.hgs[:grown, 0] = theta
        t.hgs[:grown, 1] = arrays["smoother.step"]
        t.hgs[:grown, 2] = arrays["smoother.grad"]
        for i in range(max(grown, 1), n):
            t.hgs[i, :ALPHA] = (t.hgs[parent[i], 0], 0.1, 0.0)
        sync_alpha(t.hgs, n)
        t.meta_f[F_THETA0], t.meta_f[F_STEP0], t.meta_f[F_GRAD0] = smoother["theta0"], smoother["step0"], smoother["grad0"]
        t.meta[M_REFITS] = int(smoother["n_refits"])
    nb = header.get("naive_bayes")
    if model.naive_bayes and nb is not None:
        nb_arrays = _prefixed(arrays, "nb.")
        nb_stats = _prefixed(nb_arrays, "stats.")
        _stats_into(nb_stats, t.nb_num, t.nb_range, t.nb_nom, t.nb_seen)
        # the factor's shift is always the features' first values (the tree's statistics
        # lost theirs when growth stopped)
        t.shift[: nb_stats["shift"].shape[0]] = nb_stats["shift"]
        mean, table = nb_arrays["mean"], nb_arrays["table"]
        f_nb, k_nb = mean.shape
        c_nb, rows, k_table = table.shape
        t = grow(t, numeric=f_nb, nominal=c_nb, values=rows)
        t.nb_mean[:f_nb, :k_nb] = mean
        t.nb_inv2var[:f_nb, :k_nb] = nb_arrays["inv2var"]
        t.nb_const[:f_nb, :k_nb] = nb_arrays["const"]
        t.nb_table[:c_nb, :rows, :k_table] = table
        t.meta[M_NB_CLASSES] = k_nb if f_nb else k_table
        t.meta[M_NB_NUMERIC], t.meta[M_NB_NOMINAL], t.meta[M_NB_VALUES] = f_nb, c_nb, rows - 1 if c_nb else 0
        a, b = nb_arrays["a"], nb_arrays["b"]
        m = a.shape[0]
        t.nb_a[:, :] = LOG_MIN_PROBA
        t.nb_a[:m, : a.shape[1]] = a
        t.nb_b[:m, : b.shape[1]] = b
        t.nb_y[:m] = nb_arrays["y"]
        t.meta_f[F_GAMMA] = float(nb["gamma"])
        t.meta[M_NB_SCORED] = int(nb["n_scored"])
    return t


def _stats_into(stats: dict[str, np.ndarray], num: np.ndarray, rng: np.ndarray, nom: np.ndarray, seen: np.ndarray) -> None:
    """Old leaf statistics (``LeafStats.to_state``) into the slot arrays (as many slots as
    they have: the naive-Bayes statistics used slot 0 of four)."""
    m = min(stats["seen"].shape[0], seen.shape[0])
    _, f, k = stats["num_n"].shape
    num[:m, :f, :k, N_] = stats["num_n"][:m]
    num[:m, :f, :k, S_] = stats["num_s"][:m]
    num[:m, :f, :k, Q_] = stats["num_q"][:m]
    rng[:m, :f, MIN] = stats["num_min"][:m]
    rng[:m, :f, MAX] = stats["num_max"][:m]
    old = stats["nom"][:m]
    nom[:m, : old.shape[1], : old.shape[2], : old.shape[3]] = old
    seen[:m, SEEN] = stats["seen"][:m]
    seen[:m, LAST_ATTEMPT] = stats["last_attempt"][:m]
