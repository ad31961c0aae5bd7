"""A throwaway PostgreSQL cluster for the tests, started from the server binaries.

Debian's ``postgresql`` package puts ``initdb`` and ``pg_ctl`` under
``/usr/lib/postgresql/<version>/bin`` (``.ci/run`` installs it when missing). The cluster
listens on a free loopback port with its unix socket in its own temporary directory, trusts
local connections, and is removed at the end of the session. As root (CI), the server runs
as the ``postgres`` user, which must own the data directory.

``fsync`` is off: the tests kill the *service* process, never the database server, so the
server's own crash safety is not what they check, and it makes each test's fresh database
cheap on a shared machine.

Fixtures (imported by ``tests/app/conftest.py``): ``pg_cluster`` (session) and ``pg_url``
(a fresh empty database for one test).
"""

from __future__ import annotations

import glob
import itertools
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

__all__ = ["Cluster", "find_bin_dir", "pg_cluster", "pg_url"]

BIN_GLOB = "/usr/lib/postgresql/*/bin"


def find_bin_dir() -> Path | None:
    """The newest ``/usr/lib/postgresql/<version>/bin`` holding ``initdb`` and ``pg_ctl``, if any."""
    found = [Path(d) for d in glob.glob(BIN_GLOB) if (Path(d) / "initdb").exists() and (Path(d) / "pg_ctl").exists()]
    return max(found, key=lambda d: int(d.parent.name) if d.parent.name.isdigit() else 0) if found else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Cluster:
    """A running test cluster: where it listens, and how to make fresh databases on it."""

    root: Path
    bin_dir: Path
    port: int
    _names: Iterator[int] = field(default_factory=lambda: itertools.count(1))

    def url(self, db: str = "postgres") -> str:
        """A ``postgresql://`` URL of database ``db`` over loopback TCP."""
        return f"postgresql://postgres@127.0.0.1:{self.port}/{db}"

    def create_database(self) -> str:
        """Create a new empty database; return its URL."""
        import psycopg

        name = f"t{next(self._names)}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return self.url(name)

    def start(self, options: str) -> None:
        """Start the server (again) with ``options`` (``postgres -c ...``, as :func:`start_cluster` gives)."""
        self.pg_ctl("start", "-w", "-t", "60", "-l", str(self.root / "server.log"), "-o", options)

    def options(self, fsync: bool = False) -> str:
        """The server options of this cluster: its port, its socket directory, the durability."""
        return (
            f"-c listen_addresses=127.0.0.1 -c port={self.port} -c unix_socket_directories={self.root} "
            f"-c max_connections=200 -c fsync={'on' if fsync else 'off'} "
            f"-c full_page_writes={'on' if fsync else 'off'}"
        )

    def pg_ctl(self, *args: str) -> None:
        """Run ``pg_ctl`` on the cluster (as the ``postgres`` user when root)."""
        _run([str(self.bin_dir / "pg_ctl"), "-D", str(self.root / "data"), *args])


def _run(cmd: list[str]) -> None:
    if os.geteuid() == 0:  # the server refuses to run as root
        cmd = ["runuser", "-u", "postgres", "--", *cmd]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")


def start_cluster(fsync: bool = False) -> Cluster:
    """Initialise and start a cluster in a new temporary directory.

    Raises
    ------
    FileNotFoundError
        No PostgreSQL server binaries under ``/usr/lib/postgresql/*/bin``.
    """
    bin_dir = find_bin_dir()
    if bin_dir is None:
        raise FileNotFoundError(
            f"no PostgreSQL server binaries (initdb, pg_ctl) under {BIN_GLOB}; "
            "install Debian's postgresql package (.ci/run does)"
        )
    # Under /tmp itself: pytest's own temporary directories are private to root, and the
    # server (user postgres) must reach its data directory and socket.
    root = Path(tempfile.mkdtemp(prefix="streamtree-pg-"))
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
    port = _free_port()
    cluster = Cluster(root, bin_dir, port)
    try:
        _run(
            [
                str(bin_dir / "initdb"),
                "-D",
                str(root / "data"),
                "-U",
                "postgres",
                "-A",
                "trust",
                "-E",
                "UTF8",
                "--locale=C.UTF-8",
                "--no-sync",
            ]
        )
        cluster.start(cluster.options(fsync))
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        raise
    return cluster


def stop_cluster(cluster: Cluster) -> None:
    """Stop the server at once and remove its directory."""
    try:
        cluster.pg_ctl("stop", "-m", "immediate", "-w")
    finally:
        shutil.rmtree(cluster.root, ignore_errors=True)


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[Cluster]:
    """A PostgreSQL cluster for the whole session; the test is skipped if the binaries are missing."""
    try:
        cluster = start_cluster()
    except FileNotFoundError as exc:
        pytest.skip(str(exc))
    try:
        yield cluster
    finally:
        stop_cluster(cluster)


@pytest.fixture
def pg_url(pg_cluster: Cluster) -> str:
    """The URL of a fresh, empty database on the session's cluster."""
    return pg_cluster.create_database()
