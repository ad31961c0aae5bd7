"""Forest benchmark (issue 16): ``ProbabilityForest`` against the online peers, in one run.

Every model sees each stream's examples in the same order, prequentially (predict, score as in
:mod:`bench.scoring`, then learn); time counts ``predict_proba_one`` and ``learn_one`` only
(CPU time, so the ratios hold on a shared machine). Models:

- ours: ``streamtree-tree`` (the default ``ProbabilityTree``), ``streamtree-counts`` (the same
  with ``linear=False``: the counts alone) and ``forest-<method>``, a 10-tree
  ``ProbabilityForest`` of each method;
- peers: river's ``HoeffdingTreeClassifier`` (``river-HT-nba``), ``HoeffdingAdaptiveTreeClassifier``
  (``river-HAT``), ``ARFClassifier(n_models=10)``, ``forest.AMFClassifier(n_estimators=10)``
  and an online logistic regression (``river-LR``: numbers standardised, strings one-hot,
  ``OneVsRestClassifier(LogisticRegression())``); and, not a peer of the targets,
  ``forest.AMFClassifier(n_estimators=1)`` (``river-AMF-1``): what one of AMF-10's trees does
  alone, beside our one tree;
- MOA's (Java, through CapyMOA in ``.venv-moa``, :mod:`bench.moa`): ``moa-HT``
  (``HoeffdingTree``), ``moa-HAT`` (``HoeffdingAdaptiveTree``), ``moa-ARF-10``
  (``AdaptiveRandomForest -s 10``) and ``moa-SRP-10`` (``StreamingRandomPatches -s 10``), MOA's
  defaults otherwise: one worker process per stream tests then trains them all on the stream
  written as ARFF, and their predictions are scored here like every other model's; their time
  is the worker's CPU time of CapyMOA's ``predict_proba`` + ``train`` calls (MOA through JPype,
  not MOA's own loop: :mod:`bench.moa_speed` measures that). Run by default when
  ``.venv-moa`` is built (``make .venv-moa/bin/.installed``), skipped with a note otherwise.

Streams: the 17 of :mod:`bench.streams`, the new-seed generator configurations of
:data:`FRESH`, and the randomized-trees paper's synthetic stream with a known posterior
(:class:`KnownPosterior`), where the mean squared distance of each prediction from the true
posterior is recorded too (the paper's "exact MSE").

Decisions: on the streams of :data:`COSTS` each model's scored predictions also decide, with
:func:`streamtree.decide` (least expected cost) and with the argmax rule (the decision that is
right for the most probable label), and the mean cost of each is recorded with the improved
squared error (Eq. 3 of the randomized-trees paper).

Usage::

    python -m bench.forests                                  # everything (about 20 minutes on 2 cores)
    python -m bench.forests --streams SEA Posterior-5 --n 5000 --models forest-rd river-HT-nba
    python -m bench.forests --tree '{"grace_period": 50}' --models forest-rd --tag sweep
    python -m bench.forests --forest '{"poisson_rate": 2}' --models forest-bt+ --tag sweep
    python -m bench.forests --models forest-bt+ river-HT-nba --rounds 3 --tag forests_speed   # speed alone

Results: ``bench/results/<tag>.json`` and ``.md`` (tag ``forests``), and with ``--plots`` the
reliability diagrams ``bench/results/forest_reliability_<stream>.png``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import numbers
import platform
import random
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
from river import compose, forest, linear_model, multiclass, preprocessing, tree
from river.datasets import synth

from bench import moa
from bench.reliability import panel_plot
from bench.scoring import EPS, Score
from bench.streams import STREAMS, Stream, _switching
from streamtree import ProbabilityForest, ProbabilityTree, decide, warm_up
from streamtree.forest import METHODS
from streamtree.metrics import improved_squared_error

RESULTS = Path(__file__).parent / "results"
N_EVENTS = 20_000
PEERS = ("river-HT-nba", "river-HAT", "river-ARF-10", "river-AMF-10", "river-LR")


class KnownPosterior:
    """The randomized-trees paper's synthetic data (its section 6.1), as a stream.

    ``d`` features uniform in ``[0, 5]``, ``s = sum_i i x_i``, ``tau = s / S`` with ``S`` the
    largest ``s``; the label is drawn from ``P(0|x) = tau (1 - tau)``, ``P(1|x) = tau^2``,
    ``P(2|x) = (1 - tau) tau``, ``P(3|x) = (1 - tau)^2``: no model can be right more than
    about 56% of the time, and :meth:`posterior` is the truth every estimate is measured
    against.
    """

    def __init__(self, d: int, seed: int) -> None:
        self.d, self.seed = d, seed
        self.top = 5.0 * sum(range(1, d + 1))

    def posterior(self, x: dict[str, float]) -> dict[int, float]:
        tau = sum((i + 1) * x[f"x{i}"] for i in range(self.d)) / self.top
        return {0: tau * (1 - tau), 1: tau * tau, 2: (1 - tau) * tau, 3: (1 - tau) * (1 - tau)}

    def __iter__(self) -> Iterator[tuple[dict[str, float], int]]:
        rng = random.Random(self.seed)
        while True:
            x = {f"x{i}": rng.uniform(0.0, 5.0) for i in range(self.d)}
            p = self.posterior(x)
            yield x, rng.choices(list(p), weights=list(p.values()))[0]


#: Generator configurations the other benchmarks have not seen: new seeds and parameters.
FRESH: dict[str, Stream] = {
    s.name: s
    for s in [
        Stream(
            "RandomRBF-3c",
            lambda: iter(synth.RandomRBF(seed_model=7, seed_sample=7, n_classes=3, n_features=8, n_centroids=30)),
        ),
        Stream(
            "RandomRBF-5c",
            lambda: iter(synth.RandomRBF(seed_model=11, seed_sample=11, n_classes=5, n_features=10, n_centroids=40)),
        ),
        Stream("Waveform-noise", lambda: iter(synth.Waveform(seed=7, has_noise=True))),
        Stream("LED-noise", lambda: iter(synth.LED(seed=7, noise_percentage=0.2, irrelevant_features=True))),
        _switching(
            "SEA-drift-7",
            lambda: [synth.SEA(variant=v, noise=0.1, seed=7 + i) for i, v in enumerate((1, 3))],
            10_000,
            500,
        ),
        _switching(
            "Agrawal-drift-7",
            lambda: [synth.Agrawal(classification_function=f, seed=7 + i) for i, f in enumerate((3, 6))],
            10_000,
            500,
        ),
    ]
}
POSTERIOR: dict[str, KnownPosterior] = {f"Posterior-{d}": KnownPosterior(d, seed=7) for d in (5, 15)}

# Decision -> {true label: cost}, per stream. Phishing, fraud-style: letting a phishing page
# (True) through costs 100, blocking a legitimate one 5. The known-posterior streams as a
# triage of four severities (0 harmless .. 3 severe): ignoring a severe case is the costly error.
_TRIAGE = {
    "ignore": {0: 0, 1: 1, 2: 10, 3: 50},
    "review": {0: 2, 1: 2, 2: 2, 3: 20},
    "escalate": {0: 10, 1: 10, 2: 5, 3: 0},
}
COSTS: dict[str, dict[str, dict[Any, float]]] = {
    "Phishing": {"allow": {True: 100, False: 0}, "block": {True: 0, False: 5}},
    "Posterior-5": _TRIAGE,
    "Posterior-15": _TRIAGE,
}


def logistic_regression() -> Any:
    """The online logistic regression peer: standardised numbers, one-hot strings."""
    numbers_part = compose.SelectType(numbers.Number) | preprocessing.StandardScaler()
    strings_part = compose.SelectType(str) | preprocessing.OneHotEncoder()
    return (numbers_part + strings_part) | multiclass.OneVsRestClassifier(linear_model.LogisticRegression())


def model_factories(
    tree_config: dict[str, Any], forest_config: dict[str, Any] | None = None
) -> dict[str, Callable[[], Any]]:
    """Every model by name; ``tree_config`` for our trees and members, ``forest_config``
    (``ProbabilityForest`` parameters, e.g. ``poisson_rate``, ``variants``) for our forests."""
    fc = forest_config or {}
    ours: dict[str, Callable[[], Any]] = {
        "streamtree-tree": lambda: ProbabilityTree(**tree_config),
        # the counts alone (no linear component): what the component adds
        "streamtree-counts": lambda: ProbabilityTree(**{**tree_config, "linear": False}),
    }
    for method in METHODS:
        ours[f"forest-{method}"] = lambda m=method: ProbabilityForest(
            **{"n_trees": 10, "method": m, "seed": 42, "tree": tree_config, **fc}
        )
    ours["forest-bt+nb"] = lambda: ProbabilityForest(
        **{"n_trees": 10, "method": "bt+", "seed": 42, "tree": {**tree_config, "naive_bayes": True}, **fc}
    )
    # BT+ as it was before its members differed: alike, bagging rate 1, every repetition an
    # example seen (docs/decisions/forest-variants.md): the default's A/B
    ours["forest-bt+alike"] = lambda: ProbabilityForest(
        **{
            "n_trees": 10,
            "method": "bt+",
            "seed": 42,
            "tree": {**tree_config, "repeats_as_seen": True},
            **fc,
            "variants": [{}],
            "poisson_rate": 1.0,
        }
    )
    return ours | {
        "river-HT-nba": lambda: tree.HoeffdingTreeClassifier(),
        "river-HAT": lambda: tree.HoeffdingAdaptiveTreeClassifier(seed=42),
        "river-ARF-10": lambda: forest.ARFClassifier(n_models=10, seed=42),
        "river-AMF-10": lambda: forest.AMFClassifier(n_estimators=10, seed=42),
        # one Mondrian tree with AMF's aggregation: the single-tree reference for AMF-10 (not a
        # peer of the issues' targets; measured beside our single tree)
        "river-AMF-1": lambda: forest.AMFClassifier(n_estimators=1, seed=42),
        "river-LR": logistic_regression,
    }


def take(name: str, n: int) -> tuple[list[tuple[dict, Any]], KnownPosterior | None]:
    if name in POSTERIOR:
        source = POSTERIOR[name]
        return list(itertools.islice(iter(source), n)), source
    stream = STREAMS.get(name) or FRESH[name]
    return stream.take(n), None


class Costed:
    """Mean cost of the decisions taken from a model's scored predictions, by least expected
    cost (``decide``) and by the argmax rule, and the mean improved squared error; decided on
    the same normalised probabilities :class:`~bench.scoring.Score` scores (every label the
    stream has shown, floored at ``EPS``), so every model decides on the same examples."""

    def __init__(self, costs: dict[str, dict[Any, float]]) -> None:
        self.costs = costs
        self.n = 0
        self.cost = self.argmax_cost = self.ise = 0.0

    def update(self, y: Any, proba: dict, seen: list) -> None:
        if y not in seen:
            return
        p = np.array([max(float(proba.get(label, 0.0)), EPS) for label in seen])
        p /= p.sum()
        normalised = dict(zip(seen, p.tolist()))
        top = seen[int(np.argmax(p))]
        self.n += 1
        self.cost += self.costs[decide(normalised, self.costs).decision][y]
        self.argmax_cost += self.costs[decide({top: 1.0}, self.costs).decision][y]
        self.ise += improved_squared_error(normalised, y, self.costs)

    def result(self) -> dict[str, float]:
        n = max(self.n, 1)
        return {"decision_cost": self.cost / n, "argmax_cost": self.argmax_cost / n, "ise": self.ise / n}


def run_one(
    model: Any,
    data: list[tuple[dict, Any]],
    truth: KnownPosterior | None,
    costs: dict[str, dict[Any, float]] | None = None,
) -> dict[str, Any]:
    score = Score()
    costed = Costed(costs) if costs else None
    elapsed = 0.0
    clock = time.process_time
    sq = 0.0
    for x, y in data:
        start = clock()
        proba = model.predict_proba_one(x)
        model.learn_one(x, y)
        elapsed += clock() - start
        if truth is not None:  # squared distance from the true posterior, over its 4 classes
            p = np.array([max(float(proba.get(k, 0.0)), EPS) for k in range(4)])
            p /= p.sum()
            sq += float(((p - np.array(list(truth.posterior(x).values()))) ** 2).sum())
        if costed is not None:
            costed.update(y, proba, score.labels)
        score.update(y, proba)
    out: dict[str, Any] = {
        **score.result(),
        "n": len(data),
        "cpu_s": elapsed,
        "us_per_event": 1e6 * elapsed / max(len(data), 1),
    }
    if truth is not None:
        out["posterior_mse"] = sq / len(data)
    if costed is not None:
        out.update(costed.result())
    out["_score"] = score
    return out


def summarise(rows: list[dict[str, Any]]) -> list[str]:
    """The issue's targets, as sentences with counts."""
    by = {(r["stream"], r["model"]): r for r in rows}
    streams = list(dict.fromkeys(r["stream"] for r in rows))
    models = list(dict.fromkeys(r["model"] for r in rows))
    ours = [m for m in models if m.startswith("forest-")]
    lines = []
    peers = [m for m in models if m in PEERS or m in moa.MOA_PEERS]
    for m in ours:
        mine = [s for s in streams if (s, m) in by]
        best = sum(all(by[(s, m)]["log_loss"] <= by[(s, o)]["log_loss"] for o in models if (s, o) in by) for s in mine)
        over_peers = sum(
            all(by[(s, m)]["log_loss"] < by[(s, o)]["log_loss"] for o in peers if (s, o) in by) for s in mine
        )
        line = (
            f"{m}: lower log loss than every peer ({', '.join(peers)}) on {over_peers} of {len(mine)} streams, "
            f"the lowest of all models (ours included) on {best}"
        )
        for peer in ("river-HT-nba", "river-ARF-10", "river-AMF-10", "moa-ARF-10", "moa-SRP-10"):
            both = [s for s in streams if (s, m) in by and (s, peer) in by]
            if both:
                wins = sum(by[(s, m)]["log_loss"] < by[(s, peer)]["log_loss"] for s in both)
                line += f"; below {peer} on {wins} of {len(both)}"
        lines.append(line)
    for s in streams:
        costed = [m for m in models if "decision_cost" in by.get((s, m), {})]
        if costed:
            cheaper = [m for m in costed if by[(s, m)]["decision_cost"] < by[(s, m)]["argmax_cost"]]
            least = min(costed, key=lambda m: by[(s, m)]["decision_cost"])
            lines.append(
                f"decisions on {s}: `decide` costs less than the argmax rule for {len(cheaper)} of "
                f"{len(costed)} models; least mean cost {by[(s, least)]['decision_cost']:.3f} ({least})"
            )
    for m in ours + ["streamtree-tree"]:
        ratios = [
            by[(s, "river-HT-nba")]["us_per_event"] / by[(s, m)]["us_per_event"]
            for s in streams
            if (s, m) in by and (s, "river-HT-nba") in by
        ]
        if ratios:
            gm = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
            lines.append(
                f"speed, {m} against river-HT-nba (CPU per event, >1 is faster): geometric mean {gm:.2f}x, "
                f"min {min(ratios):.2f}x"
            )
    return lines


