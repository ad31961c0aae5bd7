"""The architecture pages name every module: a newcomer looking for where something lives
finds each file in a layer's table (or its package's row), so a new module goes there too."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: Packages the pages name as a whole (one row for the package, its modules one job each).
PACKAGES = (
    "app/routers/",
    "app/dashboard/",
    "streamtree/client/",
    "streamtree/bulk/",
    "streamtree/smoothing/",
    "streamtree/datasets/",
)


def test_every_module_is_named_on_an_architecture_page() -> None:
    text = "\n".join(p.read_text() for p in sorted((ROOT / "docs" / "architecture").glob("*.md")))
    missing = []
    for package in ("app", "streamtree"):
        for path in sorted((ROOT / package).rglob("*.py")):
            name = path.relative_to(ROOT).as_posix()
            if path.name == "__init__.py" or name.startswith(PACKAGES):
                continue
            if name.startswith("streamtree/kernels/"):  # the kernels' row names them by file
                named = f"`{path.name}`" in text or f"`{name}" in text
            else:
                named = f"`{name}" in text
            if not named:
                missing.append(name)
    assert not missing, f"modules no page of docs/architecture/ names: {missing}"
    for package in PACKAGES:
        assert f"`{package}" in text, package
