"""Prequential (test-then-train) benchmark: streamtree against river's trees and forest.

Every model sees each stream's examples in the same order; on each example it first predicts
(scored as in :mod:`bench.scoring`), then learns. Time counts only ``predict_proba_one`` and
``learn_one``. Results go to ``bench/results/prequential.json`` and ``.md``; reliability
diagrams to ``bench/results/reliability_*.png``.

Usage::

    python -m bench.prequential                       # everything (about 20 minutes)
    python -m bench.prequential --streams SEA LED --models streamtree-hgs river-HT-nba --n 5000
    python -m bench.prequential --ours '{"grace_period": 50}' --models streamtree-hgs --tag sweep
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from river import forest, tree

from bench.scoring import Score
from bench.streams import N, STREAMS
from streamtree import ProbabilityTree

RESULTS = Path(__file__).parent / "results"


def model_factories(ours: dict[str, Any]) -> dict[str, Callable[[], Any]]:
    def st(smoothing: str) -> Callable[[], Any]:
        return lambda: ProbabilityTree(**{**ours, "smoothing": smoothing})

    return {
        "streamtree-hgs": st("hgs"),
        "streamtree-mbranch": st("mbranch"),
        "streamtree-mestimate": st("mestimate"),
        "streamtree-laplace": st("laplace"),
        "streamtree-mle": st("mle"),
        "river-HT-mc": lambda: tree.HoeffdingTreeClassifier(leaf_prediction="mc"),
        "river-HT-nba": lambda: tree.HoeffdingTreeClassifier(),
        "river-HAT": lambda: tree.HoeffdingAdaptiveTreeClassifier(seed=42),
        "river-ARF-10": lambda: forest.ARFClassifier(n_models=10, seed=42),
    }


def run_one(model: Any, data: list[tuple[dict, object]]) -> tuple[Score, float]:
    score = Score()
    elapsed = 0.0
    clock = time.perf_counter
    for x, y in data:
        start = clock()
        proba = model.predict_proba_one(x)
        model.learn_one(x, y)
        elapsed += clock() - start
        score.update(y, proba)
    return score, elapsed


def reliability_plot(name: str, scores: dict[str, Score], path: Path) -> None:
    """Top-label reliability diagram: mean confidence against accuracy in 10 bins."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, ax = plt.subplots(figsize=(5, 5))
    ax.plot([0, 1], [0, 1], color="grey", linestyle="--", linewidth=1, label="perfect")
    for label, score in scores.items():
        conf = np.array(score.top_p)
        hit = np.array(score.top_hit, dtype=float)
        bins = np.minimum((conf * 10).astype(int), 9)
        xs, ys = [], []
        for b in range(10):
            mask = bins == b
            if mask.sum() >= 20:
                xs.append(conf[mask].mean())
                ys.append(hit[mask].mean())
        ece = sum(abs(conf[bins == b].mean() - hit[bins == b].mean()) * (bins == b).mean() for b in range(10) if (bins == b).any())
        ax.plot(xs, ys, marker="o", label=f"{label} (ECE {ece:.3f})")
    ax.set_xlabel("predicted probability of the top class")
    ax.set_ylabel("observed frequency it was right")
    ax.set_title(f"Reliability, {name} (prequential)")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def markdown(results: dict[str, Any]) -> str:
    rows = results["runs"]
    streams = list(dict.fromkeys(r["stream"] for r in rows))
    models = list(dict.fromkeys(r["model"] for r in rows))
    by = {(r["stream"], r["model"]): r for r in rows}
    out = [f"# Prequential benchmark\n\n{results['meta']['note']}\n"]
    headline = [m for m in ("streamtree-hgs", "streamtree-laplace", "river-HT-nba", "river-HAT", "river-ARF-10") if m in models]
    if headline:
        out.append("\n## Headline: log loss (lower is better; bold: best single tree)\n")
        out.append("| stream | " + " | ".join(headline) + " | ours vs ARF-10 |")
        out.append("|---|" + "---|" * (len(headline) + 1))
        for s in streams:
            singles = [m for m in headline if m != "river-ARF-10" and (s, m) in by]
            best = min(singles, key=lambda m: by[(s, m)]["log_loss"]) if singles else None
            cells = []
            for m in headline:
                r = by.get((s, m))
                text = f"{r['log_loss']:.4f}" if r else ""
                cells.append(f"**{text}**" if m == best else text)
            gap = ""
            if (s, "streamtree-hgs") in by and (s, "river-ARF-10") in by:
                ours, arf = by[(s, "streamtree-hgs")]["log_loss"], by[(s, "river-ARF-10")]["log_loss"]
                gap = f"{100 * (ours - arf) / arf:+.0f}%"
            out.append(f"| {s} | " + " | ".join(cells) + f" | {gap} |")
    for metric, fmt in (("log_loss", "{:.4f}"), ("brier", "{:.4f}"), ("accuracy", "{:.4f}"), ("examples_per_s", "{:,.0f}")):
        out.append(f"\n## {metric}\n\n| stream | n | " + " | ".join(models) + " |")
        out.append("|---|---|" + "---|" * len(models))
        for s in streams:
            cells = []
            for m in models:
                r = by.get((s, m))
                cells.append(fmt.format(r[metric]) if r else "")
            n = next(by[(s, m)]["n"] for m in models if (s, m) in by)
            out.append(f"| {s} | {n} | " + " | ".join(cells) + " |")
    if "summary" in results:
        out.append("\n## Targets\n")
        for line in results["summary"]:
            out.append(f"- {line}")
    return "\n".join(out) + "\n"


