"""Only the modules the memory page names may borrow (docs/architecture/memory.md), and a
borrowed array cannot be returned to Python (streamtree/kernels/borrow.py)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import numpy as np
import pytest
from numba import njit

from streamtree.kernels.borrow import BORROWERS, borrow

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "architecture" / "memory.md"
SCANNED = ("streamtree", "app", "bench")
BORROWING = {"borrow", "hold"}  # the functions of streamtree/kernels/borrow.py that borrow or hold
BORROW_MODULE = "streamtree.kernels.borrow"


def _module(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


def _uses(tree: ast.Module) -> list[str]:
    """Every way ``tree`` reaches the borrowing functions: importing them (from their module,
    or re-exported from any other), or reading them from their module (``borrow.hold``,
    ``streamtree.kernels.borrow.borrow``). Importing the module alone (the package's
    ``__init__`` does, to define every kernel) reaches nothing."""
    found, module_aliases = [], {BORROW_MODULE}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if node.module == "streamtree.kernels" and alias.name == "borrow":  # the module
                    module_aliases.add(alias.asname or alias.name)
                elif node.module == BORROW_MODULE or alias.name in BORROWING:
                    found.append(f"from {node.module} import {alias.name}")
        elif isinstance(node, ast.Import):
            module_aliases |= {a.asname for a in node.names if a.name == BORROW_MODULE and a.asname}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in BORROWING and ast.unparse(node.value) in module_aliases:
            found.append(ast.unparse(node))
    return found


def _callers() -> dict[str, list[str]]:
    out = {}
    for top in SCANNED:
        for path in sorted((ROOT / top).rglob("*.py")):
            name = _module(path)
            if name == BORROW_MODULE:
                continue
            uses = _uses(ast.parse(path.read_text(), str(path)))
            if uses:
                out[name] = uses
    return out


def _page_borrowers() -> set[str]:
    """The modules of the page's table "Who may borrow"."""
    section = PAGE.read_text().split("## Who may borrow", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `([\w/]+)\.py` \|", section, re.M)
    return {row.replace("/", ".") for row in rows}


def test_only_the_allowed_modules_borrow() -> None:
    callers = _callers()
    outside = {m: uses for m, uses in callers.items() if m not in BORROWERS}
    assert outside == {}, f"borrowing outside streamtree/kernels/borrow.py:BORROWERS: {outside}"


def test_every_allowed_module_borrows() -> None:
    # an entry left in the allowlist after its module stopped borrowing would allow too much
    assert set(BORROWERS) <= set(_callers())


def test_the_page_names_exactly_the_allowed_modules() -> None:
    assert _page_borrowers() == set(BORROWERS)


def test_the_scan_sees_every_way_of_reaching_borrow() -> None:
    sources = [
        "from streamtree.kernels.borrow import borrow",
        "from streamtree.kernels.borrow import hold as h",
        "from streamtree.kernels import borrow\nborrow.borrow(x)",
        "import streamtree.kernels.borrow\nstreamtree.kernels.borrow.hold(x)",
        "from streamtree.kernels.learn import borrow",  # a re-export
        "import streamtree.kernels.borrow as b\nb.hold(x)",
    ]
    for source in sources:
        assert _uses(ast.parse(source)), source
    for source in ("from streamtree.kernels import borrow", "lock.hold()", "x = hold_time"):
        assert _uses(ast.parse(source)) == [], source


@njit
def _returns_borrowed(a):  # type: ignore[no-untyped-def]
    return borrow(a)


@njit
def _returns_borrowed_view(a):  # type: ignore[no-untyped-def]
    return borrow(a)[1:], 0


@njit
def _returns_either(a, c):  # type: ignore[no-untyped-def]
    b = borrow(a) if c else a  # typed borrowed
    return b


@njit
def _returns_either_owned_first(a, c):  # type: ignore[no-untyped-def]
    b = a if c else borrow(a)  # numba types this owned: the cast is refused
    return b


@njit
def _sums_either(a, c):  # type: ignore[no-untyped-def]
    b = borrow(a) if c else a
    return b.sum()


@pytest.mark.parametrize(
    "kernel", [_returns_borrowed, _returns_borrowed_view, _returns_either, _returns_either_owned_first]
)
def test_a_kernel_returning_a_borrowed_array_does_not_compile(kernel) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(Exception, match="borrowed array"):
        kernel(np.zeros(3), True) if kernel.py_func.__code__.co_argcount == 2 else kernel(np.zeros(3))


@njit
def _total_of_a_copy(a):  # type: ignore[no-untyped-def]
    b = borrow(a)
    c = b.copy()  # an owned array, typed borrowed (it still cannot be returned)
    c[0] = 1.0
    return c.sum() + b[1:].sum()


def test_a_borrowed_array_still_does_what_an_array_does() -> None:
    assert _total_of_a_copy(np.array([5.0, 2.0, 3.0])) == 1.0 + 2.0 + 3.0 + 5.0
    assert _sums_either(np.array([1.0, 2.0]), True) == _sums_either(np.array([1.0, 2.0]), False) == 3.0
