"""Is forgetting worth turning on? The default tree against the same tree with ``half_life``.

Both run test-then-train on every benchmark stream (same examples, scored as in
:mod:`bench.scoring`). Besides mean log loss, the per-example loss differences give a paired
test: the stream is cut into 20 contiguous blocks (online losses are autocorrelated, so
single examples are not independent), and ``z`` is the mean difference over its block
standard error; ``|z| > 2`` is a difference that noise does not explain.

Usage::

    flock /tmp/streamtree-bench.lock .venv/bin/python -m bench.forgetting [--half-life 2000]

Results: ``bench/results/forgetting.json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import json
import platform
from pathlib import Path
from typing import Any

import numpy as np

from bench.scoring import Score
from bench.streams import STREAMS
from streamtree import ProbabilityTree

RESULTS = Path(__file__).parent / "results"
BLOCKS = 20


def losses(model: ProbabilityTree, data: list[tuple[dict, Any]]) -> np.ndarray:
    """Per-example log loss, NaN for the unscored first example of each label."""
    score = Score()
    for x, y in data:
        score.update(y, model.predict_proba_one(x))
        model.learn_one(x, y)
    return score.per_example_losses()


def paired(a: np.ndarray, b: np.ndarray) -> dict[str, float]:
    """Mean of ``a - b`` and its z score over contiguous blocks."""
    ok = ~(np.isnan(a) | np.isnan(b))
    d = (a - b)[ok]
    means = np.array([block.mean() for block in np.array_split(d, BLOCKS)])
    se = means.std(ddof=1) / np.sqrt(BLOCKS)
    return {"diff": float(d.mean()), "z": float(d.mean() / se) if se > 0 else 0.0}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--half-life", type=int, default=2000)
    parser.add_argument("--n", type=int, default=20_000)
    args = parser.parse_args()
    rows = []
    for name, stream in STREAMS.items():
        data = stream.take(args.n)
        default = losses(ProbabilityTree(), data)
        forgetting = losses(ProbabilityTree(half_life=args.half_life), data)
        row = {
            "stream": name,
            "drifting": stream.drifting,
            "n": len(data),
            "default": float(np.nanmean(default)),
            "forgetting": float(np.nanmean(forgetting)),
            **paired(forgetting, default),
        }
        row["change_pct"] = 100 * row["diff"] / row["default"]
        rows.append(row)
        print(json.dumps(row), flush=True)
    out = {
        "meta": {
            "half_life": args.half_life,
            "blocks": BLOCKS,
            "machine": platform.machine(),
            "python": platform.python_version(),
        },
        "runs": rows,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "forgetting.json").write_text(json.dumps(out, indent=1))
    lines = [
        f"# Forgetting: the default tree against `half_life={args.half_life}`\n",
        f"Test-then-train, {args.n:,} examples a stream (or the whole data set), log loss in nats. "
        f"`z`: mean per-example difference over its standard error across {BLOCKS} contiguous blocks "
        "(|z| > 2: not noise). Negative change: forgetting is better.\n",
        f"| stream | drifting | default (no forgetting) | half_life={args.half_life} | change | z |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['stream']} | {'yes' if r['drifting'] else 'no'} | {r['default']:.4f} | {r['forgetting']:.4f} | "
            f"{r['change_pct']:+.1f}% | {r['z']:+.1f} |"
        )
    stationary = [r for r in rows if not r["drifting"]]
    worse = [r["stream"] for r in stationary if r["z"] > 2]
    lines.append(
        f"\nStationary streams where forgetting is significantly worse (z > 2): {len(worse)} of {len(stationary)}"
        + (f" ({', '.join(worse)})." if worse else ".")
    )
    (RESULTS / "forgetting.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
