"""Probe (issue 12): would soft routing near thresholds close the default tree's gaps?

The quality issue lists soft routing among the directions for smooth posteriors. This probe
measures it before any kernel is written: the default :class:`~streamtree.ProbabilityTree`
learns each stream prequentially, and every example is predicted twice before it is learned,
by the tree as it serves (hard routing) and by the same tree routed softly. At a numeric node
``i`` splitting column ``f`` at ``t_i`` the example goes left with probability

.. math::

    P(\\text{left}) = \\Phi\\big((t_i - x_f) / \\sigma_i\\big),

every reachable leaf ``l`` (weight ``w_l(x)``, the product of its path's routing
probabilities; branches below ``1e-6`` are dropped) serves its own probabilities ``p_l(x)``
exactly as the tree serves them (HGS over the leaf's path, pooled with the linear component),
and the soft prediction is ``sum_l w_l(x) p_l(x) / sum_l w_l(x)``. A missing value or a nominal
split routes as the tree does. Two scales for ``sigma_i``:

- ``sd``: ``tau * sd_f``, the column's running standard deviation (the linear component's
  ``lr_scale``);
- ``width``: ``tau * (hi - lo)``, the width along ``f`` of node ``i``'s region (its ancestors'
  thresholds on ``f``, ``mean_f +- 2 sd_f`` where none bounds it): deep splits are blurred less.

Scored as every bench model (:mod:`bench.scoring`). The cost is recorded as the mean number of
leaves a soft prediction evaluates (a hard one evaluates 1), independent of the machine.

Usage::

    python -m bench.soft_routing_probe                       # the streams below, about 3 min
    python -m bench.soft_routing_probe --streams Bananas --n 3000 --settings sd:0.1

Results: ``bench/results/soft_routing_probe.json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from typing import Any

import numpy as np

from bench.forests import N_EVENTS, RESULTS, take
from bench.scoring import Score
from streamtree import ProbabilityTree
from streamtree.encoding import encode_for_prediction
from streamtree.kernels.predict import proba_at
from streamtree.state import COL, KIND, LEAF, LEFT, M_CLASSES, M_NODES, NOMINAL, RIGHT

# the seven streams where the default tree is more than 10% behind the best peer, and six it wins
STREAMS = (
    "Bananas",
    "Shuttle",
    "Sine-abrupt",
    "RandomRBF",
    "RandomRBFDrift",
    "RandomRBF-3c",
    "RandomRBF-5c",
    "Phishing",
    "SEA",
    "Agrawal",
    "Hyperplane",
    "Waveform",
    "LED",
)
SETTINGS = ("sd:0.03", "sd:0.1", "sd:0.3", "width:0.02", "width:0.05")
DROP = 1e-6


def soft_proba(model: ProbabilityTree, x: dict, scale: str, tau: float) -> tuple[dict, int]:
    """The soft-routed prediction of ``model`` for ``x`` and the number of leaves it evaluated."""
    num, nom = encode_for_prediction(model.registry, [x])
    num_row, nom_row = num[0], nom[0]
    t = model.state.tree
    handle = model.state.handle(t)
    k = int(t.meta[M_CLASSES])
    node, thr, lr_scale = t.node, t.thr, t.lr_scale
    out = np.zeros(k)
    leaf_p, smoothed, loglik = np.empty(max(k, 1)), np.empty(max(k, 1)), np.empty(max(k, 1))
    path = np.empty(int(t.meta[M_NODES]), dtype=np.int64)
    evaluated = 0
    stack: list[tuple[int, float, list[int], dict[int, tuple[float, float]]]] = [(0, 1.0, [0], {})]
    while stack:
        i, w, nodes, bounds = stack.pop()
        kind, col = node[i, KIND], node[i, COL]
        if kind == NOMINAL:
            code = nom_row[col] if col < nom_row.shape[0] else -1
            if code >= 0:
                nxt = node[i, LEFT] if code == thr[i] else node[i, RIGHT]
                stack.append((nxt, w, nodes + [nxt], bounds))
                continue
        v = num_row[col] if kind != LEAF and kind != NOMINAL and col < num_row.shape[0] else math.nan
        if kind == LEAF or kind == NOMINAL or v != v:  # a leaf, or the tree stops here too
            path[: len(nodes)] = nodes
            proba_at(
                handle,
                model.state.cfg_i,
                model.state.cfg_f,
                path,
                len(nodes),
                num_row,
                nom_row,
                leaf_p,
                smoothed,
                loglik,
            )
            out += w * leaf_p[:k]
            evaluated += 1
            continue
        n, mean, m2 = lr_scale[col, 0], lr_scale[col, 1], lr_scale[col, 2]
        sd = math.sqrt(m2 / (n - 1.0)) if n > 1 and m2 > 0 else 0.0
        lo, hi = bounds.get(col, (mean - 2.0 * sd, mean + 2.0 * sd))
        sigma = tau * sd if scale == "sd" else tau * max(hi - lo, 0.0)
        if sigma > 0.0:
            left = 0.5 * math.erfc((v - thr[i]) / (sigma * math.sqrt(2.0)))
        else:
            left = 1.0 if v <= thr[i] else 0.0
        if w * left > DROP:
            stack.append((node[i, LEFT], w * left, nodes + [node[i, LEFT]], {**bounds, col: (lo, min(hi, thr[i]))}))
        if w * (1.0 - left) > DROP:
            stack.append(
                (node[i, RIGHT], w * (1.0 - left), nodes + [node[i, RIGHT]], {**bounds, col: (max(lo, thr[i]), hi)})
            )
    out /= out.sum()
    return dict(zip(model.classes_, out.tolist())), evaluated


def run(stream: str, n: int, settings: list[str]) -> dict[str, Any]:
    data, _ = take(stream, n)
    model = ProbabilityTree()
    hard = Score()
    soft = {s: Score() for s in settings}
    leaves = dict.fromkeys(settings, 0)
    predicted = 0
    for x, y in data:
        if model.n_nodes and len(model.classes_):
            hard.update(y, model.predict_proba_one(x))
            predicted += 1
            for s in settings:
                scale, tau = s.split(":")
                proba, evaluated = soft_proba(model, x, scale, float(tau))
                soft[s].update(y, proba)
                leaves[s] += evaluated
        else:
            for score in (hard, *soft.values()):
                score.update(y, {})
        model.learn_one(x, y)
    return {
        "n": len(data),
        "hard": hard.result()["log_loss"],
        "soft": {s: soft[s].result()["log_loss"] for s in settings},
        "leaves": {s: leaves[s] / max(predicted, 1) for s in settings},
    }


def markdown(results: dict[str, Any], settings: list[str], command: str) -> str:
    lines = [
        "# Probe: soft routing near thresholds for the default tree (issue 12)",
        "",
        "Prequential log loss of the default tree as it serves (hard) and routed softly at prediction time "
        "(`bench/soft_routing_probe.py`, whose docstring defines each scale), on the same tree, the same "
        "examples and the scoring of [`forests.md`](forests.md); change against hard in brackets; "
        "leaves: mean leaves a soft prediction evaluates (a hard one: 1).",
        "",
        f"`{command}`",
        "",
        "| stream | n | hard | " + " | ".join(settings) + " | " + " | ".join(f"leaves {s}" for s in settings) + " |",
        "|---|---:|---:|" + "---:|" * (2 * len(settings)),
    ]
    for stream, r in results.items():
        cells = [f"{r['soft'][s]:.4f} ({100 * (r['soft'][s] / r['hard'] - 1):+.1f}%)" for s in settings]
        lines.append(
            f"| {stream} | {r['n']} | {r['hard']:.4f} | "
            + " | ".join(cells)
            + " | "
            + " | ".join(f"{r['leaves'][s]:.1f}" for s in settings)
            + " |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--streams", nargs="*", default=list(STREAMS))
    parser.add_argument("--n", type=int, default=N_EVENTS)
    parser.add_argument("--settings", nargs="*", default=list(SETTINGS), help="scale:tau, scale sd or width")
    parser.add_argument("--tag", default="soft_routing_probe")
    args = parser.parse_args(argv)
    for s in args.settings:
        scale, _, tau = s.partition(":")
        if scale not in ("sd", "width") or not tau:
            parser.error(f"--settings: expected scale:tau with scale sd or width, got {s!r}")
    results: dict[str, Any] = {}
    for stream in args.streams:
        start = time.perf_counter()
        results[stream] = run(stream, args.n, args.settings)
        print(stream, json.dumps(results[stream]), f"{time.perf_counter() - start:.0f} s", flush=True)
    command = " ".join(["python -m bench.soft_routing_probe", *(sys.argv[1:] if argv is None else argv)])
    (RESULTS / f"{args.tag}.json").write_text(json.dumps(results, indent=1) + "\n")
    (RESULTS / f"{args.tag}.md").write_text(markdown(results, args.settings, command))


if __name__ == "__main__":
    main()
