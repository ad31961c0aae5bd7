"""Fixtures of the bulk-command tests: one real service (``streamtree serve`` in a subprocess
on a free loopback port, a temporary data directory, an API key) for the package, a client of
it, a table of rows with blank cells written in each format, and the commands run as the
console script (a subprocess) or in this process."""

from __future__ import annotations

import gzip
import itertools
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pandas as pd
import pytest

from streamtree.client import Client
from tests.app.test_process import ROOT, free_port, start

#: The service's API key: writes need it, reads are open.
TOKEN = "bulk-test-key-0123456789"
EXE = Path(sys.executable).parent / "streamtree"

_names = itertools.count()


@dataclass(frozen=True)
class Service:
    """A running service: its URL."""

    url: str


@pytest.fixture(scope="session")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """One service (with an API key) for every bulk test: each test has its own models."""
    port = free_port()
    proc = start(tmp_path_factory.mktemp("bulk") / "data", port, api_keys=TOKEN)
    yield Service(f"http://127.0.0.1:{port}")
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.fixture
def client(service: Service) -> Iterator[Client]:
    with Client(service.url, token=TOKEN, retries=2, backoff=0.01) as c:
        yield c


def fresh_name() -> str:
    """A model name no other test uses."""
    return f"bulk{next(_names)}"


def table(n: int, seed: int = 0) -> pd.DataFrame:
    """``n`` rows: an id, three numeric columns (blank cells in two), an integer, a string
    (blank cells), a boolean, and a label ``y`` (``yes``/``no``) that depends on them."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 3))
    frame = pd.DataFrame(
        {
            "rid": [f"r{i}" for i in range(n)],
            "a": x[:, 0],
            "b": x[:, 1],
            "c": x[:, 2],
            "k": rng.integers(0, 5, size=n),
            "s": rng.choice(["red", "green", "blue"], size=n).astype(object),
            "flag": rng.random(n) < 0.5,
        }
    )
    frame.loc[frame.index % 7 == 3, "b"] = np.nan
    frame.loc[frame.index % 11 == 5, "s"] = None
    frame.loc[frame.index % 13 == 2, "c"] = np.nan
    y = (frame["a"] + (frame["s"] == "red") * 0.8 + rng.normal(scale=0.3, size=n)) > 0
    frame["y"] = np.where(y, "yes", "no")
    return frame


def features(frame: pd.DataFrame, drop: tuple[str, ...] = ("rid", "y")) -> list[dict[str, Any]]:
    """Each row's features as the service should log them: blank cells left out."""
    out = []
    for record in frame.drop(columns=list(drop)).to_dict("records"):
        out.append({k: v for k, v in record.items() if not (v is None or (isinstance(v, float) and np.isnan(v)))})
    return out


def expected_events(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """The events a learn of ``frame`` (label ``y``, id ``rid``) logs, in order."""
    return [{"features": f, "label": y} for f, y in zip(features(frame), frame["y"].tolist(), strict=True)]


def write(frame: pd.DataFrame, path: Path) -> Path:
    """``frame`` written at ``path`` in the format its suffix names."""
    name = path.name
    if name.endswith((".csv", ".csv.gz")):
        frame.to_csv(path, index=False)
    elif name.endswith(".tsv"):
        frame.to_csv(path, index=False, sep="\t")
    elif name.endswith(".parquet"):
        frame.to_parquet(path, index=False)
    elif name.endswith((".jsonl", ".jsonl.gz")):  # orjson: floats exactly (pandas' to_json rounds)
        text = b"".join(orjson.dumps(r) + b"\n" for r in frame.to_dict("records"))
        path.write_bytes(gzip.compress(text) if name.endswith(".gz") else text)
    else:
        raise ValueError(name)
    return path


def logged(client: Client, name: str) -> list[dict[str, Any]]:
    """The model's event log (its export), without the seqs."""
    return [{"features": e["features"], "label": e["label"]} for e in client.model(name).events()]


def env(service: Service, **more: str) -> dict[str, str]:
    """The environment of a command run as a subprocess: this checkout first on the path."""
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return os.environ | {"PYTHONPATH": path, "STREAMTREE_URL": service.url, "STREAMTREE_TOKEN": TOKEN} | more


def cli(service: Service, *args: str, stdin: bytes | None = None, **more: str) -> subprocess.CompletedProcess[bytes]:
    """``streamtree ARGS`` as a subprocess (the console script), its output captured."""
    return subprocess.run(
        [str(EXE), *args], input=stdin, capture_output=True, env=env(service, **more), timeout=120, check=False
    )


@pytest.fixture(scope="module")
def trained(service: Service) -> str:
    """A model that learned 600 rows (one per test module)."""
    name = fresh_name()
    with Client(service.url, token=TOKEN) as c:
        model = c.model(name)
        model.create()
        model.learn_batch(expected_events(table(600, seed=10)))
    return name
