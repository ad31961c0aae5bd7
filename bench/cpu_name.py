"""Kernels compiled for the build machine's CPU model against numba's ``generic`` target.

A Docker image carries kernels compiled while it was built; numba keys compiled code by the
host CPU's model, so on another model every container compiled them again (minutes). With
``NUMBA_CPU_NAME=generic`` the code runs on any x86-64 CPU; this measures what that costs.
Each configuration runs in its own interpreter with its own kernel cache (compiled first),
alternating, twice; per stream the CPU seconds of 20,000 rows: the tree test-then-train one
event at a time, the tree in batches of 1,000 (``learn_many(return_proba=True)``) and the
default forest on the first 5,000 rows one event at a time, each the best of 3 rounds.

Usage::

    flock /tmp/streamtree-bench.lock .venv/bin/python -m bench.cpu_name

Results: ``bench/results/cpu_name.md`` and ``.json``.
"""

from __future__ import annotations

import itertools
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RESULTS = Path(__file__).parent / "results"
STREAM_NAMES = ("Agrawal", "RandomRBF", "LED", "SEA")
PARTS = ("tree_event", "tree_batch", "forest_event")


def measure() -> dict[str, dict[str, float]]:
    """This interpreter's CPU seconds per stream and part (best of 3 rounds)."""
    from bench.streams import STREAMS
    from streamtree import ProbabilityForest, ProbabilityTree, warm_up

    warm_up()
    out = {}
    for name in STREAM_NAMES:
        rows = list(itertools.islice(STREAMS[name].make(), 20_000))
        xs, ys = [dict(x) for x, _ in rows], [y for _, y in rows]
        best = dict.fromkeys(PARTS, float("inf"))
        for _ in range(3):
            tree, t = ProbabilityTree(), time.process_time()
            for x, y in zip(xs, ys, strict=True):
                tree.predict_proba_one(x)
                tree.learn_one(x, y)
            best["tree_event"] = min(best["tree_event"], time.process_time() - t)
            tree, t = ProbabilityTree(), time.process_time()
            for i in range(0, len(xs), 1000):
                tree.learn_many(xs[i : i + 1000], ys[i : i + 1000], return_proba=True)
            best["tree_batch"] = min(best["tree_batch"], time.process_time() - t)
            forest, t = ProbabilityForest(), time.process_time()
            for x, y in zip(xs[:5000], ys[:5000], strict=True):
                forest.predict_proba_one(x)
                forest.learn_one(x, y)
            best["forest_event"] = min(best["forest_event"], time.process_time() - t)
        out[name] = best
    return out


def run(cpu_name: str | None, cache: Path) -> dict[str, dict[str, float]]:
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CPU_NAME"}
    env |= {"STREAMTREE_KERNEL_CACHE": str(cache), "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    if cpu_name:
        env["NUMBA_CPU_NAME"] = cpu_name
    done = subprocess.run(
        [sys.executable, "-m", "bench.cpu_name", "--measure"], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> None:
    if sys.argv[1:] == ["--measure"]:
        print(json.dumps(measure()))
        return
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as d:
        caches = {"host": Path(d) / "host", "generic": Path(d) / "generic"}
        runs: dict[str, list[dict[str, dict[str, float]]]] = {"host": [], "generic": []}
        for _ in range(2):
            for label, name in (("host", None), ("generic", "generic")):
                runs[label].append(run(name, caches[label]))
    best = {
        label: {s: {p: min(r[s][p] for r in rs) for p in PARTS} for s in STREAM_NAMES} for label, rs in runs.items()
    }
    from llvmlite import binding

    host_cpu = binding.get_host_cpu_name()
    lines = [
        "# Kernels for the host CPU model against numba's generic target (`bench/cpu_name.py`)",
        "",
        f"Command: `python -m bench.cpu_name`. Machine: {platform.machine()}, {os.cpu_count()} CPUs, host CPU "
        f"`{host_cpu}`, Python {platform.python_version()}; load average before {load:.2f}, after "
        f"{os.getloadavg()[0]:.2f}. CPU seconds, the best of 2 runs of each (alternating), each run the best of 3 rounds; "
        "ratio generic / host (above 1: generic slower).",
        "",
        "| stream | part | host | generic | ratio |",
        "|---|---|---:|---:|---:|",
    ]
    ratios = []
    for s in STREAM_NAMES:
        for p in PARTS:
            h, g = best["host"][s][p], best["generic"][s][p]
            ratios.append(g / h)
            lines.append(f"| {s} | {p} | {h:.3f} | {g:.3f} | {g / h:.2f} |")
    geo = 1.0
    for r in ratios:
        geo *= r
    lines += ["", f"Geometric mean of the ratios: {geo ** (1 / len(ratios)):.3f}."]
    RESULTS.joinpath("cpu_name.md").write_text("\n".join(lines) + "\n")
    RESULTS.joinpath("cpu_name.json").write_text(json.dumps({"host_cpu": host_cpu, "best": best}, indent=1) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
