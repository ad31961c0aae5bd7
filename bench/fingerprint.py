"""The models' bits on nine streams: a refactor that must not change a model checks it here.

For each stream, a default :class:`~streamtree.ProbabilityTree` learns the first ``--n``
examples one at a time, predicting each before learning it, and a default
:class:`~streamtree.ProbabilityForest` learns them in batches of 500 with the probabilities
it gave before learning each batch. The fingerprint of a model is the SHA-256 of every
probability (``float.hex``, with the classes in the model's order) and of its saved bytes (``to_bytes``). The
table goes to ``bench/results/fingerprint.md``; ``--check`` compares a run with that file
and exits 1 on any difference.

    python -m bench.fingerprint            # write bench/results/fingerprint.md
    python -m bench.fingerprint --check    # compare with it
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path
from typing import Any

from bench.streams import STREAMS
from streamtree import ProbabilityForest, ProbabilityTree

NAMES = ["Phishing", "Bananas", "ImageSegments", "Shuttle", "SEA", "Agrawal", "RandomRBF", "LED", "STAGGER-drift"]
OUT = Path(__file__).parent / "results" / "fingerprint.md"
BATCH = 500


def _hash_proba(digest: Any, proba: dict[Any, float]) -> None:
    digest.update(";".join(f"{k!r}={float(v).hex()}" for k, v in proba.items()).encode() + b"\n")


def tree_print(data: list[tuple[dict, object]]) -> tuple[str, str]:
    model = ProbabilityTree()
    digest = hashlib.sha256()
    for x, y in data:
        _hash_proba(digest, model.predict_proba_one(x))
        model.learn_one(x, y)
    return digest.hexdigest()[:16], hashlib.sha256(model.to_bytes()).hexdigest()[:16]


def forest_print(data: list[tuple[dict, object]]) -> tuple[str, str]:
    model = ProbabilityForest()
    digest = hashlib.sha256()
    for start in range(0, len(data), BATCH):
        xs = [x for x, _ in data[start : start + BATCH]]
        ys = [y for _, y in data[start : start + BATCH]]
        digest.update(model.learn_many(xs, ys, return_proba=True).tobytes())
        digest.update(repr(list(model.classes_)).encode())
    return digest.hexdigest()[:16], hashlib.sha256(model.to_bytes()).hexdigest()[:16]


def table(n: int) -> str:
    rows = [
        f"# Fingerprint of the models' bits (`bench/fingerprint.py`, first {n:,} examples)",
        "",
        "| stream | tree: probabilities | tree: bytes | forest: probabilities | forest: bytes |",
        "|---|---|---|---|---|",
    ]
    for name in NAMES:
        data = STREAMS[name].take(n)
        rows.append(f"| {name} | {' | '.join(tree_print(data))} | {' | '.join(forest_print(data))} |")
    return "\n".join(rows) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=20_000, help="examples per stream")
    parser.add_argument("--check", action="store_true", help=f"compare with {OUT} instead of writing it")
    args = parser.parse_args(argv)
    got = table(args.n)
    if args.check:
        if got != OUT.read_text():
            sys.stdout.write(got)
            sys.exit(f"the models' bits differ from {OUT}")
        print(f"the same bits as {OUT}")
        return
    OUT.write_text(got)
    sys.stdout.write(got)


if __name__ == "__main__":
    main()
