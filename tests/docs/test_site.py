"""The documentation site builds strictly, the README stays a front door, the pages cite code
that exists and settings that exist, and nothing points outside the repository."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

from tests.docs.blocks import DOCS, REPO, pages

CODE_REF = re.compile(r"`((?:streamtree|app|bench|tests|docker)/[\w/.-]+\.py)(?::([\w.]+))?`")
LINK = re.compile(r"\]\(([^)\s#]+)(?:#[^)\s]*)?\)")


def _nav_pages(nav: list[object]) -> list[str]:
    out: list[str] = []
    for item in nav:
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, dict):
            for value in item.values():
                out.extend(_nav_pages(value) if isinstance(value, list) else [value])
    return out


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    """``mkdocs build --strict``: a broken link, anchor or docstring reference, or a page left
    out of the nav, fails it."""
    env = os.environ | {"NO_MKDOCS_2_WARNING": "1"}
    run = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    site = tmp_path / "site"
    for page in ("architecture/learn-trace", "reference/models", "getting-started", "bench/results/speed"):
        assert (site / page / "index.html").is_file(), page
    assert "ProbabilityTree" in (site / "reference" / "models" / "index.html").read_text()  # mkdocstrings ran


def test_the_nav_lists_every_page_and_at_least_eight() -> None:
    config = yaml.load((REPO / "mkdocs.yml").read_text(), Loader=yaml.BaseLoader)
    listed = _nav_pages(config["nav"])
    found = sorted(str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md"))
    assert sorted(listed) == found
    assert len(listed) >= 8
    assert {
        "architecture/index.md",
        "reference/index.md",
        "getting-started.md",
        "known-limits.md",
        "contributing.md",
        "benchmarks/index.md",
    } <= set(listed)


def test_the_readme_is_a_front_door() -> None:
    lines = (REPO / "README.md").read_text().splitlines()
    assert len(lines) <= 200
    first = "\n".join(lines[:20])
    assert "make serve" in first and "make test" in first
    assert "two to three minutes" in "\n".join(lines[:30])  # the first start compiles the kernels


def test_make_serve_takes_a_port() -> None:
    makefile = (REPO / "Makefile").read_text()
    assert re.search(r"^PORT \?= 8000$", makefile, re.M)
    serve = makefile[makefile.index("\nserve:") :]
    assert "--port $(PORT)" in serve.split("\n\n")[0]


def test_cited_code_exists() -> None:
    """Every ``path.py`` or ``path.py:name`` a page cites is a file defining that name (its
    last part: ``app/hosting.py:ModelHost.learn`` needs ``def learn`` or ``class learn``)."""
    missing = []
    for page in pages():
        for m in CODE_REF.finditer(page.read_text()):
            path, name = REPO / m[1], m[2]
            if not path.is_file():
                missing.append(f"{page.relative_to(REPO)}: {m[1]}")
            elif name and not re.search(
                rf"^\s*(async def|def|class) {re.escape(name.split('.')[-1])}\b|^{re.escape(name)}\b",
                path.read_text(),
                re.M,
            ):
                missing.append(f"{page.relative_to(REPO)}: {m[1]}:{name}")
    assert not missing, "cited, but not in the code:\n" + "\n".join(missing)


def test_every_setting_is_documented() -> None:
    from app.settings import Settings

    text = (DOCS / "operations" / "settings.md").read_text()
    undocumented = [name for name in Settings.model_fields if f"`{name}`" not in text]
    assert not undocumented, f"document these settings in docs/operations/settings.md: {undocumented}"


def _own_files() -> list[Path]:
    files = [
        REPO / "README.md",
        REPO / "mkdocs.yml",
        REPO / "Makefile",
        REPO / "docker" / "test-image.sh",
        *DOCS.rglob("*.md"),
        *DOCS.rglob("*.py"),
    ]
    files += [
        p
        for p in (REPO / "bench").rglob("*")
        if p.is_file() and p.suffix in (".py", ".md", ".sh") and "paper" not in p.parent.name
    ]
    return files


def test_nothing_points_outside_the_repository() -> None:
    """No absolute workspace path, no sibling ``shared/`` directory, no relative link that
    leaves the repository: a fresh clone has everything the docs and benchmarks cite."""
    found = []
    for path in _own_files():
        text = path.read_text()
        for pattern in (r"/work/", r"(?<![\w-])shared/", r"\.\./shared"):
            for m in re.finditer(pattern, text):
                line = text.count("\n", 0, m.start()) + 1
                found.append(f"{path.relative_to(REPO)}:{line}: {pattern}")
        if path.suffix == ".md":
            for m in LINK.finditer(text):
                target = m[1]
                if "://" in target or target.startswith("mailto:"):
                    continue
                resolved = (path.parent / target).resolve()
                if not resolved.is_relative_to(REPO):
                    found.append(f"{path.relative_to(REPO)}: link {target} leaves the repository")
                elif not resolved.exists():
                    found.append(f"{path.relative_to(REPO)}: link {target} points at nothing")
    assert not found, "\n".join(found)


def test_the_quick_paper_bench_has_its_data_in_the_repository() -> None:
    from bench import paper

    assert paper.DATA.resolve().is_relative_to(REPO)
    assert (paper.DATA / "paper_results.csv").is_file()
    assert sorted(p.stem for p in paper.DATA.glob("*.arff")) == sorted(paper.QUICK)
