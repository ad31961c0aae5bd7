"""Where one event's time goes in the tree's per-event loop: the compiled kernels against the Python around them.

Issue 33 asks the tree per event to match MOA's HoeffdingTree; on some streams it does not
(``bench/results/moa_speed.md``). This splits our side of that loop (``predict_proba_one``
then ``learn_one`` on a dict, as ``bench.moa_speed`` times it) on the same six generators:

- **total**: ``predict_proba_one(x)`` then ``learn_one(x, y)``;
- **predict**: ``predict_proba_one(x)`` alone; **learn** is total minus predict (the row
  encoded for the prediction is reused by the learn);
- **encode**: ``registry.encode_known_row(x)``, the dict read into the kernels' row (the first
  step of a prediction);
- **predict kernel** and **learn kernel**: the tree state's own one-event calls
  (``TreeState.predict_one``, ``TreeState.learn_one``) on rows encoded beforehand: the
  compiled loops with their dispatch and no more Python than the state's;
- **Python around them**: total minus the two kernels.

Each measurement runs on its own copy of a tree warmed on the stream's first ``--warm`` rows,
over the next ``--n`` rows, so every one starts from the same state; CPU time of this process,
best of ``--rounds`` (3).

Usage::

    flock /tmp/streamtree-bench.lock .venv/bin/python -m bench.event_cost

Results: ``bench/results/event_cost.json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import streamtree
from bench.http_load import run_header
from bench.speed import GENERATORS
from bench.streams import STREAMS
from streamtree import ProbabilityTree

RESULTS = Path(__file__).parent / "results"
PARTS = ("total", "predict", "learn", "encode", "predict_kernel", "learn_kernel", "python")


def best_us(run: Callable[[ProbabilityTree], None], warmed: ProbabilityTree, n: int, rounds: int) -> float:
    """The least CPU µs per event of ``run`` on a fresh copy of ``warmed``, over ``rounds``."""
    best = float("inf")
    for _ in range(rounds):
        model = copy.deepcopy(warmed)
        start = time.process_time()
        run(model)
        best = min(best, time.process_time() - start)
    return 1e6 * best / n


def measure(name: str, warm: int, n: int, rounds: int) -> dict[str, float]:
    data = STREAMS[name].take(warm + n)
    warmed = ProbabilityTree()
    for x, y in data[:warm]:
        warmed.predict_proba_one(x)
        warmed.learn_one(x, y)
    rows = data[warm:]
    xs = [x for x, _ in rows]

    def total(m: ProbabilityTree) -> None:
        for x, y in rows:
            m.predict_proba_one(x)
            m.learn_one(x, y)

    def predict(m: ProbabilityTree) -> None:
        for x in xs:
            m.predict_proba_one(x)

    def encode(m: ProbabilityTree) -> None:
        encode_known_row = m.registry.encode_known_row
        for x in xs:
            encode_known_row(x)

    encoded = []
    for x, y in rows:
        known = warmed.registry.encode_known_row(x)
        if known is None or y not in warmed.class_index:
            continue  # a new feature value or class: the general path, left out of the kernel's share
        num, nom = known
        encoded.append((num, nom, np.array([warmed.class_index[y]], dtype=np.int64)))
    n_classes = len(warmed.classes_)

    def predict_kernel(m: ProbabilityTree) -> None:
        state = m.state
        for num, nom, _ in encoded:
            state.predict_one(num, nom, n_classes)

    def learn_kernel(m: ProbabilityTree) -> None:
        state = m.state
        for i, (num, nom, ks) in enumerate(encoded):
            state.learn_one(num, nom, ks, warm + i)

    out = {
        "total": best_us(total, warmed, n, rounds),
        "predict": best_us(predict, warmed, n, rounds),
        "encode": best_us(encode, warmed, n, rounds),
        "predict_kernel": best_us(predict_kernel, warmed, len(encoded), rounds),
        "learn_kernel": best_us(learn_kernel, warmed, len(encoded), rounds),
        "rows_through_kernels": len(encoded),
    }
    out["learn"] = out["total"] - out["predict"]
    out["python"] = out["total"] - out["predict_kernel"] - out["learn_kernel"]
    return out


def markdown(res: dict[str, Any]) -> str:
    m = res["machine"]
    lines = [
        f"# Where one event's time goes: the tree per event ({res['date_utc']}, commit {res['commit']}, "
        f"{m['cpus']} CPUs, load average {m['loadavg_before'][0]:.2f} before, {m['loadavg_after'][0]:.2f} after)",
        "",
        f"Command: `python -m bench.event_cost --warm {res['warm']} --n {res['n']}`. A default `ProbabilityTree` "
        f"warmed on each stream's first {res['warm']:,} rows, then timed on the next {res['n']:,}; CPU µs per event, "
        "best of 3 (module docstring of `bench/event_cost.py`).",
        "",
        "| stream | total | predict | of which encode | learn | predict kernel | learn kernel | Python around the kernels | share |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, r in res["streams"].items():
        lines.append(
            f"| {name} | {r['total']:.2f} | {r['predict']:.2f} | {r['encode']:.2f} | {r['learn']:.2f} | "
            f"{r['predict_kernel']:.2f} | {r['learn_kernel']:.2f} | {r['python']:.2f} | "
            f"{r['python'] / r['total']:.0%} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--warm", type=int, default=40_000)
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", default="event_cost")
    args = parser.parse_args()
    load_before = os.getloadavg()
    streamtree.warm_up()
    streams = {name: measure(name, args.warm, args.n, args.rounds) for name in GENERATORS}
    res = run_header(load_before) | {"warm": args.warm, "n": args.n, "streams": streams}
    (RESULTS / f"{args.out}.json").write_text(json.dumps(res, indent=2) + "\n")
    (RESULTS / f"{args.out}.md").write_text(markdown(res))
    print(markdown(res))


if __name__ == "__main__":
    main()
