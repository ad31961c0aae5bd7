"""MOA's side of :mod:`bench.moa`: run under ``.venv-moa`` (CapyMOA and JPype only), never
imported by our code.

Run as ``.venv-moa/bin/python -P bench/moa_worker.py <command> ... --out out.json`` from a
directory holding no folder or module named ``moa`` (``-P`` keeps this script's directory,
which holds ``bench/moa.py``, off ``sys.path``: JPype would import it in place of MOA's
``moa`` Java package). Two commands:

- ``prequential --arff F --models name=class=options ...``: for each model, on the ARFF
  stream, test-then-train through CapyMOA (``predict_proba`` of each instance, then ``train``
  on it); writes per model the probability rows (``null`` where MOA gave no prediction),
  their count, and the CPU seconds (``time.process_time``) of the predict + train calls;
- ``evaluate --task T ... --passes P``: runs each MOA task (``EvaluatePrequential ...``, the
  string ``moa.DoTask`` takes) ``P`` times in this one JVM, each on a fresh learner, and
  writes MOA's "evaluation time (cpu seconds)" of every pass: the later passes run on code
  the JIT has already compiled.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

HERE = str(Path(__file__).resolve().parent)
sys.path[:] = [p for p in sys.path if p not in (HERE, "")]  # in case it was run without -P


def prequential(arff: str, specs: list[str]) -> dict:
    import jpype
    from capymoa.base import MOAClassifier
    from capymoa.stream import ARFFStream

    models = {}
    for spec in specs:
        name, cls, options = spec.split("=", 2)
        stream = ARFFStream(arff)
        learner = MOAClassifier(jpype.JClass(cls), schema=stream.get_schema(), CLI=options or None)
        rows: list[list[float] | None] = []
        missing = 0
        spent = 0.0
        clock = time.process_time
        while stream.has_more_instances():
            instance = stream.next_instance()
            start = clock()
            proba = learner.predict_proba(instance)
            learner.train(instance)
            spent += clock() - start
            if proba is None or not all(math.isfinite(p) for p in proba):
                rows.append(None)
                missing += 1
            else:
                rows.append([float(p) for p in proba])
        models[name] = {
            "proba": rows,
            "n": len(rows),
            "cpu_s": spent,
            "no_prediction": missing,
            "moa": str(learner),
            "options": str(learner.moa_learner.getOptions().getAsCLIString()),
        }
    return {"models": models}


def evaluate(tasks: list[str], passes: int) -> dict:
    import capymoa  # noqa: F401  (starts the JVM with MOA's jar on the class path)
    from moa.tasks import EvaluatePrequential

    out = []
    for text in tasks:
        head, _, options = text.partition(" ")
        if head != "EvaluatePrequential":
            raise ValueError(f"--task: expected an EvaluatePrequential task, got {head!r}")
        seconds = []
        for _ in range(passes):
            task = EvaluatePrequential()
            task.getOptions().setViaCLIString(options)
            task.prepareForUse()
            curve = task.doTask()
            header = str(curve.headerToString()).split(",")
            column = next(i for i, name in enumerate(header) if name.startswith("evaluation time"))
            last = str(curve.entryToString(curve.numEntries() - 1)).split(",")
            seconds.append(float(last[column]))
        out.append({"task": text, "cpu_s": seconds, "measure": header[column]})
    return {"tasks": out}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    pre = sub.add_parser("prequential")
    pre.add_argument("--arff", required=True)
    pre.add_argument("--models", nargs="+", required=True)
    pre.add_argument("--out", required=True)
    ev = sub.add_parser("evaluate")
    ev.add_argument("--task", action="append", required=True)
    ev.add_argument("--passes", type=int, default=2)
    ev.add_argument("--out", required=True)
    args = parser.parse_args()
    if args.command == "prequential":
        result = prequential(args.arff, args.models)
    else:
        if args.passes < 1:
            parser.error(f"--passes must be at least 1, got {args.passes}")
        result = evaluate(args.task, args.passes)
    Path(args.out).write_text(json.dumps(result))


if __name__ == "__main__":
    main()
