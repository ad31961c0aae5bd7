"""Top-label reliability diagrams of prequential scores (:class:`bench.scoring.Score`): the
mean confidence of the top class against how often it was right, in 10 bins."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from bench.scoring import Score


def reliability_bins(score: Score, min_count: int = 1) -> tuple[list[float], list[float], list[int], float]:
    """Per bin of top-class confidence (``[0, 0.1), ..., [0.9, 1]``) holding at least
    ``min_count`` examples: mean confidence, accuracy and count; and the expected calibration
    error over every non-empty bin, ``sum_b n_b / n |conf_b - acc_b|``."""
    conf = np.array(score.top_p)
    hit = np.array(score.top_hit, dtype=float)
    bins = np.minimum((conf * 10).astype(int), 9)
    xs, ys, ns = [], [], []
    ece = 0.0
    for b in range(10):
        mask = bins == b
        if mask.any():
            ece += abs(conf[mask].mean() - hit[mask].mean()) * mask.mean()
        if mask.sum() >= min_count:
            xs.append(float(conf[mask].mean()))
            ys.append(float(hit[mask].mean()))
            ns.append(int(mask.sum()))
    return xs, ys, ns, float(ece)


def _pyplot():  # type: ignore[no-untyped-def]
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def overlay_plot(name: str, scores: dict[str, Score], path: Path) -> None:
    """One diagram with every model's curve (bins of at least 20 examples)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(5, 5))
    ax.plot([0, 1], [0, 1], color="grey", linestyle="--", linewidth=1, label="perfect")
    for label, score in scores.items():
        xs, ys, _, ece = reliability_bins(score, min_count=20)
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


def panel_plot(stream: str, scores: dict[str, Score], path: Path) -> None:
    """One panel per model, each bin's marker area its share of the examples."""
    plt = _pyplot()
    n = len(scores)
    cols = min(n, 4)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 3.2 * rows), squeeze=False)
    for ax, (label, score) in zip(axes.flat, scores.items()):
        xs, ys, ns, ece = reliability_bins(score)
        ax.plot([0, 1], [0, 1], color="grey", linestyle="--", linewidth=1)
        ax.scatter(xs, ys, s=[10 + 200 * k / max(sum(ns), 1) for k in ns])
        ax.plot(xs, ys, linewidth=1)
        ax.set_title(f"{label}\nECE {ece:.3f}", fontsize=8)
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.tick_params(labelsize=7)
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    fig.suptitle(f"Reliability (top label, prequential), {stream}; marker area: examples in the bin", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
