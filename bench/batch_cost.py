"""Where a batch's time goes in the tree's learning loop: each component switched off in turn.

Issue 33 asks batches of 1,000 to run 10x MOA's HoeffdingTree per event on each generator;
on most they do not (``bench/results/moa_speed.md``). A batch has no Python per event: its
time is the compiled loop's. This times the loop with the default tree and with one of its
parts switched off at a time, on the same rows, so each part's share shows as the time it
saves:

- **default**: ``ProbabilityTree()``;
- **no linear**: ``linear=False`` (no online regression: no standardising, AdaGrad step,
  pool scoring or refits);
- **no drift**: ``drift_delta=None`` (no change detector, no background tree);
- **grace 200**: ``grace_period=200`` (split attempts every 200 examples at a leaf, not 30);
- **laplace**: ``smoothing="laplace"`` (a leaf's own counts, not HGS);
- **all three off**: ``linear=False, drift_delta=None, smoothing="laplace"``.

The switched-off models are other models (their trees differ), so a share is what that part
costs together with what it changes in the tree. Each model learns the stream's first ``--n``
rows as pandas batches of ``--batch`` with ``learn_many(X, y, return_proba=True)`` (as
``bench.moa_speed`` times batches); CPU time of this process, best of ``--rounds``, the
configurations interleaved within each round.

Usage::

    flock /tmp/streamtree-bench.lock .venv/bin/python -m bench.batch_cost

Results: ``bench/results/batch_cost.json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

import pandas as pd

import streamtree
from bench.http_load import run_header
from bench.shares import share_table, write
from bench.speed import GENERATORS
from bench.streams import STREAMS
from streamtree import ProbabilityTree

RESULTS = Path(__file__).parent / "results"

#: Each configuration's name and the parameters it changes from the default.
CONFIGS: dict[str, dict[str, Any]] = {
    "default": {},
    "no linear": {"linear": False},
    "no drift": {"drift_delta": None},
    "grace 200": {"grace_period": 200},
    "laplace": {"smoothing": "laplace"},
    "all three off": {"linear": False, "drift_delta": None, "smoothing": "laplace"},
}


def batches(name: str, n: int, size: int) -> list[tuple[pd.DataFrame, list[Any]]]:
    """The stream's first ``n`` rows as ``(X, y)`` batches of ``size``."""
    rows = STREAMS[name].take(n)
    X = pd.DataFrame([x for x, _ in rows])
    y = [label for _, label in rows]
    return [(X.iloc[i : i + size], y[i : i + size]) for i in range(0, len(rows), size)]


def measure(name: str, n: int, size: int, rounds: int) -> dict[str, float]:
    """CPU µs per event of each configuration (:data:`CONFIGS`) on ``name``, best of ``rounds``."""
    data = batches(name, n, size)
    best = dict.fromkeys(CONFIGS, float("inf"))
    for _ in range(rounds):
        for label, params in CONFIGS.items():
            model = ProbabilityTree(**params)
            start = time.process_time()
            for X, y in data:
                model.learn_many(X, y, return_proba=True)
            best[label] = min(best[label], time.process_time() - start)
    return {label: 1e6 * seconds / n for label, seconds in best.items()}


def markdown(res: dict[str, Any]) -> str:
    command = (
        f"Command: `python -m bench.batch_cost --n {res['n']} --batch {res['batch']}`. Each configuration learns "
        f"the stream's first {res['n']:,} rows in batches of {res['batch']:,} with "
        "`learn_many(X, y, return_proba=True)`; CPU µs per event, best of 3, and in brackets the time as a "
        "share of the default's (module docstring of `bench/batch_cost.py`)."
    )
    return share_table(
        res, "Where a batch's time goes: the tree's loop, parts switched off", command, list(CONFIGS), digits=2
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--streams", nargs="*", default=list(GENERATORS))
    parser.add_argument("--n", type=int, default=50_000)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", default="batch_cost")
    args = parser.parse_args()
    load_before = os.getloadavg()
    streamtree.warm_up()
    streams = {name: measure(name, args.n, args.batch, args.rounds) for name in args.streams}
    res = run_header(load_before) | {"n": args.n, "batch": args.batch, "streams": streams}
    write(RESULTS, args.out, res, markdown(res))


if __name__ == "__main__":
    main()
