"""Memory of pending ids (delayed labels), measured with tracemalloc against what they are charged.

Each pending id keeps the features of its ``predict_proba`` request until its label arrives
(:class:`app.pending.PendingIds`), bounded per model by ``pending_max`` ids and
``pending_max_bytes`` bytes, where each id is charged :func:`app.pending.entry_bytes`. This
script builds the features as the service does (the request body parsed by pydantic-core and
validated into :class:`app.schemas.PredictBody`), keeps ``--ids`` of them, and reports the
memory they hold (tracemalloc, after the request objects are gone) beside the charge.

Target (issue 15): 10,000 pending ids of 10 features each under 20 MiB.

Usage::

    flock /tmp/streamtree-bench.lock .venv/bin/python bench/pending_memory.py [--ids 10000]

Results go to ``bench/results/pending_memory.json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import random
import sys
import tracemalloc
from pathlib import Path
from typing import Any

import pydantic_core

from app.pending import PendingIds, entry_bytes
from app.schemas import PredictBody

MiB = 1024 * 1024
OUT = Path(__file__).parent / "results"

#: Feature mixes measured: all numeric; numeric and short nominal strings; long strings.
MIXES: dict[str, tuple[int, int, int]] = {  # (numbers, strings, string length)
    "10 numeric": (10, 0, 0),
    "6 numeric + 4 nominal (8 chars)": (6, 4, 8),
    "10 nominal (64 chars)": (0, 10, 64),
}


def request_body(i: int, numbers: int, strings: int, length: int, rng: random.Random) -> bytes:
    """The JSON body of a prediction with an id, as a client sends it."""
    x: dict[str, Any] = {f"num_{k}": round(rng.gauss(0, 100), 6) for k in range(numbers)}
    x |= {f"nom_{k}": "".join(rng.choice("abcdefghij") for _ in range(length)) for k in range(strings)}
    return json.dumps({"features": x, "id": f"req-{i:08d}"}).encode()


def measure(n: int, numbers: int, strings: int, length: int) -> dict[str, Any]:
    """Memory held by ``n`` pending ids of one feature mix, and what they are charged."""
    rng = random.Random(0)
    bodies = [request_body(i, numbers, strings, length, rng) for i in range(n)]
    gc.collect()
    tracemalloc.start()
    start, _ = tracemalloc.get_traced_memory()
    pending = PendingIds(n, 2**62, 3600.0)
    for raw in bodies:
        body = PredictBody.model_validate(pydantic_core.from_json(raw))
        assert body.features is not None and body.id is not None
        pending.put(body.id, body.features)
        del body
    gc.collect()
    held, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert len(pending) == n
    measured = held - start
    return {
        "ids": n,
        "features": numbers + strings,
        "numbers": numbers,
        "strings": strings,
        "string_length": length,
        "measured_bytes": measured,
        "charged_bytes": pending.bytes,
        "measured_per_id": measured / n,
        "charged_per_id": pending.bytes / n,
        "charged_over_measured": pending.bytes / measured,
        "example_charge": entry_bytes(
            "req-00000000", PredictBody.model_validate(pydantic_core.from_json(bodies[0])).features or {}
        ),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ids", type=int, default=10_000, help="pending ids per measurement")
    args = parser.parse_args(argv)
    rows = {name: measure(args.ids, *mix) for name, mix in MIXES.items()}
    OUT.mkdir(exist_ok=True)
    meta = {"python": sys.version.split()[0], "machine": platform.machine()}
    (OUT / "pending_memory.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n")
    lines = [
        "# Memory of pending ids (`bench/pending_memory.py`)",
        "",
        f"{args.ids:,} pending ids per row, features as the service holds them (body parsed by pydantic-core,"
        " validated into `PredictBody`); measured with tracemalloc once the request objects are gone;"
        " charged = `app.pending.entry_bytes`, what `pending_max_bytes` counts."
        f" Python {meta['python']}, {meta['machine']}.",
        "",
        "| features | measured | per id | charged | per id | charged / measured |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, r in rows.items():
        lines.append(
            f"| {name} | {r['measured_bytes'] / MiB:.2f} MiB | {r['measured_per_id']:,.0f} B "
            f"| {r['charged_bytes'] / MiB:.2f} MiB | {r['charged_per_id']:,.0f} B "
            f"| {r['charged_over_measured']:.2f} |"
        )
    (OUT / "pending_memory.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
