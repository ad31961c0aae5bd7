"""The service's own cost per request, measured against a model stub that costs almost nothing.

``bench/http_load.py`` measures the service with the real library, whose speed changes from
release to release; this benchmark replaces the model with :class:`StubModel` (the same
interface, constant answers) so what remains is the service: HTTP parsing, validation,
routing, the writer's group commit, the prequential scores, the SQLite commit and the
response. Besides rates and latencies it reports the server process's CPU time per request
(from ``/proc``), which does not depend on the client sharing the machine.

Usage::

    flock /tmp/streamtree-bench.lock .venv/bin/python -m bench.service_overhead [--library] [--profile FILE]

``--library`` serves the real model instead, for the same table with the library's cost in
it. ``--profile`` runs the server's event loop thread under cProfile and writes the stats to
FILE on exit (read them with ``python -m pstats FILE``). Nothing is written to
``bench/results``: this is a tool for work on the service, not a published result.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Hashable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from bench.http_load import free_port, make_stream, run_load

ROOT = Path(__file__).resolve().parent.parent


class StubCapture:
    """A stub model's saved form: the bytes it gives (the library's ``Capture`` interface)."""

    def __init__(self, blob: bytes) -> None:
        self.blob = blob

    def to_bytes(self) -> bytes:
        return self.blob


class StubModel:
    """A model with the interface the service uses and (almost) no cost: uniform predictions."""

    def __init__(self, **config: Any) -> None:
        if config:
            from streamtree.exceptions import ConfigError

            raise ConfigError(f"The stub takes no parameters. Got {sorted(config)}.", param=next(iter(config)))
        self.classes_: list[Any] = []
        self._index: dict[Any, int] = {}
        self.n_examples = 0

    def get_config(self) -> dict[str, Any]:
        return {}

    def _uniform(self, n: int) -> np.ndarray:
        k = len(self.classes_)
        return np.full((n, k), 1.0 / k) if k else np.zeros((n, 0))

    def learn_many(
        self, X: Sequence[Mapping[Hashable, Any]], y: Sequence[Any], *, return_proba: bool = False
    ) -> np.ndarray | None:
        for label in y:
            if label not in self._index:
                self._index[label] = len(self.classes_)
                self.classes_.append(label)
        self.n_examples += len(y)
        return self._uniform(len(y)) if return_proba else None

    def predict_proba_one(self, x: Mapping[Hashable, Any]) -> dict[Any, float]:
        k = len(self.classes_)
        return dict.fromkeys(self.classes_, 1.0 / k) if k else {}

    def predict_proba(self, X: Sequence[Mapping[Hashable, Any]]) -> np.ndarray:
        return self._uniform(len(X))

    def explain_one(self, x: Mapping[Hashable, Any]) -> dict[str, Any]:
        return {"path": []}

    @property
    def tree_(self) -> dict[str, Any]:
        return {"nodes": []}

    def summary(self) -> dict[str, Any]:
        return {
            "n_nodes": 1,
            "n_leaves": 1,
            "depth": 0,
            "n_examples": self.n_examples,
            "classes": list(self.classes_),
            "drift": {"n_detections": 0, "n_swaps": 0, "background": None},
        }

    def to_bytes(self) -> bytes:
        return orjson.dumps({"classes": self.classes_, "n": self.n_examples})

    def capture(self) -> StubCapture:
        """The saved form now, encoded later by the snapshot's thread (as a model's ``capture``)."""
        return StubCapture(self.to_bytes())

    @classmethod
    def from_bytes(cls, blob: bytes) -> StubModel:
        state = orjson.loads(blob)
        model = cls()
        model.learn_many([{}] * 0, state["classes"])
        model.n_examples = state["n"]
        return model


def serve(data_dir: str, port: int, profile: str | None, stub: bool = True) -> None:
    """Run the service on the stub (or the library), as ``streamtree serve`` runs it."""
    from app.cli import serve as run
    from app.main import create_app
    from app.settings import Settings

    settings = Settings(data_dir=Path(data_dir), port=port, log_level="warning")
    model_cls = StubModel if stub else None
    if profile is None:
        run(create_app(settings, model_cls=model_cls), settings)
        return
    import cProfile

    profiler = cProfile.Profile()
    profiler.enable()
    try:
        run(create_app(settings, model_cls=model_cls), settings)
    finally:
        profiler.disable()
        profiler.dump_stats(profile)


def commits(port: int) -> tuple[float, float]:
    """(group commits, events committed) so far, from the service's Prometheus metrics."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    values = {
        line.split()[0]: float(line.split()[1])
        for line in text.splitlines()
        if line.startswith("streamtree_commit_group_events_")
    }
    return values.get("streamtree_commit_group_events_count", 0.0), values.get(
        "streamtree_commit_group_events_sum", 0.0
    )


