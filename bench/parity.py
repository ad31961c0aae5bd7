"""Compare two prequential runs of the same model stream by stream (the compiled-core issue's
quality guard: no stream worse by more than 0.5% log loss).

Run: ``python -m bench.parity bench/results/prequential_before_core.json
bench/results/prequential_core.json`` (each written by ``python -m bench.prequential --models
streamtree-hgs --tag ...``, the first from the commit before the change). Writes
``bench/results/parity_core.md``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

RESULTS = Path(__file__).parent / "results"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--model", default="streamtree-hgs")
    parser.add_argument("--tolerance", type=float, default=0.005)
    parser.add_argument("--out", type=Path, default=RESULTS / "parity_core.md")
    args = parser.parse_args()
    runs = [
        {r["stream"]: r for r in json.loads(p.read_text())["runs"] if r["model"] == args.model}
        for p in (args.before, args.after)
    ]
    lines = [
        f"# {args.model}: prequential log loss before and after (tolerance {args.tolerance:.1%})\n",
        "| stream | before | after | change | examples/s before | after | within |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    worse = 0
    for stream, b in runs[0].items():
        a = runs[1][stream]
        change = (a["log_loss"] - b["log_loss"]) / b["log_loss"]
        ok = change <= args.tolerance
        worse += not ok
        lines.append(
            f"| {stream} | {b['log_loss']:.5f} | {a['log_loss']:.5f} | {change:+.2%} | "
            f"{b['examples_per_s']:,.0f} | {a['examples_per_s']:,.0f} | {'yes' if ok else 'no'} |"
        )
    lines.append(f"\n{len(runs[0]) - worse} of {len(runs[0])} streams no worse than {args.tolerance:.1%}.\n")
    args.out.write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
