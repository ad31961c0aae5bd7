"""What installing streamtree (its wheel or sdist) installs: both hold every module of the
library and of the server (as ``streamtree_server``, never a top-level ``app``), the server's
dependencies only in its extra, and the library and client import without them.

The full install of each artifact in a clean virtual environment (library example, the client
against ``streamtree serve`` from that install, ``twine check``) is CI's ``.ci/package-check``:
it downloads the dependencies, which the suite does not.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tarfile
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SERVER_ONLY = ("fastapi", "uvicorn", "pydantic", "psycopg", "prometheus_client", "pydantic_settings")


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    # --no-isolation: the venv's setuptools (the suite runs offline); CI builds isolated too
    result = subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--sdist", "--wheel", "--outdir", str(out), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return out


def sources(folder: str) -> set[str]:
    return {
        p.relative_to(ROOT / folder).as_posix() for p in (ROOT / folder).rglob("*.py") if "__pycache__" not in p.parts
    }


def test_the_wheel_holds_the_library_and_the_server_and_no_top_level_app(dist: Path) -> None:
    (wheel,) = dist.glob("*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert tops == {"streamtree", "streamtree_server"}
    assert {f"streamtree/{s}" for s in sources("streamtree")} <= names
    assert {f"streamtree_server/{s}" for s in sources("app")} <= names
    assert "streamtree_server/dashboard/static/index.html" in names
    assert "streamtree/py.typed" in names
    assert not any("kernel-cache" in n or n.endswith((".nbi", ".nbc")) for n in names)


def test_the_server_dependencies_are_only_in_the_server_extra(dist: Path) -> None:
    (wheel,) = dist.glob("*.whl")
    archive = zipfile.ZipFile(wheel)
    (meta,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
    metadata = Parser().parsestr(archive.read(meta).decode())
    requires = metadata.get_all("Requires-Dist") or []
    base = [r for r in requires if "extra ==" not in r]
    server = [r for r in requires if 'extra == "server"' in r]
    assert {re.match(r"[\w.-]+", r).group(0) for r in base} >= {"numpy", "numba", "river", "httpx"}  # type: ignore[union-attr]
    assert not any(r.lower().startswith(("fastapi", "uvicorn", "psycopg", "pydantic")) for r in base)
    assert any(r.startswith("fastapi") for r in server) and any(r.startswith("psycopg") for r in server)
    assert metadata["License-Expression"] == "BSD-3-Clause"
    (entry,) = [n for n in archive.namelist() if n.endswith(".dist-info/entry_points.txt")]
    assert "streamtree = streamtree.cli:main" in archive.read(entry).decode()
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in archive.namelist())


def test_the_sdist_builds_the_same_packages(dist: Path) -> None:
    (sdist,) = dist.glob("*.tar.gz")
    names = {n.split("/", 1)[1] for n in tarfile.open(sdist).getnames() if "/" in n}
    assert {f"app/{s}" for s in sources("app")} <= names
    assert {f"streamtree/{s}" for s in sources("streamtree")} <= names
    assert {"pyproject.toml", "LICENSE", "README.md"} <= names


def test_twine_accepts_both(dist: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", *map(str, sorted(dist.iterdir()))],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr


BLOCK_SERVER = f"""
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {SERVER_ONLY!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
sys.meta_path.insert(0, Block())
"""


def test_the_library_and_client_import_without_the_server_dependencies() -> None:
    code = BLOCK_SERVER + (
        "import streamtree, streamtree.client\n"
        "from streamtree import ProbabilityTree\n"
        "m = ProbabilityTree(); m.learn_one({'a': 1.0}, 'x')\n"
        "assert m.predict_proba_one({'a': 1.0}) == {'x': 1.0}\n"
        "assert not {n.split('.')[0] for n in sys.modules} & " + repr(set(SERVER_ONLY)) + "\n"
        "from streamtree import cli\n"
        "cli.main(['serve'])\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd="/")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "streamtree serve: The service needs the server extra: install streamtree with it" in result.stderr