def markdown(results: dict[str, Any]) -> str:
    rows = results["runs"]
    streams = list(dict.fromkeys(r["stream"] for r in rows))
    models = list(dict.fromkeys(r["model"] for r in rows))
    by = {(r["stream"], r["model"]): r for r in rows}
    out = [f"# Forest benchmark (`bench/forests.py`)\n\n{results['meta']['note']}\n"]
    for metric, fmt, lower in (
        ("log_loss", "{:.4f}", True),
        ("posterior_mse", "{:.4f}", True),
        ("accuracy", "{:.4f}", False),
        ("us_per_event", "{:,.0f}", True),
        ("decision_cost", "{:.3f}", True),
        ("argmax_cost", "{:.3f}", True),
        ("ise", "{:.4f}", True),
    ):
        present = [s for s in streams if any(metric in by.get((s, m), {}) for m in models)]
        if not present:
            continue
        title = {
            "log_loss": "log loss (bold: best)",
            "posterior_mse": "mean squared distance to the true posterior",
            "accuracy": "accuracy",
            "us_per_event": "CPU microseconds per event (predict + learn)",
            "decision_cost": "mean cost of `decide` (least expected cost), costs of `COSTS`",
            "argmax_cost": "mean cost of the argmax rule (the decision right for the most probable label)",
            "ise": "improved squared error (Eq. 3) under the same costs",
        }[metric]
        out.append(f"\n## {title}\n\n| stream | " + " | ".join(models) + " |")
        out.append("|---|" + "---|" * len(models))
        for s in present:
            values = {m: by[(s, m)][metric] for m in models if metric in by.get((s, m), {})}
            best = (min if lower else max)(values, key=values.__getitem__) if metric != "us_per_event" else None
            cells = [
                ("**" + fmt.format(values[m]) + "**" if m == best else fmt.format(values[m])) if m in values else ""
                for m in models
            ]
            out.append(f"| {s} | " + " | ".join(cells) + " |")
    out.append("\n## Targets\n")
    out.extend(f"- {line}" for line in results["summary"])
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--streams", nargs="*", default=None)
    parser.add_argument("--models", nargs="*", default=None)
    parser.add_argument("--n", type=int, default=N_EVENTS)
    parser.add_argument("--tree", type=json.loads, default={}, help="ProbabilityTree parameters (JSON) for ours")
    parser.add_argument(
        "--forest", type=json.loads, default={}, help="ProbabilityForest parameters (JSON) for our forests"
    )
    parser.add_argument("--tag", default="forests")
    parser.add_argument("--plots", action="store_true", help="reliability diagrams per stream")
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="run the models this many times over each stream, interleaved, and keep each one's least "
        "CPU time (one run moves ratios near 1 by a tenth on a shared machine)",
    )
    parser.add_argument(
        "--report-only", action="store_true", help="rewrite <tag>.md and the summary from <tag>.json, running nothing"
    )
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error(f"--rounds must be at least 1, got {args.rounds}")
    if args.report_only:
        results = json.loads((RESULTS / f"{args.tag}.json").read_text())
        results["summary"] = summarise(results["runs"])
        (RESULTS / f"{args.tag}.json").write_text(json.dumps(results, indent=1) + "\n")
        (RESULTS / f"{args.tag}.md").write_text(markdown(results))
        print("\n".join(results["summary"]))
        return
    factories = model_factories(args.tree, args.forest)
    names = args.models or [*factories, *(moa.MOA_PEERS if moa.available() else ())]
    unknown = [n for n in names if n not in factories and n not in moa.MOA_PEERS]
    if unknown:
        parser.error(f"--models: unknown {unknown}; expected names among {[*factories, *moa.MOA_PEERS]}")
    moa_names = [n for n in names if n in moa.MOA_PEERS]
    if moa_names and not moa.available():
        parser.error(f"--models {moa_names} need MOA: run `make .venv-moa/bin/.installed`")
    if not args.models and not moa.available():
        print("MOA's peers skipped: .venv-moa is not built (make .venv-moa/bin/.installed)", flush=True)
    streams = args.streams or [*STREAMS, *FRESH, *POSTERIOR]
    warm_up()
    rows = []
    for stream in streams:
        data, truth = take(stream, args.n)
        scores = {}
        kept: dict[str, dict[str, Any]] = {}
        # MOA's models run once, in their own process; each round scores their predictions
        moa_runs = moa.prequential(data, moa_names) if moa_names else {}
        for _ in range(args.rounds):
            for name in names:
                if name in moa_runs:
                    result = run_one(moa.Replay(moa_runs[name]["proba"]), data, truth, COSTS.get(stream))
                    result["cpu_s"] = moa_runs[name]["cpu_s"]
                    result["us_per_event"] = 1e6 * result["cpu_s"] / max(len(data), 1)
                    result["no_prediction"] = moa_runs[name]["no_prediction"]
                else:
                    result = run_one(factories[name](), data, truth, COSTS.get(stream))
                first = kept.setdefault(name, result)
                if result["log_loss"] != first["log_loss"]:
                    raise RuntimeError(f"{stream}, {name}: another round gave another log loss")
                if result["cpu_s"] < first["cpu_s"]:
                    first["cpu_s"], first["us_per_event"] = result["cpu_s"], result["us_per_event"]
        for name in names:
            result = kept[name]
            scores[name] = result.pop("_score")
            rows.append({"stream": stream, "model": name, **result})
            print(
                f"{stream:16s} {name:16s} log loss {result['log_loss']:.4f}"
                + (f"  posterior mse {result['posterior_mse']:.4f}" if "posterior_mse" in result else "")
                + f"  {result['us_per_event']:,.0f} us/event",
                flush=True,
            )
        if args.plots:
            panel_plot(stream, scores, RESULTS / f"forest_reliability_{stream}.png")
    meta = {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "n": args.n,
        "tree": args.tree,
        "forest": args.forest,
        "date": time.strftime("%Y-%m-%d"),
        "rounds": args.rounds,
        "note": f"{args.n:,} events per stream (fewer where the dataset is shorter), prequential; one run, one "
        "process, CPU time"
        + (f" (each model's least of {args.rounds} rounds, interleaved)" if args.rounds > 1 else "")
        + "; ours with tree config "
        + json.dumps(args.tree)
        + (f" and forest config {json.dumps(args.forest)}" if args.forest else "")
        + "."
        + (
            " MOA's models' time is CapyMOA's per-instance predict_proba + train through JPype (bench.moa_speed "
            "measures MOA's own loop)."
            if moa_names
            else ""
        ),
    }
    results = {"meta": meta, "runs": rows, "summary": summarise(rows)}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{args.tag}.json").write_text(json.dumps(results, indent=1) + "\n")
    (RESULTS / f"{args.tag}.md").write_text(markdown(results))
    print("\n".join(results["summary"]))


if __name__ == "__main__":
    main()
