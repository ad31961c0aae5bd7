"""Compiled kernels: pure functions of a tree's arrays (:mod:`streamtree.state`).

Every kernel is ``@numba.njit(cache=True)`` (compiled once, cached on disk), takes and mutates
numpy arrays, scalars and the handles of :mod:`streamtree.kernels.handle` and
:mod:`streamtree.kernels.event` (typed lists of them for a forest), and has its formula in its docstring and a test against a slow
pure-Python reference (``tests/reference``). No fastmath and no parallel loops: the same
inputs give the same bits.

Handles and inlined kernels
---------------------------
A tree goes to the kernels as its *handle* (:mod:`streamtree.kernels.handle`), one object
with a field per array, so that a call does not take and release a reference to each of its
arrays (why: ``docs/decisions/compiled-core.md``). The
kernels every example runs are also ``inline="always"`` (compiled into each caller):
``predict.serve``, ``learn.learn_in_tree`` (an example's first learning;
``learn_in_tree_call`` for the rarer uses), ``linear_step.learn_linear`` (and
``linear_step.serve_to_learn``, ``serve`` for a row the loop learns next), ``predict.temper``,
``predict.tree_proba`` and ``leaf_stats.update_stats``. The smoothing itself (``smoothing.path_proba``) and the small
linear kernels stay calls (measured: ``docs/decisions/compiled-core.md``). An
inlined kernel is still callable from Python, and tested so against its reference. What each
step gained, the same bits: ``docs/decisions/compiled-core.md``.

Borrowed arrays
---------------
Even with handles, numba counted references in the loops: every field read, view and call
taking an array added one and released it. A handle's arrays are *borrowed*
(:mod:`streamtree.kernels.borrow`: no owner pointer, so no counting) and its Python object
holds them; the entry points (``learn.learn_rows``, ``predict.predict_rows``, the forest's
``learn_forest_rows`` and ``predict_forest_rows``, ``split.best_split``'s buffer) borrow their
arguments and working arrays too. A borrowed array cannot go back to Python: its numba type
is not boxed. Who owns each array, who may borrow it and for how long: the rules,
``docs/architecture/memory.md``.

The on-disk cache
-----------------
Numba invalidates a cached function when *its own* source file changes, not when a kernel it
calls (in another module) does; a stale caller can then crash the process. So the kernels'
cache lives in a directory named by a hash of every kernel source file, of
``streamtree/state.py`` (the arrays' layout the kernels index by) and of the numba and numpy
versions: any change compiles afresh. The base directory is ``$STREAMTREE_KERNEL_CACHE``
(the Docker image sets it), else ``$NUMBA_CACHE_DIR``, else ``~/.cache/streamtree``; when this
process cannot write there (a read-only filesystem, another user's directory), the compiled
kernels found there are copied to a private temporary directory and used from it. Numba's
own setting is restored after the kernels are defined, so other numba code in the process
keeps its cache where it was. Every kernel module is imported here, under that setting: numba
reads it when a function is defined, and a module imported later would cache in-tree
(``tests/kernels/test_cache.py``).
"""

from __future__ import annotations

import atexit
import hashlib
import os
import shutil
import tempfile
from pathlib import Path

import numba
import numpy as np

__all__ = ["CACHE_DIR", "usable"]


def _cache_dir() -> str:
    here = Path(__file__).resolve().parent
    digest = hashlib.sha256(f"{numba.__version__} {np.__version__}".encode())
    for source in sorted(here.glob("*.py")):
        digest.update(source.name.encode())
        digest.update(source.read_bytes())
    digest.update((here.parent / "state.py").read_bytes())  # the layout constants kernels compile in
    base = os.environ.get("STREAMTREE_KERNEL_CACHE") or os.environ.get("NUMBA_CACHE_DIR")
    root = Path(base) if base else Path.home() / ".cache" / "streamtree"
    return str(usable(root / f"kernels-{digest.hexdigest()[:16]}"))


def usable(chosen: Path) -> Path:
    """``chosen`` if this process can cache kernels there, else a private copy of it."""
    if _writable(chosen):
        return chosen
    # numba uses only a cache directory it can write to, and would fall back to one of its own
    # (recompiling everything, outside the directory named by the sources): a read-only root
    # filesystem, or a user other than the one that compiled them (a container's --user). The
    # compiled kernels are copied to a fresh private directory instead, removed at exit.
    scratch = Path(tempfile.mkdtemp(prefix="streamtree-kernels-"))
    atexit.register(shutil.rmtree, scratch, ignore_errors=True)
    if chosen.is_dir():
        shutil.copytree(chosen, scratch / chosen.name, dirs_exist_ok=True)
    return scratch / chosen.name


def _writable(directory: Path) -> bool:
    """Whether ``directory`` exists or can be made, and takes a new file (as numba checks)."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=directory):
            return True
    except OSError:
        return False


CACHE_DIR = _cache_dir()
"""Where the compiled kernels are cached (see the module docstring)."""

# getattr/setattr: numba.config's attributes are set at import time, unknown to type checkers
_previous = getattr(numba.config, "CACHE_DIR")  # noqa: B009
setattr(numba.config, "CACHE_DIR", CACHE_DIR)  # noqa: B010
try:  # define every kernel now, under this cache directory
    from streamtree.kernels import (  # noqa: F401  (every module of the package: tests/kernels/test_cache.py)
        adwin,
        borrow,
        codes,
        criteria,
        drift,
        event,
        forest,
        grow,
        handle,
        hgs,
        hgs_loss,
        leaf_stats,
        learn,
        linear,
        linear_step,
        naive_bayes,
        predict,
        randomness,
        reductions,
        refit,
        route,
        smoothing,
        split,
    )
finally:
    setattr(numba.config, "CACHE_DIR", _previous)  # noqa: B010
