"""A feature that looks like an id: model memory, snapshot size, RSS and log loss as events come.

The stream (issue 32): ``order_id`` (``"order-<n>"``, a new value every event) beside an amount
(uniform in [0, 1]) and a channel (``web``, ``store``, ``phone``); the label is 1 with
probability 0.85 when ``amount > 0.6`` differs from ``channel == "phone"``, else 0.15. The same
events without ``order_id`` are the reference: with the id feature bounded
(``max_categories``), memory, snapshot and log loss should be those of the reference, give or
take the first ``max_categories`` ids.

Each configuration runs in its own process (so its RSS is its own), learns in batches of 500
with ``learn_many(..., return_proba=True)`` (prequential: each event predicted before it is
learned) and, at each checkpoint, records the snapshot's size (``to_bytes``, what the service
stores), ``summary()["memory_bytes"]``, the process's resident memory and the prequential log
loss so far. ``unbounded`` is the behaviour before the bound (``max_categories=None``): its
statistics grow with (leaves x values), so it stops at 5,000 events.

Usage::

    flock /tmp/streamtree-bench.lock .venv/bin/python -m bench.id_feature

Results go to ``bench/results/id_feature.json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import platform
import random
import resource
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

OUT = Path(__file__).parent / "results"
MiB = 1024 * 1024
BATCH = 500
CHECKPOINTS = (1_000, 2_000, 5_000, 10_000, 20_000)

#: name -> (with the id feature, model, its parameters, events)
CONFIGS: dict[str, tuple[bool, str, dict[str, Any], int]] = {
    "tree, no id": (False, "tree", {}, 20_000),
    "tree, id": (True, "tree", {}, 20_000),
    "tree, id, unbounded": (True, "tree", {"max_categories": None, "max_bytes": None}, 5_000),
    "tree max_nodes=500, no id": (False, "tree", {"max_nodes": 500}, 20_000),
    "tree max_nodes=500, id": (True, "tree", {"max_nodes": 500}, 20_000),
    "tree max_bytes=1 MiB, id": (True, "tree", {"max_bytes": MiB}, 20_000),
    "forest bt+ x5, no id": (False, "forest", {}, 20_000),
    "forest bt+ x5, id": (True, "forest", {}, 20_000),
}


def stream(n: int, with_id: bool, seed: int = 32) -> Iterator[tuple[dict[str, Any], int]]:
    """The events of the module docstring."""
    rng = random.Random(seed)
    for i in range(n):
        amount = rng.random()
        channel = rng.choice(("web", "store", "phone"))
        p = 0.85 if (amount > 0.6) != (channel == "phone") else 0.15
        y = int(rng.random() < p)
        x: dict[str, Any] = {"amount": amount, "channel": channel}
        if with_id:
            x["order_id"] = f"order-{i}"
        yield x, y


def _rss_mib() -> float:
    """Resident memory of this process now (``/proc/self/statm``), MiB."""
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * resource.getpagesize() / MiB


def run(name: str) -> dict[str, Any]:
    """Learn one configuration's events; its checkpoints (in its own process)."""
    from streamtree import ProbabilityForest, ProbabilityTree

    with_id, kind, params, n = CONFIGS[name]
    model: Any = (
        ProbabilityTree(**params)
        if kind == "tree"
        else ProbabilityForest(n_trees=5, method="bt+", seed=1, tree=params or None)
    )
    rows = list(stream(n, with_id))
    loss = 0.0
    points = []
    start = time.perf_counter()
    for s in range(0, n, BATCH):
        batch = rows[s : s + BATCH]
        ys = [y for _, y in batch]
        proba = model.learn_many([x for x, _ in batch], ys, return_proba=True)
        index = {c: j for j, c in enumerate(model.classes_)}
        for row, y in zip(proba, ys):
            loss -= math.log(max(float(row[index[y]]), 1e-15))
        seen = s + len(batch)
        if seen in CHECKPOINTS:
            summary = model.summary()
            points.append(
                {
                    "events": seen,
                    "snapshot_bytes": len(model.to_bytes()),
                    "memory_bytes": summary["memory_bytes"],
                    "rss_mib": round(_rss_mib(), 1),
                    "log_loss": loss / seen,
                    "n_nodes": summary["n_nodes"],
                    "other_values": summary["other_values"],
                    "growth_stop": summary["growth_stop"],
                }
            )
    return {
        "name": name,
        "params": params,
        "with_id": with_id,
        "model": kind,
        "events": n,
        "seconds": round(time.perf_counter() - start, 2),
        "points": points,
        "max_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


def _fmt_bytes(b: int) -> str:
    return f"{b / MiB:,.2f} MiB" if b >= MiB / 10 else f"{b / 1024:,.1f} KiB"


def report(results: list[dict[str, Any]], command: str) -> str:
    """The markdown table of every configuration's checkpoints."""
    lines = [
        "# A feature that looks like an id (`bench/id_feature.py`)",
        "",
        "Events: `order_id` (`order-<n>`, a new value every event), `amount` and `channel`; the label depends on "
        "`amount` and `channel` only (module docstring). Batches of 500 (`learn_many`, prequential). Snapshot = "
        "`len(model.to_bytes())`; memory = `summary()[\"memory_bytes\"]` (the arrays' capacity); RSS = the process's "
        "resident memory at the checkpoint (each configuration in its own process); log loss = prequential mean so "
        f"far. Defaults `max_categories=255`, `max_bytes=2**28`. Python {platform.python_version()}, "
        f"{platform.machine()}.",
        "",
        f"Reproduce: `{command}`",
        "",
        "| configuration | events | snapshot | memory | RSS | nodes | log loss | examples to *other* | growth stop |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in results:
        for p in r["points"]:
            other = sum(p["other_values"].values())
            lines.append(
                f"| {r['name']} | {p['events']:,} | {_fmt_bytes(p['snapshot_bytes'])} | "
                f"{_fmt_bytes(p['memory_bytes'])} | {p['rss_mib']:,.0f} MiB | {p['n_nodes']:,} | "
                f"{p['log_loss']:.4f} | {other:,} | {p['growth_stop'] or ''} |"
            )
    by = {r["name"]: r for r in results}
    lines += ["", "Log loss at the last checkpoint, with the id feature against without:", ""]
    for with_id, without in (
        ("tree, id", "tree, no id"),
        ("tree max_nodes=500, id", "tree max_nodes=500, no id"),
        ("forest bt+ x5, id", "forest bt+ x5, no id"),
    ):
        if with_id in by and without in by:
            a, b = by[with_id]["points"][-1]["log_loss"], by[without]["points"][-1]["log_loss"]
            lines.append(f"- {with_id}: {a:.4f} against {b:.4f} ({100 * (a / b - 1):+.2f}%)")
    if "tree, id" in by and "tree, no id" in by:
        a, b = by["tree, id"]["points"][-1], by["tree, no id"]["points"][-1]
        lines += [
            "",
            f"Memory with the id feature, against without, at {a['events']:,} events: "
            f"{a['memory_bytes'] / b['memory_bytes']:.1f}x ({a['n_nodes']:,} and {b['n_nodes']:,} nodes).",
        ]
    lines += [
        "",
        "Reading:",
        "",
        "- Without the bound (`tree, id, unbounded`: `max_categories=None`, the model before issue 32) each growing "
        "leaf holds a row of statistics per value of every nominal feature, and the values grow with the events: "
        "snapshot and memory grow with (leaves x values), quadratically (the issue measured 2.1 MB at 1,000 events, "
        "164 MB at 10,000 and 656 MB at 20,000; this configuration stops at 5,000 to spare the machine).",
        "- With it, `order_id` keeps 255 values and every later one shares its *other* code: snapshot and memory grow "
        "with the tree (linearly), flat once growth stops (`max_nodes`, `max_bytes`), and the log loss is that of the "
        "same events without the id feature.",
        "- The value codes of all nominal features share one axis of the statistics, so while the tree grows an id-like "
        "feature still costs 256 codes per nominal column in every growing leaf (the memory ratio above). Dropping "
        "such a feature from the statistics altogether would save that, but only when decided early, from a few "
        "values; a genuine feature with many values (a city, a product) also starts with mostly new values and "
        "would be dropped too. The log loss gives no reason for it: not done.",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", nargs="*", default=list(CONFIGS), choices=list(CONFIGS))
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    context = multiprocessing.get_context("spawn")  # a fresh process per configuration: its RSS is its own
    results = []
    for name in args.configs:
        with context.Pool(1) as pool:
            results.append(pool.apply(run, (name,)))
        print(name, results[-1]["points"][-1], file=sys.stderr)
    command = "flock /tmp/streamtree-bench.lock .venv/bin/python -m bench.id_feature"
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "id_feature.json").write_text(json.dumps({"command": command, "results": results}, indent=1) + "\n")
    (args.out / "id_feature.md").write_text(report(results, command))


if __name__ == "__main__":
    main()
