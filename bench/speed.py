"""Speed benchmark: streamtree against river's default Hoeffding tree, in the same run.

Three measurements, each a ratio against a baseline timed in this same process:

1. per event: ``predict_proba_one`` then ``learn_one`` on each example, against river
   ``HoeffdingTreeClassifier()`` (naive-Bayes-adaptive leaves, river's default) doing the same;
2. per batch: ``predict_proba_many`` then ``learn_many`` on batches of 1,000 (DataFrames),
   against the same river per-event loop;
3. one HGS refit (``refit_steps`` steps, the default) on a tree of about 1,000 nodes grown
   from a stream, and one leave-one-out cost + gradient evaluation.

Results: ``bench/results/speed.json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from river import tree

from bench.streams import STREAMS
from streamtree import ProbabilityTree
from streamtree.kernels.hgs import loocv

RESULTS = Path(__file__).parent / "results"


def per_event(model: Any, data: list[tuple[dict, Any]]) -> float:
    start = time.perf_counter()
    for x, y in data:
        model.predict_proba_one(x)
        model.learn_one(x, y)
    return len(data) / (time.perf_counter() - start)


def per_batch(model: ProbabilityTree, data: list[tuple[dict, Any]], size: int) -> float:
    X = pd.DataFrame([x for x, _ in data])
    y = pd.Series([label for _, label in data])
    batches = [(X.iloc[i : i + size], y.iloc[i : i + size]) for i in range(0, len(data), size)]
    start = time.perf_counter()
    for xb, yb in batches:
        model.predict_proba_many(xb)
        model.learn_many(xb, yb)
    return len(data) / (time.perf_counter() - start)


def refit_timing(repeats: int) -> dict[str, Any]:
    model = ProbabilityTree(max_nodes=1001)
    for x, y in STREAMS["RandomRBF"].take(60_000):
        model.learn_one(x, y)
        if model.growth_stopped:
            break
    topology, counts = model.topology_, model._node_counts()
    smoother = model._smoother
    start = time.perf_counter()
    for _ in range(repeats):
        smoother.refit(topology, counts)
    refit_ms = (time.perf_counter() - start) / repeats * 1e3
    n = model.n_nodes
    parent, internal = np.ascontiguousarray(topology.parent), np.ascontiguousarray(~topology.is_leaf)
    counts = np.ascontiguousarray(counts, dtype=np.float64)
    alpha, grad = np.ascontiguousarray(smoother.alpha[:n]), np.empty(n)
    loocv(parent, internal, counts, n, counts.shape[1], alpha, smoother.alpha0, grad)  # compiled, not timed
    start = time.perf_counter()
    for _ in range(repeats):
        loocv(parent, internal, counts, n, counts.shape[1], alpha, smoother.alpha0, grad)
    eval_ms = (time.perf_counter() - start) / repeats * 1e3
    return {
        "nodes": model.n_nodes,
        "classes": len(model.classes_),
        "refit_steps": model.refit_steps,
        "refit_ms": refit_ms,
        "loocv_evaluation_ms": eval_ms,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--streams", nargs="*", default=["Phishing", "Bananas", "Agrawal", "SEA", "RandomRBF", "LED", "Waveform", "Hyperplane"])
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=200)
    args = parser.parse_args()
    rows = []
    for name in args.streams:
        data = STREAMS[name].take(args.n)
        river_rate = per_event(tree.HoeffdingTreeClassifier(), data)
        ours_rate = per_event(ProbabilityTree(), data)
        batch_rate = per_batch(ProbabilityTree(), data, args.batch)
        row = {
            "stream": name,
            "n": len(data),
            "river_ht_nba_per_event": river_rate,
            "ours_per_event": ours_rate,
            "ours_batch": batch_rate,
            "per_event_ratio": ours_rate / river_rate,
            "batch_ratio": batch_rate / river_rate,
        }
        rows.append(row)
        print(json.dumps(row), flush=True)
    refit = refit_timing(args.repeats)
    print(json.dumps(refit))
    summary = {
        "per_event_ratio_geomean": statistics.geometric_mean(r["per_event_ratio"] for r in rows),
        "batch_ratio_geomean": statistics.geometric_mean(r["batch_ratio"] for r in rows),
    }
    out = {"meta": {"machine": platform.machine(), "python": platform.python_version(), "batch": args.batch}, "streams": rows, "refit": refit, "summary": summary}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "speed.json").write_text(json.dumps(out, indent=1))
    lines = [
        "# Speed (examples/s, same run; ratios against river HoeffdingTreeClassifier(), nba leaves)\n",
        "| stream | n | river HT-nba, per event | ours, per event | ratio | ours, batches of "
        f"{args.batch} | ratio |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['stream']} | {r['n']} | {r['river_ht_nba_per_event']:,.0f} | {r['ours_per_event']:,.0f} | "
            f"{r['per_event_ratio']:.2f}x | {r['ours_batch']:,.0f} | {r['batch_ratio']:.1f}x |"
        )
    lines.append(
        f"\nGeometric means: per event {summary['per_event_ratio_geomean']:.2f}x, batched {summary['batch_ratio_geomean']:.1f}x.\n"
    )
    lines.append(
        f"HGS refit ({refit['refit_steps']} steps) on a {refit['nodes']}-node tree, {refit['classes']} classes: "
        f"{refit['refit_ms']:.2f} ms; one leave-one-out cost + gradient evaluation: {refit['loocv_evaluation_ms']:.3f} ms.\n"
    )
    (RESULTS / "speed.md").write_text("\n".join(lines))


if __name__ == "__main__":
    main()
