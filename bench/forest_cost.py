"""How much faster the default forest runs per event with its costly choices undone, one at a time.

Issue 33 asks the default 10-tree forest to run per event at least 1.5x MOA's
AdaptiveRandomForest (10 trees) on each of six generators; on Agrawal it runs 0.60-0.78x
(``bench/results/moa_speed.md``, ``moa_speed_rerun2.md``). The forest's own choices, made for
log loss (``docs/decisions/forest-variants.md``), cost speed: every member learns an example
Poisson(2) times, and one member in three is eager (a split tried every 5 examples) and
forgets. This times ``predict_proba_one`` then ``learn_one`` per event for the default and for
forests with one of those choices undone, on the same rows:

- **default**: ``ProbabilityForest()``;
- **rate 1**: ``poisson_rate=1.0`` (each example learned Poisson(1) times);
- **no eager members**: ``variants=[{}, {"linear": False}]`` (two kinds, the members of step 2
  of the forest-variants page);
- **rate 1, no eager members**: both;
- **unweighted**: ``weighted=False`` (a plain mean of the members).

Each forest is warmed on the stream's first ``--warm`` rows, then timed on the next ``--n``
from a copy of the warmed forest, the configurations interleaved within each round; CPU µs
per event, best of ``--rounds``. These are other models: their log loss is on the
forest-variants page (where measured), not here.

Usage::

    flock /tmp/streamtree-bench.lock .venv/bin/python -m bench.forest_cost

Results: ``bench/results/forest_cost.json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import copy
import os
import time
from pathlib import Path
from typing import Any

import streamtree
from bench.http_load import run_header
from bench.shares import share_table, write
from bench.speed import GENERATORS
from bench.streams import STREAMS
from streamtree import ProbabilityForest

RESULTS = Path(__file__).parent / "results"

#: Each configuration's name and its parameters (the default's: none).
CONFIGS: dict[str, dict[str, Any]] = {
    "default": {},
    "rate 1": {"poisson_rate": 1.0},
    "no eager members": {"variants": [{}, {"linear": False}]},
    "rate 1, no eager members": {"poisson_rate": 1.0, "variants": [{}, {"linear": False}]},
    "unweighted": {"weighted": False},
}


def measure(name: str, warm: int, n: int, rounds: int) -> dict[str, float]:
    """CPU µs per event of each configuration (:data:`CONFIGS`) on ``name``, best of ``rounds``."""
    rows = STREAMS[name].take(warm + n)
    warmed = {}
    for label, params in CONFIGS.items():
        forest = ProbabilityForest(**params)
        for x, y in rows[:warm]:
            forest.predict_proba_one(x)
            forest.learn_one(x, y)
        warmed[label] = forest
    timed = rows[warm:]
    best = dict.fromkeys(CONFIGS, float("inf"))
    for _ in range(rounds):
        for label in CONFIGS:
            forest = copy.deepcopy(warmed[label])
            start = time.process_time()
            for x, y in timed:
                forest.predict_proba_one(x)
                forest.learn_one(x, y)
            best[label] = min(best[label], time.process_time() - start)
    return {label: 1e6 * seconds / len(timed) for label, seconds in best.items()}


def markdown(res: dict[str, Any]) -> str:
    command = (
        f"Command: `python -m bench.forest_cost --warm {res['warm']} --n {res['n']}`. Each forest warmed on the "
        f"stream's first {res['warm']:,} rows, then `predict_proba_one` and `learn_one` timed on the next "
        f"{res['n']:,}; CPU µs per event, best of 3, and in brackets the time as a share of the default's "
        "(module docstring of `bench/forest_cost.py`)."
    )
    return share_table(res, "The forest per event, its costly choices undone", command, list(CONFIGS), digits=1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--streams", nargs="*", default=list(GENERATORS))
    parser.add_argument("--warm", type=int, default=10_000)
    parser.add_argument("--n", type=int, default=4_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", default="forest_cost")
    args = parser.parse_args()
    load_before = os.getloadavg()
    streamtree.warm_up()
    streams = {name: measure(name, args.warm, args.n, args.rounds) for name in args.streams}
    res = run_header(load_before) | {"warm": args.warm, "n": args.n, "streams": streams}
    write(RESULTS, args.out, res, markdown(res))


if __name__ == "__main__":
    main()
