"""Summarise the default-configuration sweep in bench/results/sweep/ (written by
``python -m bench.prequential --models streamtree-hgs streamtree-laplace --ours CONFIG --n 10000
--tag sweep/NAME``) into bench/results/sweep/README.md."""

from __future__ import annotations

import json
from pathlib import Path

SWEEP = Path(__file__).parent / "results" / "sweep"


def main() -> None:
    runs = {}
    for path in sorted(SWEEP.glob("*.json")):
        data = json.loads(path.read_text())
        runs[path.stem] = (data["meta"]["ours"], {(r["stream"], r["model"]): r["log_loss"] for r in data["runs"]})
    streams = list(dict.fromkeys(s for _, r in runs.values() for s, _ in r))
    lines = [
        "# Choosing the defaults: prequential log loss (nats), first 10,000 examples a stream",
        "",
        "Each column is one configuration of `ProbabilityTree` (overrides below), HGS smoothing; the",
        "last rows count the streams where HGS beat the same configuration with Laplace smoothing.",
        "",
        "| stream | " + " | ".join(runs) + " |",
        "|---|" + "---|" * len(runs),
    ]
    for s in streams:
        cells = [f"{r[(s, 'streamtree-hgs')]:.4f}" if (s, "streamtree-hgs") in r else "" for _, r in runs.values()]
        lines.append(f"| {s} | " + " | ".join(cells) + " |")
    wins, means = [], []
    for _, r in runs.values():
        both = [s for s in streams if (s, "streamtree-hgs") in r and (s, "streamtree-laplace") in r]
        wins.append(f"{sum(r[(s, 'streamtree-hgs')] < r[(s, 'streamtree-laplace')] for s in both)}/{len(both)}")
        vals = [r[(s, "streamtree-hgs")] for s in streams if (s, "streamtree-hgs") in r]
        means.append(f"{sum(vals) / len(vals):.4f}" if len(vals) == len(streams) else "")
    lines.append("| HGS below Laplace | " + " | ".join(wins) + " |")
    lines.append("| mean | " + " | ".join(means) + " |")
    lines += ["", "Configurations:", ""]
    for name, (ours, _) in runs.items():
        lines.append(f"- **{name}**: `{json.dumps(ours)}`")
    (SWEEP / "README.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
