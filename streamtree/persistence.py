"""Streamtree's safe, versioned model format: a JSON header and numpy arrays, never pickle.

Layout: the magic bytes ``b"STREAMTREE"``, a big-endian uint32 header length, the UTF-8 JSON
header (format version, configuration, classes, feature registry, counters, smoother
scalars, drift counters), then an ``.npz`` archive of the arrays, read back with
``allow_pickle=False``. A background tree (see ``drift_delta``) is stored as a nested model in
the same format, as one ``uint8`` array. Version 2 added the drift state and the naive-Bayes
factor; version 1 files still load (no drift history; the factor, when configured, starts
from nothing). Loading a file written by a newer format version, or
anything else, raises :class:`~streamtree.exceptions.FormatError`.
"""

from __future__ import annotations

import io
import json
import struct
import zipfile
from typing import TYPE_CHECKING, Any

import numpy as np

from streamtree.exceptions import FormatError
from streamtree.features import FeatureRegistry
from streamtree.naive_bayes import NaiveBayesFactor
from streamtree.observers import LeafStats

if TYPE_CHECKING:
    from streamtree.tree import ProbabilityTree

__all__ = ["FORMAT_VERSION", "dump", "load"]

MAGIC = b"STREAMTREE"
FORMAT_VERSION = 2
_READS = (1, 2)
_STRUCTURE = ("_parent", "_left", "_right", "_kind", "_col", "_depth", "_slot")


def _split_state(state: dict[str, Any], prefix: str) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    scalars, arrays = {}, {}
    for key, value in state.items():
        if isinstance(value, np.ndarray):
            arrays[prefix + key] = value
        else:
            scalars[key] = value
    return scalars, arrays


def dump(model: ProbabilityTree) -> bytes:
    """Serialise ``model``; see the module docstring for the layout."""
    smoother_scalars, arrays = _split_state(model._smoother.get_state(), "smoother.")
    stats_scalars, stats_arrays = _split_state(model._stats.to_state(), "stats.")
    arrays.update(stats_arrays)
    for name in _STRUCTURE:
        arrays["tree." + name] = np.asarray(getattr(model, name), dtype=np.int64)
    arrays["tree._thr"] = np.asarray(model._thr, dtype=np.float64)
    arrays["tree.counts"] = model.counts_[: model.n_nodes]
    arrays["tree.inherited"] = model._inherited[: model.n_nodes]
    drift: dict[str, Any] | None = None
    if model._drift is not None:
        drift, drift_arrays = _split_state(model._drift.to_state(), "drift.")
        arrays.update(drift_arrays)
    nb_scalars: dict[str, Any] | None = None
    if model._nb is not None:
        nb_scalars, nb_arrays = _split_state(model._nb.to_state(), "nb.")
        arrays.update(nb_arrays)
    if model._background is not None:
        arrays["background"] = np.frombuffer(dump(model._background), dtype=np.uint8)
    header = {
        "format": "streamtree.ProbabilityTree",
        "version": FORMAT_VERSION,
        "config": model.get_config(),
        "classes": list(model.classes_),
        "registry": model.registry.to_state(),
        "n_examples": model.n_examples,
        "growth_stopped": model.growth_stopped,
        "smoother": smoother_scalars,
        "stats": stats_scalars,
        "drift": drift,
        "naive_bayes": nb_scalars,
    }
    try:
        head = json.dumps(header, allow_nan=False).encode()
    except (TypeError, ValueError) as err:
        raise FormatError(f"The model cannot be saved: feature names, values and labels must be JSON data ({err}).") from None
    buffer = io.BytesIO()
    np.savez(buffer, allow_pickle=False, **arrays)
    return MAGIC + struct.pack(">I", len(head)) + head + buffer.getvalue()


def load(cls: type[ProbabilityTree], data: bytes) -> ProbabilityTree:
    """Rebuild a model written by :func:`dump`."""
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
    if header.get("format") != "streamtree.ProbabilityTree":
        raise FormatError(f"Not a ProbabilityTree: the format is {header.get('format')!r}.")
    if header.get("version") not in _READS:
        raise FormatError(
            f"Model format version {header.get('version')!r} is not supported; this streamtree reads version {FORMAT_VERSION}."
        )
    model = cls(**header["config"])
    model.registry = FeatureRegistry.from_state(header["registry"])
    model.classes_ = list(header["classes"])
    model._class_index = {c: i for i, c in enumerate(model.classes_)}
    model.n_examples = int(header["n_examples"])
    model.growth_stopped = bool(header["growth_stopped"])
    for name in _STRUCTURE:
        setattr(model, name, arrays["tree." + name].tolist())
    model._thr = arrays["tree._thr"].tolist()
    n = len(model._parent)
    capacity = max(16, 1 << (n - 1).bit_length())
    model._parent_arr = np.full(capacity, -1, dtype=np.int64)
    model._parent_arr[:n] = model._parent
    model.counts_ = np.zeros((capacity, len(model.classes_)))
    model.counts_[:n] = arrays["tree.counts"]
    model._inherited = np.zeros((capacity, len(model.classes_)))
    model._inherited[:n] = arrays["tree.inherited"]
    stats = {key[len("stats.") :]: value for key, value in arrays.items() if key.startswith("stats.")}
    model._stats = LeafStats.from_state({**stats, **header["stats"]})
    smoother = {key[len("smoother.") :]: value for key, value in arrays.items() if key.startswith("smoother.")}
    model._smoother.set_state({**smoother, **header["smoother"]})
    model._topology = None
    if header.get("naive_bayes") is not None:
        nb = {key[len("nb.") :]: value for key, value in arrays.items() if key.startswith("nb.")}
        model._nb = NaiveBayesFactor.from_state({**nb, **header["naive_bayes"]})
    if model._drift is not None and header.get("drift") is not None:  # absent in version 1
        drift = {key[len("drift.") :]: value for key, value in arrays.items() if key.startswith("drift.")}
        model._drift.set_state({**drift, **header["drift"]})
        if "background" in arrays:
            background = load(cls, arrays["background"].tobytes())
            background.registry = model.registry
            model._drift.background = background
    return model