def summarise(rows: list[dict[str, Any]]) -> list[str]:
    by = {(r["stream"], r["model"]): r for r in rows}
    streams = list(dict.fromkeys(r["stream"] for r in rows))
    lines = []

    def wins(a: str, b: str) -> tuple[int, int]:
        both = [s for s in streams if (s, a) in by and (s, b) in by]
        return sum(by[(s, a)]["log_loss"] < by[(s, b)]["log_loss"] for s in both), len(both)

    for other in ("river-HT-nba", "streamtree-laplace", "river-HAT", "river-ARF-10"):
        w, n = wins("streamtree-hgs", other)
        if n:
            lines.append(f"log loss, streamtree-hgs below {other}: {w} of {n} streams")
    gaps = []
    for s in streams:
        if (s, "streamtree-hgs") in by and (s, "river-ARF-10") in by:
            ours, arf = by[(s, "streamtree-hgs")]["log_loss"], by[(s, "river-ARF-10")]["log_loss"]
            gaps.append(f"{s} {100 * (ours - arf) / arf:+.0f}%")
    if gaps:
        lines.append("log loss gap to ARF-10 (ours relative to ARF): " + ", ".join(gaps))
    ratios = []
    for s in streams:
        if (s, "streamtree-hgs") in by and (s, "river-HT-nba") in by:
            ratios.append(by[(s, "streamtree-hgs")]["examples_per_s"] / by[(s, "river-HT-nba")]["examples_per_s"])
    if ratios:
        lines.append(
            "speed, per-event learn_one + predict_proba_one, streamtree-hgs / river-HT-nba: "
            f"geometric mean {statistics.geometric_mean(ratios):.2f}x, min {min(ratios):.2f}x, max {max(ratios):.2f}x"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--streams", nargs="*", default=list(STREAMS))
    parser.add_argument("--models", nargs="*", default=None)
    parser.add_argument("--n", type=int, default=N, help="examples per stream (whole data set if smaller)")
    parser.add_argument("--arf-n", type=int, default=N, help="examples per stream for ARF-10 (slow)")
    parser.add_argument("--ours", default="{}", help="JSON config overrides for streamtree models")
    parser.add_argument("--tag", default="prequential", help="output name under bench/results/")
    parser.add_argument("--plots", nargs="*", default=["RandomRBF", "Waveform"], help="streams with reliability diagrams")
    args = parser.parse_args()
    ours = json.loads(args.ours)
    factories = model_factories(ours)
    models = args.models or list(factories)
    rows: list[dict[str, Any]] = []
    for stream_name in args.streams:
        stream = STREAMS[stream_name]
        data = stream.take(args.n)
        plotted: dict[str, Score] = {}
        for model_name in models:
            n = min(len(data), args.arf_n) if model_name == "river-ARF-10" else len(data)
            model = factories[model_name]()
            score, elapsed = run_one(model, data[:n])
            row = {"stream": stream_name, "model": model_name, "n": n, **score.result(), "seconds": elapsed, "examples_per_s": n / elapsed}
            if isinstance(model, ProbabilityTree):
                row["nodes"] = model.n_nodes
            elif hasattr(model, "n_nodes"):
                row["nodes"] = model.n_nodes
            rows.append(row)
            print(f"{stream_name:15s} {model_name:22s} n={n:6d} logloss={row['log_loss']:.4f} acc={row['accuracy']:.4f} "
                  f"ex/s={row['examples_per_s']:9.0f} nodes={row.get('nodes', '')}", flush=True)
            if stream_name in args.plots and model_name in ("streamtree-hgs", "river-HT-nba", "river-ARF-10"):
                plotted[model_name] = score
        if plotted:
            reliability_plot(stream_name, plotted, RESULTS / f"reliability_{stream_name}.png")
        write(args, ours, rows)
    print("\n".join(write(args, ours, rows)["summary"]))


def write(args: argparse.Namespace, ours: dict[str, Any], rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Write the results so far (after every stream, so a long run is never lost)."""
    results: dict[str, Any] = {
        "meta": {
            "note": (
                f"Test-then-train, up to {args.n:,} examples a stream (ARF-10: up to {args.arf_n:,}); "
                "log loss in nats with every model's probabilities clipped at 1e-15 and renormalised over "
                "the labels seen so far, the first example of each label not scored (bench/scoring.py). "
                f"streamtree config overrides: {json.dumps(ours)}. Machine: {platform.machine()}, "
                f"Python {platform.python_version()}; speeds are from this one run."
            ),
            "ours": ours,
        },
        "runs": rows,
        "summary": summarise(rows),
    }
    path = RESULTS / f"{args.tag}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=1))
    path.with_suffix(".md").write_text(markdown(results))
    return results


if __name__ == "__main__":
    main()
