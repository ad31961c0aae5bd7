"""The library ships py.typed: its annotations (and the service's) must type-check."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_library_and_service_type_check() -> None:
    pytest.importorskip("mypy")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "streamtree",
            "app",
            "--no-error-summary",
            "--cache-dir",
            str(ROOT / ".mypy_cache"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
