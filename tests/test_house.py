"""The house rules a newcomer relies on, checked on the sources of ``streamtree/`` and ``app/``:
no import circle (function-level and type-checking imports included), no module reading
another module's underscore names, and no compiled-kernel cache file inside the package; and
on those of ``tests/`` and ``bench/`` too, no file over 500 lines."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("streamtree", "app")
MAX_LINES = 500
LINE_COUNTED = ("streamtree", "app", "tests", "bench")
#: NamedTuple's public API (``_fields``, ``_replace``, ``_asdict``, ``_make``), numba's
#: ``_getvalue`` and ``os._exit`` are underscore names meant for callers.
PUBLIC_UNDERSCORE = {"_fields", "_replace", "_asdict", "_make", "_getvalue", "_exit"}


def modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
            found[name] = path
    return found


MODULES = modules()


def _base(module: str, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    parts = module.split(".")
    if MODULES[module].name != "__init__.py":
        parts = parts[:-1]
    parts = parts[: len(parts) - (node.level - 1)]
    return ".".join([*parts, node.module] if node.module else parts)


def _known(name: str) -> str | None:
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def imports(module: str) -> set[str]:
    """The house modules ``module`` imports anywhere in its source (a package's ``__init__``
    counts for ``from package import name`` only when ``name`` is not a submodule)."""
    out = set()
    for node in ast.walk(ast.parse(MODULES[module].read_text())):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _base(module, node)
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
        else:
            continue
        out |= {t for t in map(_known, targets) if t is not None and t != module}
    return out


def circles() -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    graph = {m: imports(m) for m in MODULES}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_no_import_circle() -> None:
    assert circles() == []


def test_no_file_over_500_lines() -> None:
    paths = [p for top in LINE_COUNTED for p in sorted((ROOT / top).rglob("*.py"))]
    assert len(paths) > 300  # the walk found the sources
    long = {str(p.relative_to(ROOT)): n for p in paths if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert long == {}


def underscore_reads() -> list[str]:
    """Each ``from m import _x`` and each ``obj._x`` (``obj`` not ``self`` or ``cls``)."""
    reads = []
    for module, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                reads += [
                    f"{module}: from {node.module} import {a.name}"
                    for a in node.names
                    if a.name.startswith("_") and not a.name.startswith("__")
                ]
            elif (
                isinstance(node, ast.Attribute)
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
                and node.attr not in PUBLIC_UNDERSCORE
                and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
            ):
                reads.append(f"{module}:{node.lineno}: .{node.attr}")
    return reads


def test_no_module_reads_another_modules_underscore_names() -> None:
    assert underscore_reads() == []


def test_no_compiled_kernel_cache_inside_the_package() -> None:
    cached = [p for package in PACKAGES for p in (ROOT / package).rglob("*") if p.suffix in (".nbi", ".nbc")]
    assert cached == []


def test_the_checks_see_a_circle_and_an_underscore_read(tmp_path: Path) -> None:
    """The checks can fail: two modules importing each other form a circle, and a third reads
    underscore names (its own ``self._x`` and NamedTuple's ``_fields`` are not counted)."""
    global MODULES
    saved = MODULES
    try:
        (tmp_path / "a.py").write_text("from b import x\n")
        (tmp_path / "b.py").write_text("def f():\n    from a import y\n")
        (tmp_path / "c.py").write_text("from a import _hidden\nimport b\nb.thing._state\nself._own\nt._fields\n")
        MODULES = {"a": tmp_path / "a.py", "b": tmp_path / "b.py", "c": tmp_path / "c.py"}
        assert circles() == [["a", "b"]]
        assert underscore_reads() == ["c: from a import _hidden", "c:3: ._state"]
    finally:
        MODULES = saved
