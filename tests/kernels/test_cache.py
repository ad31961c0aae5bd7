"""Every compiled kernel is cached in the hashed directory, and a change to any kernel source
compiles afresh (:mod:`streamtree.kernels`, "The on-disk cache").

numba notices a change to a cached function's own file only, so a kernel cached anywhere else
(numba's default is ``__pycache__`` beside the source) could outlive a change to a kernel it
calls, such as :func:`~streamtree.kernels.borrow.borrow`. These tests run a copy of the
package in a fresh interpreter, with its own cache directory.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import streamtree

PACKAGE = Path(streamtree.__file__).resolve().parent

# compiles a handle constructor (handle.py, which calls borrow.py's intrinsic) and hold
PROGRAM = r"""
import json
import numpy as np
import streamtree.kernels as kernels
from streamtree.kernels import borrow, handle
from streamtree.state import new_arrays
handle.tree_handle(new_arrays())
borrow.hold(np.zeros(1))
stats = [handle._tree_handle.stats, borrow.hold.stats]
print(json.dumps({"cache_dir": kernels.CACHE_DIR, "hits": sum(sum(s.cache_hits.values()) for s in stats),
                  "misses": sum(sum(s.cache_misses.values()) for s in stats)}))
"""


def _run(root: Path, cache: Path) -> dict[str, object]:
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "STREAMTREE_KERNEL_CACHE")}
    env |= {"PYTHONPATH": str(root), "STREAMTREE_KERNEL_CACHE": str(cache), "PYTHONDONTWRITEBYTECODE": "1"}
    result = subprocess.run(
        [sys.executable, "-c", PROGRAM], capture_output=True, text=True, env=env, cwd=root, timeout=900
    )
    assert result.returncode == 0, result.stderr[-3000:]
    answer: dict[str, object] = json.loads(result.stdout.strip().splitlines()[-1])
    return answer


def _numba_files(where: Path) -> set[Path]:
    return {p for pattern in ("*.nbi", "*.nbc") for p in where.rglob(pattern)}


def test_a_changed_kernel_source_compiles_afresh_and_nothing_is_cached_in_the_package(tmp_path: Path) -> None:
    root, cache = tmp_path / "src", tmp_path / "cache"
    shutil.copytree(PACKAGE, root / "streamtree", ignore=shutil.ignore_patterns("__pycache__"))
    package = root / "streamtree"

    first = _run(root, cache)
    assert Path(str(first["cache_dir"])).parent == cache and first["misses"] > 0
    compiled = _numba_files(Path(str(first["cache_dir"])))
    assert {p.name.split(".")[0] for p in compiled} >= {"handle", "borrow"}, compiled

    second = _run(root, cache)  # unchanged: loaded from the cache
    assert second["cache_dir"] == first["cache_dir"] and second["hits"] > 0 and second["misses"] == 0

    borrow = package / "kernels" / "borrow.py"
    borrow.write_text(borrow.read_text() + "\n# a change to a kernel that handle.py calls\n")
    third = _run(root, cache)
    assert third["cache_dir"] != first["cache_dir"] and third["misses"] > 0 and third["hits"] == 0
    assert {p.name.split(".")[0] for p in _numba_files(Path(str(third["cache_dir"])))} >= {"handle", "borrow"}

    assert _numba_files(package) == set(), "a kernel was cached inside the package, outside the hashed directory"


def test_the_package_imports_every_kernel_module_under_the_hashed_directory() -> None:
    """A kernel module imported only after ``streamtree.kernels`` would be defined, and cached,
    outside the hashed directory (numba reads its cache setting when a function is defined)."""
    program = (
        "import sys, pathlib, streamtree.kernels as k; here = pathlib.Path(k.__file__).parent; "
        "print(sorted(p.stem for p in here.glob('*.py') if p.stem != '__init__' "
        "and 'streamtree.kernels.' + p.stem not in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True, timeout=300)
    assert result.stdout.strip() == "[]"


def test_a_cache_this_process_cannot_write_is_used_from_a_private_copy(tmp_path: Path) -> None:
    # numba caches only where it can write: under a read-only root filesystem (or as another
    # user than the one that compiled them) it recompiled every kernel into a directory of its
    # own, $HOME/.cache/numba (a container's data volume), outside the hashed directory
    root, cache = tmp_path / "src", tmp_path / "cache"
    shutil.copytree(PACKAGE, root / "streamtree", ignore=shutil.ignore_patterns("__pycache__"))
    first = _run(root, cache)
    hashed = Path(str(first["cache_dir"]))
    before = _numba_files(hashed)
    # immutable: refused to root too (a mode would not be), as a read-only mount refuses
    if subprocess.run(["chattr", "-R", "+i", str(hashed)], capture_output=True).returncode != 0:
        pytest.skip("chattr +i is not available on this filesystem")
    try:
        second = _run(root, cache)
    finally:
        subprocess.run(["chattr", "-R", "-i", str(hashed)], check=True)
    assert Path(str(second["cache_dir"])).name == hashed.name and Path(str(second["cache_dir"])) != hashed
    assert second["hits"] > 0 and second["misses"] == 0  # loaded from the copy: nothing compiled
    assert _numba_files(hashed) == before
    assert not Path(str(second["cache_dir"])).exists()  # the copy is removed at exit