def cpu_seconds(pid: int, thread: int | None = None) -> float:
    """User + system CPU time so far of a process (all its threads), or of one of its threads."""
    stat = Path(f"/proc/{pid}/stat" if thread is None else f"/proc/{pid}/task/{thread}/stat")
    fields = stat.read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--serve", nargs=2, metavar=("DATA_DIR", "PORT"), help=argparse.SUPPRESS)
    parser.add_argument("--profile", help="Write the server's cProfile stats to this file.")
    parser.add_argument("--only", help="Run only the workloads whose name contains this.")
    parser.add_argument(
        "--library", action="store_true", help="Serve the real model (streamtree.ProbabilityTree) instead of the stub."
    )
    args = parser.parse_args()
    if args.serve:
        serve(args.serve[0], int(args.serve[1]), args.profile, stub=not args.library)
        return

    xs, ys = make_stream(60_000, seed=0)
    data_dir, port = tempfile.mkdtemp(prefix="streamtree-overhead-"), free_port()
    cmd = [sys.executable, "-m", "bench.service_overhead", "--serve", data_dir, str(port)]
    cmd += ["--profile", args.profile] if args.profile else []
    server = subprocess.Popen(cmd + (["--library"] if args.library else []), cwd=ROOT)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        dumps = json.dumps
        batches = [
            dumps(
                {"events": [{"features": x, "label": y} for x, y in zip(xs[i : i + 1000], ys[i : i + 1000])]}
            ).encode()
            for i in range(0, 40_000, 1000)
        ]
        singles = [dumps({"features": x, "label": y}).encode() for x, y in zip(xs[40_000:], ys[40_000:])]
        preds = [dumps({"features": x}).encode() for x in xs[:6000]]
        pbatches = [dumps({"instances": xs[i : i + 1000]}).encode() for i in range(0, 20_000, 1000)]
        workloads = [
            ("learn batched", "/learn", batches[:20], 1, 1000),
            ("learn batched", "/learn", batches[20:], 8, 1000),
            ("learn single", "/learn", singles[:2000], 1, 1),
            ("learn single", "/learn", singles[2000:10_000], 8, 1),
            ("predict single", "/predict_proba", preds[:2000], 1, 1),
            ("predict single", "/predict_proba", preds, 8, 1),
            ("predict batched", "/predict_proba", pbatches, 1, 1000),
            ("predict batched", "/predict_proba", pbatches, 8, 1000),
        ]
        print(
            "| workload | clients | items/s | requests/s | p50 ms | p99 ms | server CPU ms/request "
            "| event loop CPU ms/request | events/commit |"
        )
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for name, path, bodies, clients, items in workloads:
            if args.only and args.only not in name:
                continue
            n0, e0 = commits(port)
            cpu, loop_cpu = cpu_seconds(server.pid), cpu_seconds(server.pid, server.pid)
            r = asyncio.run(run_load("127.0.0.1", port, name, path, bodies, clients, items))
            per_request = 1e3 * (cpu_seconds(server.pid) - cpu) / r.requests
            loop_per_request = 1e3 * (cpu_seconds(server.pid, server.pid) - loop_cpu) / r.requests
            n1, e1 = commits(port)
            group = f"{(e1 - e0) / (n1 - n0):.1f}" if n1 > n0 else "-"
            assert not r.errors, f"{r.errors} requests failed"
            print(
                f"| {name} | {clients} | {r.items_per_s:,.0f} | {r.requests_per_s:,.0f} | {r.p50_ms:.2f} | "
                f"{r.p99_ms:.2f} | {per_request:.3f} | {loop_per_request:.3f} | {group} |",
                flush=True,
            )
    finally:
        server.terminate()
        server.wait(timeout=60)
        shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
