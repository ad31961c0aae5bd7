"""Every code block of the README and the site that shows an answer is run here, so an answer
cannot go stale: python blocks as doctests, console blocks (curl sessions) against a fresh
service per page (:mod:`tests.docs.blocks`)."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from app.main import create_app
from app.settings import Settings
from tests.docs.blocks import REPO, Block, blocks, calls, pages, run_console, run_python, shell_answers

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # starlette suggests httpx2; httpx is what we have
    from fastapi.testclient import TestClient


def _of(lang: str) -> list[tuple[str, list[Block]]]:
    found = [(str(page.relative_to(REPO)), [b for b in blocks(page) if b.lang == lang]) for page in pages()]
    return [(name, bs) for name, bs in found if bs]


PYTHON = _of("python")
CONSOLE = _of("console")
SHELL = [b for page in pages() for b in blocks(page) if b.lang in ("sh", "bash", "shell")]


def test_the_pages_show_runnable_answers() -> None:
    """The README and the getting-started page show both kinds of session (so a change that
    stops collecting them cannot pass unnoticed)."""
    for page in ("README.md", "docs/getting-started.md"):
        assert page in dict(PYTHON), page
        assert page in dict(CONSOLE), page


@pytest.mark.parametrize("page_blocks", [bs for _, bs in PYTHON], ids=[name for name, _ in PYTHON])
def test_python_blocks(page_blocks: list[Block]) -> None:
    failures = run_python(page_blocks)
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("page_blocks", [bs for _, bs in CONSOLE], ids=[name for name, _ in CONSOLE])
def test_console_blocks(page_blocks: list[Block], tmp_path: Path) -> None:
    for block in page_blocks:
        assert calls(block), f"{block.where}: a console block with no curl command"
    with TestClient(create_app(Settings(data_dir=tmp_path / "data"))) as client:
        failures = run_console(client, page_blocks)
    assert not failures, "\n".join(failures)


def test_shell_blocks_show_no_answer() -> None:
    """An answer belongs in a console block, where it is checked, not in a shell block."""
    found = [line for block in SHELL for line in shell_answers(block)]
    assert not found, "answers in shell blocks (make them console blocks):\n" + "\n".join(found)
