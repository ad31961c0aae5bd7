"""Prequential (test-then-train) benchmark: streamtree against river's trees and forest.

Every model sees each stream's examples in the same order; on each example it first predicts
(scored as in :mod:`bench.scoring`), then learns. Time counts only ``predict_proba_one`` and
``learn_one``. Results go to ``bench/results/<tag>.json`` and ``.md``; reliability
diagrams to ``bench/results/reliability_*.png``. When the run includes drifting streams, both
also carry a drift section (:mod:`bench.drift_report`: log loss on the drifting streams, recovery
time after each drift at a known position, adaptation against none on the stationary streams).

Suites: ``all`` (the default) runs every model but streamtree-hgs-static on every stream.
``drift`` (the issue #5 benchmark) runs streamtree-hgs, streamtree-hgs-nb (``naive_bayes=True``),
streamtree-hgs-static (adaptation off: :data:`NO_ADAPTATION`), river-HAT and river-ARF-10 on
the drifting streams and only the streamtree models on the stationary ones, and plots the windowed log loss of every stream
with known drift positions to ``bench/results/drift_<stream>.png``.

Usage::

    python -m bench.prequential                       # everything (about 5 minutes)
    python -m bench.prequential --suite drift --tag drift   # the drift benchmark (about 2 minutes)
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

from bench import drift_report
from bench.drift_report import DRIFT_MODELS, NB, STATIC, STATIONARY_MODELS
from bench.reliability import overlay_plot
from bench.scoring import Score
from bench.streams import STREAMS, N
from streamtree import ProbabilityTree, warm_up

RESULTS = Path(__file__).parent / "results"

# streamtree-hgs-static: our tree with forgetting and change detection switched off
NO_ADAPTATION: dict[str, Any] = {"half_life": None, "drift_delta": None}


def model_factories(ours: dict[str, Any]) -> dict[str, Callable[[], Any]]:
    def st(smoothing: str) -> Callable[[], Any]:
        return lambda: ProbabilityTree(**{**ours, "smoothing": smoothing})

    return {
        "streamtree-hgs": st("hgs"),
        NB: lambda: ProbabilityTree(**{**ours, "smoothing": "hgs", "naive_bayes": True}),
        STATIC: lambda: ProbabilityTree(**{**ours, "smoothing": "hgs", **NO_ADAPTATION}),
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


def drift_curves(stream: str, scores: dict[str, Score], plot: bool) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """Recovery after each known drift of ``stream`` for every model, and its windowed-loss plot."""
    losses = {m: score.per_example_losses() for m, score in scores.items()}
    longest = max((len(ls) for ls in losses.values()), default=0)
    drifts = [d for d in STREAMS[stream].known_drifts() if d[0] < longest]
    if not drifts:
        return [], {}
    recovery = [
        {"stream": stream, "model": m, **r} for m, ls in losses.items() for r in drift_report.recoveries(ls, drifts)
    ]
    if not plot:
        return recovery, {}
    path = RESULTS / f"drift_{stream}.png"
    drift_report.plot(stream, {m: drift_report.windowed(ls) for m, ls in losses.items()}, drifts, path)
    return recovery, {stream: path.name}


def markdown(results: dict[str, Any]) -> str:
    rows = results["runs"]
    streams = list(dict.fromkeys(r["stream"] for r in rows))
    models = list(dict.fromkeys(r["model"] for r in rows))
    by = {(r["stream"], r["model"]): r for r in rows}
    out = [f"# Prequential benchmark\n\n{results['meta']['note']}\n"]
    headline = [
        m
        for m in ("streamtree-hgs", NB, "streamtree-laplace", "river-HT-nba", "river-HAT", "river-ARF-10")
        if m in models
    ]
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
    for metric, fmt in (
        ("log_loss", "{:.4f}"),
        ("brier", "{:.4f}"),
        ("accuracy", "{:.4f}"),
        ("examples_per_s", "{:,.0f}"),
    ):
        out.append(f"\n## {metric}\n\n| stream | n | " + " | ".join(models) + " |")
        out.append("|---|---|" + "---|" * len(models))
        for s in streams:
            cells = []
            for m in models:
                r = by.get((s, m))
                cells.append(fmt.format(r[metric]) if r else "")
            n = next(by[(s, m)]["n"] for m in models if (s, m) in by)
            out.append(f"| {s} | {n} | " + " | ".join(cells) + " |")
    if results.get("drift"):
        out.extend(drift_report.markdown(results["drift"]))
    if "summary" in results:
        out.append("\n## Targets\n")
        for line in results["summary"]:
            out.append(f"- {line}")
    return "\n".join(out) + "\n"


def summarise(rows: list[dict[str, Any]], drift: dict[str, Any] | None = None) -> list[str]:
    by = {(r["stream"], r["model"]): r for r in rows}
    streams = list(dict.fromkeys(r["stream"] for r in rows))
    lines = []

    def wins(a: str, b: str) -> tuple[int, int]:
        both = [s for s in streams if (s, a) in by and (s, b) in by]
        return sum(by[(s, a)]["log_loss"] < by[(s, b)]["log_loss"] for s in both), len(both)

    for ours, others in (
        ("streamtree-hgs", ("river-HT-nba", "streamtree-laplace", "river-HAT", "river-ARF-10")),
        (NB, ("streamtree-hgs", "river-HT-nba", "river-HAT", "river-ARF-10")),
    ):
        for other in others:
            w, n = wins(ours, other)
            if n:
                lines.append(f"log loss, {ours} below {other}: {w} of {n} streams")
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
    if drift:
        lines.extend(drift_report.targets(drift))
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--suite", choices=("all", "drift"), default="all", help="default streams, models and outputs")
    parser.add_argument("--streams", nargs="*", default=list(STREAMS))
    parser.add_argument(
        "--models", nargs="*", default=None, help="(drift suite: stationary streams run only the streamtree-hgs pair)"
    )
    parser.add_argument("--n", type=int, default=N, help="examples per stream (whole data set if smaller)")
    parser.add_argument("--arf-n", type=int, default=N, help="examples per stream for ARF-10 (slow)")
    parser.add_argument("--ours", default="{}", help="JSON config overrides for streamtree models")
    parser.add_argument("--tag", default=None, help="output name under bench/results/ (default: prequential, or drift)")
    parser.add_argument(
        "--plots",
        nargs="*",
        default=None,
        help="streams with reliability diagrams (default: RandomRBF Waveform; drift suite: none)",
    )
    parser.add_argument(
        "--drift-plots",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="write drift_<stream>.png for streams with known drifts (default: only in the drift suite)",
    )
    args = parser.parse_args()
    drift_suite = args.suite == "drift"
    args.tag = args.tag or ("drift" if drift_suite else "prequential")
    if args.plots is None:
        args.plots = [] if drift_suite else ["RandomRBF", "Waveform"]
    if args.drift_plots is None:
        args.drift_plots = drift_suite
    ours = json.loads(args.ours)
    warm_up()  # examples/s measure learning, not the first call's compile
    factories = model_factories(ours)
    models = args.models or (list(DRIFT_MODELS) if drift_suite else [m for m in factories if m != STATIC])
    rows: list[dict[str, Any]] = []
    recovery: list[dict[str, Any]] = []
    drift_plots: dict[str, str] = {}
    for stream_name in args.streams:
        stream = STREAMS[stream_name]
        data = stream.take(args.n)
        plotted: dict[str, Score] = {}
        scores: dict[str, Score] = {}
        for model_name in models:
            if drift_suite and not stream.drifting and model_name not in STATIONARY_MODELS:
                continue
            n = min(len(data), args.arf_n) if model_name == "river-ARF-10" else len(data)
            model = factories[model_name]()
            score, elapsed = run_one(model, data[:n])
            row = {
                "stream": stream_name,
                "model": model_name,
                "n": n,
                **score.result(),
                "seconds": elapsed,
                "examples_per_s": n / elapsed,
            }
            if isinstance(model, ProbabilityTree) or hasattr(model, "n_nodes"):
                row["nodes"] = model.n_nodes
            rows.append(row)
            print(
                f"{stream_name:15s} {model_name:22s} n={n:6d} logloss={row['log_loss']:.4f} acc={row['accuracy']:.4f} "
                f"ex/s={row['examples_per_s']:9.0f} nodes={row.get('nodes', '')}",
                flush=True,
            )
            if stream_name in args.plots and model_name in ("streamtree-hgs", "river-HT-nba", "river-ARF-10"):
                plotted[model_name] = score
            if model_name in DRIFT_MODELS:
                scores[model_name] = score
        if plotted:
            overlay_plot(stream_name, plotted, RESULTS / f"reliability_{stream_name}.png")
        stream_recovery, stream_plot = drift_curves(stream_name, scores, args.drift_plots)
        recovery += stream_recovery
        drift_plots |= stream_plot
        write(args, ours, rows, recovery, drift_plots)
    print("\n".join(write(args, ours, rows, recovery, drift_plots)["summary"]))


def write(
    args: argparse.Namespace,
    ours: dict[str, Any],
    rows: list[dict[str, Any]],
    recovery: list[dict[str, Any]],
    drift_plots: dict[str, str],
) -> dict[str, Any]:
    """Write the results so far (after every stream, so a long run is never lost)."""
    results: dict[str, Any] = {
        "meta": {
            "note": (
                f"Test-then-train, up to {args.n:,} examples a stream (ARF-10: up to {args.arf_n:,}); "
                "log loss in nats with every model's probabilities clipped at 1e-15 and renormalised over "
                "the labels seen so far, the first example of each label not scored (bench/scoring.py). "
                f"streamtree config overrides: {json.dumps(ours)}. Machine: {platform.machine()}, "
                f"Python {platform.python_version()}; speeds are from this one run."
                + (
                    " Drift suite: the stationary streams run only the streamtree models."
                    if args.suite == "drift"
                    else ""
                )
            ),
            "ours": ours,
            "suite": args.suite,
            "no_adaptation": NO_ADAPTATION,
        },
        "runs": rows,
    }
    drift = drift_report.report(rows, recovery, drift_plots)
    if drift:
        results["drift"] = drift
    results["summary"] = summarise(rows, drift)
    path = RESULTS / f"{args.tag}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=1))
    path.with_suffix(".md").write_text(markdown(results))
    return results


if __name__ == "__main__":
    main()
