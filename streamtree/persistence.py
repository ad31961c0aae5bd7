"""Streamtree's safe, versioned model format: a JSON header and numpy arrays, never pickle.

Layout: the magic bytes ``b"STREAMTREE"``, a big-endian uint32 header length, the UTF-8 JSON
header (format version, configuration, classes, feature registry, example count), then an
``.npz`` archive of the arrays, read back with ``allow_pickle=False``.

This module is a codec of states: it writes a tree's
:class:`~streamtree.tree_state.TreeState` with a :class:`TreeHeader` (:func:`capture`,
:func:`dump`) and reads them back (:func:`read`, then :func:`restore` into a state of the saved
configuration), and a forest as its members' bytes (:func:`capture_forest`,
:func:`read_forest`); it knows no estimator class (each registers its reader for
:func:`load_any`, :func:`register_reader`).

Version 4 stores exactly the state's arrays
(:meth:`~streamtree.tree_state.TreeState.to_arrays`): ``tree.<name>`` for every
:class:`~streamtree.state.TreeArrays` field, ``background.<name>`` for a background tree
being compared, ``drift.<name>`` for the change detector and its history. Node arrays are cut
to the nodes in use and class, column and value axes to their logical sizes (capacity depends
on growth history, not on data: the header keeps the capacities); ``slot_seen`` keeps every
slot, so the free-slot stack reloads as it was, and the slots' statistics stop after the last
slot a leaf holds (a free slot holds an empty one's, as a new array: a tree that stopped
growing saves none); a detector saved before ``adwin_s`` held ``A_DETECTED_AT`` loads with it
0 (no detection on record). Version 3 is version 4 without the linear component's arrays (``lr_*``,
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
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import numpy as np

from streamtree.config import ADDED, FOREST_ADDED
from streamtree.exceptions import FormatError
from streamtree.features import FeatureRegistry
from streamtree.integrity import check_classes, check_count, check_drift, check_tree
from streamtree.kernels.adwin import adwin_from_state
from streamtree.kernels.hgs import sync_alpha
from streamtree.state import (
    ALPHA,
    COL,
    D_ACTIVE,
    D_COMPARED,
    D_DETECTIONS,
    D_DROPPED,
    D_GAP,
    D_N_EVENTS,
    D_SWAPS,
    D_TREE_SINCE,
    DEPTH,
    EVENTS_KEPT,
    F_GAMMA,
    F_GRAD0,
    F_STEP0,
    F_THETA0,
    KIND,
    LAST_ATTEMPT,
    LEFT,
    LOG_MIN_PROBA,
    M_CLASSES,
    M_EXAMPLES,
    M_FREE,
    M_NB_CLASSES,
    M_NB_NOMINAL,
    M_NB_NUMERIC,
    M_NB_SCORED,
    M_NB_VALUES,
    M_NODES,
    M_NOMINAL,
    M_NUMERIC,
    M_REFITS,
    M_STOPPED,
    M_VALUES,
    MAX,
    MIN,
    N_,
    PARENT,
    Q_,
    RIGHT,
    S_,
    SEEN,
    SLOT,
    TreeArrays,
    grow,
    new_arrays,
    new_drift,
)
from streamtree.tree_state import TreeState, prefixed
from streamtree.typing import ClassLabel

__all__ = [
    "FORMAT_VERSION",
    "Capture",
    "SavedForest",
    "SavedTree",
    "TreeHeader",
    "capture",
    "capture_forest",
    "dump",
    "load_any",
    "read",
    "read_forest",
    "register_reader",
    "restore",
]

MAGIC = b"STREAMTREE"
FORMAT_VERSION = 4
_READS = (1, 2, 3, 4)
TREE, FOREST = "streamtree.ProbabilityTree", "streamtree.ProbabilityForest"
FOREST_VERSION = 2  # 2: the members' losses (weighted forests); 1 is still read
_EVENT_CODES = {"detection": 0, "swap": 1, "dropped": 2}
#: Each format's reader (``from_bytes`` of the class it names), registered by the module that
#: defines the class (:func:`register_reader`): :func:`load_any` reads either without this
#: module knowing the classes.
_READERS: dict[str, Callable[[bytes], Any]] = {}


class TreeHeader(NamedTuple):
    """What a saved tree holds besides its state's arrays: the model's configuration, its
    classes in order of first appearance, its feature registry and the examples it learned."""

    config: dict[str, Any]
    classes: list[ClassLabel]
    registry: FeatureRegistry
    n_examples: int


class Capture:
    """A model's saved form at one moment, not yet encoded: its JSON header and copies of its
    arrays (a forest's: its members' captures).

    Taking one only copies memory; :meth:`to_bytes` does the encoding and may run in another
    thread while the model goes on learning, and gives the bytes ``to_bytes`` of the model
    would have given at the moment of the capture."""

    __slots__ = ("arrays", "head")

    def __init__(self, header: dict[str, Any], arrays: Mapping[str, np.ndarray | Capture]) -> None:
        try:
            self.head = json.dumps(header, allow_nan=False).encode()
        except (TypeError, ValueError) as err:
            raise FormatError(
                f"The model cannot be saved: feature names, values and labels must be JSON data ({err})."
            ) from None
        self.arrays = {name: a if isinstance(a, Capture) else a.copy() for name, a in arrays.items()}

    def to_bytes(self) -> bytes:
        """The capture in the model format (see the module docstring)."""
        arrays = {
            name: np.frombuffer(a.to_bytes(), dtype=np.uint8) if isinstance(a, Capture) else a
            for name, a in self.arrays.items()
        }
        buffer = io.BytesIO()
        np.savez(buffer, allow_pickle=False, **arrays)
        return MAGIC + struct.pack(">I", len(self.head)) + self.head + buffer.getvalue()


def capture(state: TreeState, header: TreeHeader) -> Capture:
    """A tree's saved form now (:class:`Capture`): ``header`` and ``state``'s arrays
    (:meth:`~streamtree.tree_state.TreeState.to_arrays`); see the module docstring."""
    head = {
        "format": TREE,
        "version": FORMAT_VERSION,
        "config": header.config,
        "classes": list(header.classes),
        "registry": header.registry.to_state(),
        "n_examples": header.n_examples,
        # capacities: a reloaded model holds (and reports) the memory the saved one held
        "capacity": state.capacities(),
    }
    return Capture(head, state.to_arrays())


def dump(state: TreeState, header: TreeHeader) -> bytes:
    """A tree in the model format (:func:`capture`, encoded)."""
    return capture(state, header).to_bytes()


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
    except (struct.error, ValueError, zipfile.BadZipFile, OSError, EOFError) as err:  # EOF: no archive at all
        raise FormatError(f"Corrupt streamtree model: {err}.") from None
    return header, arrays


def _read(
    data: bytes, kind: str = TREE, versions: tuple[int, ...] = _READS
) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    header, arrays = _unpack(data)
    if not isinstance(header, dict) or header.get("format") != kind:
        raise FormatError(
            f"Not a {kind.split('.')[-1]}: the format is "
            f"{header.get('format') if isinstance(header, dict) else None!r}."
        )
    if header.get("version") not in versions:
        raise FormatError(
            f"Model format version {header.get('version')!r} is not supported; this streamtree reads version {max(versions)}."
        )
    return header, arrays


class SavedTree(NamedTuple):
    """A tree read from the model format (any version this streamtree reads), not yet restored:
    ``config`` is the saved configuration with every parameter added since it was written set
    to the value that rebuilds its model (:data:`~streamtree.config.ADDED`; parameters older
    than the file and still missing are the estimator's defaults), ``header`` and ``arrays``
    the file's own."""

    config: Any
    header: dict[str, Any]
    arrays: dict[str, np.ndarray]


def read(data: bytes) -> SavedTree:
    """A tree written by :func:`dump`, read and checked (:class:`FormatError` for anything else)."""
    header, arrays = _read(data)
    config = header.get("config")
    if config is None:
        raise FormatError("Corrupt streamtree model: its header has no 'config'.")
    if isinstance(config, dict):  # parameters added since it was written: the values that rebuild it
        config = config | {name: value for name, value in ADDED.items() if name not in config}
    return SavedTree(config, header, arrays)


def restore(saved: SavedTree, state: TreeState) -> TreeHeader:
    """Put ``saved``'s arrays into ``state``, a new state of its configuration completed
    (:class:`~streamtree.tree_state.TreeState` of the estimator's ``get_config()``), and return
    its header (the registry rebuilt with that configuration's limits)."""
    header, arrays = saved.header, saved.arrays
    config = state.config
    try:
        registry = FeatureRegistry.from_state(header["registry"], config["max_features"], config["max_categories"])
        classes = check_classes(header["classes"])
        n_examples = check_count(header["n_examples"])
        if header["version"] >= 3:
            state.restore(arrays, header["capacity"])
        else:
            _from_version_2(state, classes, registry, n_examples, header, arrays)
        # a kernel reads indices from these arrays without bounds checks: a crafted file must
        # not reach it (streamtree.integrity)
        for name, t in (("tree", state.tree), ("background", state.background)):
            if t is not None:
                check_tree(t, len(classes), registry.n_numeric, registry.n_nominal, name)
        if state.drift is not None:
            check_drift(state.drift)
    except (KeyError, IndexError, ValueError, TypeError, AttributeError, ArithmeticError) as err:
        # ArithmeticError: JSON's Infinity where an int belongs (int() overflows)
        raise FormatError(f"Corrupt streamtree model: {err!r}.") from None
    return TreeHeader(config, classes, registry, n_examples)


# -- forests ----------------------------------------------------------------------------------
def capture_forest(config: dict[str, Any], n_examples: int, members: list[Capture], loss: np.ndarray) -> Capture:
    """A forest's saved form now: a header with its config and example count, each member's
    capture (:func:`capture`) packed as the member's bytes in a ``uint8`` array ``member.<i>``,
    and the members' losses (``loss``)."""
    header = {"format": FOREST, "version": FOREST_VERSION, "config": config, "n_examples": n_examples}
    arrays: dict[str, np.ndarray | Capture] = {f"member.{i}": m for i, m in enumerate(members)}
    arrays["loss"] = loss
    return Capture(header, arrays)


class SavedForest(NamedTuple):
    """A forest read from the model format, not yet rebuilt (its members are trees' bytes).
    Each reader raises ``KeyError``, ``TypeError``, ``ValueError`` or ``OverflowError`` for a
    corrupt forest."""

    header: dict[str, Any]
    arrays: dict[str, np.ndarray]

    def config(self) -> dict[str, Any]:
        """The configuration, a version-1 forest's read as one that averaged its members
        (:data:`~streamtree.config.FOREST_ADDED`), and the member parameters added since it
        was written as its members were (:data:`~streamtree.config.ADDED`, as :func:`read`
        gives them): a complete ``tree`` config of its time lacks only those."""
        config = FOREST_ADDED | self.header["config"]
        tree = config.get("tree")
        return config | {"tree": ADDED | tree} if isinstance(tree, dict) else config

    def member(self, i: int) -> bytes:
        """Member ``i`` as a tree's bytes (:func:`read`)."""
        return self.arrays[f"member.{i}"].tobytes()

    def n_examples(self) -> int:
        return check_count(self.header["n_examples"])

    def loss(self, n_trees: int) -> np.ndarray:
        """The members' losses (zeros in a version-1 file, which kept none: equal weights)."""
        if "loss" not in self.arrays:
            return np.zeros(n_trees)
        loss = np.array(self.arrays["loss"], dtype=np.float64)
        if loss.shape != (n_trees,):
            raise TypeError(f"loss has shape {loss.shape}, not ({n_trees},)")
        if not np.isfinite(loss).all():  # the members' weights: a NaN would be served as NaN probabilities
            raise ValueError("loss holds a value that is not a finite number")
        return loss


def read_forest(data: bytes) -> SavedForest:
    """A forest written from :func:`capture_forest`, read and checked (:class:`FormatError`)."""
    return SavedForest(*_read(data, FOREST, (1, FOREST_VERSION)))


def register_reader(kind: str, read_bytes: Callable[[bytes], Any]) -> None:
    """Make ``read_bytes`` the reader :func:`load_any` uses for ``kind`` (``TREE`` or ``FOREST``)."""
    _READERS[kind] = read_bytes


def load_any(data: bytes) -> Any:
    """A tree or a forest, whichever ``data`` holds (by its registered reader)."""
    try:  # the header alone says which
        (size,) = struct.unpack(">I", bytes(data[len(MAGIC) : len(MAGIC) + 4]))
        header = json.loads(bytes(data[len(MAGIC) + 4 : len(MAGIC) + 4 + size]))
    except (struct.error, ValueError, TypeError):
        header = None  # the tree's reader says what is wrong
    kind = FOREST if isinstance(header, dict) and header.get("format") == FOREST else TREE
    return _READERS[kind](data)


# -- versions 1 and 2 -------------------------------------------------------------------------
def _from_version_2(
    state: TreeState,
    classes: list[ClassLabel],
    registry: FeatureRegistry,
    n_examples: int,
    header: dict[str, Any],
    arrays: dict[str, np.ndarray],
) -> None:
    """Convert a version 1 or 2 file (the layout before the compiled core) into ``state``'s arrays."""
    state.tree = _tree_from_v2(state, len(classes), registry, header, arrays, n_examples=n_examples)
    drift = header.get("drift")
    if state.drift is not None and drift is not None:  # absent in version 1
        d = new_drift(state.config["drift_delta"])
        b, n, s = adwin_from_state(
            {
                **prefixed(arrays, "drift.detector."),
                **{key[len("detector.") :]: value for key, value in drift.items() if key.startswith("detector.")},
            }
        )
        d.adwin_b[:], d.adwin_n[:], d.adwin_s[:] = b, n, s
        for index, name in (
            (D_GAP, "gap"),
            (D_COMPARED, "compared"),
            (D_DETECTIONS, "n_detections"),
            (D_SWAPS, "n_swaps"),
            (D_DROPPED, "n_dropped"),
            (D_TREE_SINCE, "tree_since"),
        ):
            d.drift_s[index] = float(drift[name])
        events = drift["events"][-EVENTS_KEPT:]
        for i, (kind, at) in enumerate(events):
            d.drift_ev[i] = (_EVENT_CODES[kind], at)
        d.drift_s[D_N_EVENTS] = len(events)
        state.drift = d
        if "background" in arrays:
            bg_header, bg_arrays = _read(arrays["background"].tobytes())
            state.background = _tree_from_v2(
                state, len(classes), registry, bg_header, bg_arrays, n_examples=int(bg_header["n_examples"])
            )
            d.drift_s[D_ACTIVE] = 1.0


def _tree_from_v2(
    state: TreeState,
    k: int,
    reg: FeatureRegistry,
    header: dict[str, Any],
    arrays: dict[str, np.ndarray],
    n_examples: int,
) -> TreeArrays:
    naive_bayes = state.config["naive_bayes"]
    parent = arrays["tree._parent"]
    n = parent.shape[0]
    stats = prefixed(arrays, "stats.")
    slots = stats["seen"].shape[0]
    t = grow(
        new_arrays(slots=slots, naive_bayes=naive_bayes, prior_weight=state.config["prior_weight"]),
        nodes=n,
        classes=k,
        numeric=reg.n_numeric,
        nominal=reg.n_nominal,
        values=reg.max_values,
    )
    for column, name in (
        (PARENT, "_parent"),
        (LEFT, "_left"),
        (RIGHT, "_right"),
        (KIND, "_kind"),
        (COL, "_col"),
        (DEPTH, "_depth"),
        (SLOT, "_slot"),
    ):
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
        t.meta_f[F_THETA0], t.meta_f[F_STEP0], t.meta_f[F_GRAD0] = (
            smoother["theta0"],
            smoother["step0"],
            smoother["grad0"],
        )
        t.meta[M_REFITS] = int(smoother["n_refits"])
    nb = header.get("naive_bayes")
    if naive_bayes and nb is not None:
        nb_arrays = prefixed(arrays, "nb.")
        nb_stats = prefixed(nb_arrays, "stats.")
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


def _stats_into(
    stats: dict[str, np.ndarray], num: np.ndarray, rng: np.ndarray, nom: np.ndarray, seen: np.ndarray
) -> None:
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
