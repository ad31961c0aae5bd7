"""The code passes ruff's lint and is as ruff formats it (the rules: ``[tool.ruff]`` in
pyproject.toml), so CI refuses what a reviewer would."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RUFF = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")


@pytest.mark.skipif(RUFF is None, reason="ruff is a dev extra: `make test` installs it")
def test_ruff_lint() -> None:
    result = subprocess.run(
        [str(RUFF), "check", "--no-cache", "."], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.skipif(RUFF is None, reason="ruff is a dev extra: `make test` installs it")
def test_ruff_format() -> None:
    """The code is as ``ruff format`` writes it: run ``ruff format .`` before committing."""
    result = subprocess.run(
        [str(RUFF), "format", "--check", "--no-cache", "."], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout + result.stderr
