"""A snapshot as large as issue 32's (656 MiB) saved and read back, on PostgreSQL and SQLite.

Issue 32: a model's snapshot reached 656 MB and the PostgreSQL-backed service did not start
again (``invalid memory alloc request size 1311898671`` from reading it: a ``bytea``'s text
form is twice its size, past the server's 1 GB limit). Snapshots are now stored in pieces of
at most 16 MiB (``app.storage.base.PIECE_BYTES``) and read back one piece at a time, in
binary on PostgreSQL. This saves ``--mib`` MiB of random bytes as one snapshot through each
engine's store, reads it back, checks the bytes, and records the seconds each took and the
process's peak memory (reading holds the pieces and the joined bytes: about twice the
snapshot, beside the bytes written).

Usage::

    flock /tmp/streamtree-bench.lock .venv/bin/python -m bench.snapshot_size [--mib 656]

Results go to ``bench/results/snapshot_size.{json,md}``. The same script run on a checkout
from before pieces (``git worktree add /tmp/before 63d7575``, then ``PYTHONPATH=/tmp/before``)
fails on PostgreSQL as the issue did.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shlex
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from app.storage import EventStore, Snapshot, StorageError, open_store
from bench.http_load import RESULTS, run_header


def round_trip(store: EventStore, data: bytes) -> dict[str, Any]:
    """Save ``data`` as a snapshot and read it back; seconds, and whether the bytes came back."""
    store.create_model("m", "{}")
    t0 = time.monotonic()
    store.save_snapshot("m", Snapshot(1, data, "{}"), keep=2)
    saved = time.monotonic() - t0
    t0 = time.monotonic()
    try:
        read = getattr(store, "read_snapshot", None)  # before pieces, stores had only snapshots()
        snap = read("m", 1) if read is not None else store.snapshots("m")[0]
    except StorageError as exc:
        return {"save_s": saved, "read_s": None, "equal": False, "error": str(exc)[:200]}
    return {"save_s": saved, "read_s": time.monotonic() - t0, "equal": snap.model_bytes == data, "error": None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mib", type=int, default=656, help="snapshot size in MiB (default 656, the issue's)")
    args = parser.parse_args()
    from tests.pg import start_cluster, stop_cluster

    command = " ".join(
        ["flock /tmp/streamtree-bench.lock .venv/bin/python -m bench.snapshot_size", *map(shlex.quote, sys.argv[1:])]
    )
    load_before = os.getloadavg()
    data = os.urandom(args.mib * 2**20)
    results: dict[str, Any] = {}
    cluster = start_cluster(fsync=True)
    try:
        store = open_store(cluster.create_database())
        results["postgresql"] = round_trip(store, data)
        store.close()
    finally:
        stop_cluster(cluster)
    root = Path(tempfile.mkdtemp(prefix="streamtree-snapshot-"))
    try:
        store = open_store(f"sqlite:///{root}/db.sqlite3")
        results["sqlite"] = round_trip(store, data)
        store.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    out = run_header(load_before) | {"command": command, "mib": args.mib, "results": results, "peak_rss_mib": peak}
    lines = [
        f"# A {args.mib} MiB snapshot saved and read back ({out['date_utc']}, commit {out['commit']}, "
        f"{out['machine']['cpus']} CPUs)",
        "",
        f"Command: `{command}`.",
        "",
        "| engine | save s | read s | bytes equal | error |",
        "|---|---:|---:|---|---|",
    ]
    for engine, r in results.items():
        read = "-" if r["read_s"] is None else f"{r['read_s']:.1f}"
        lines.append(f"| {engine} | {r['save_s']:.1f} | {read} | {r['equal']} | {r['error'] or ''} |")
    lines += [
        "",
        f"Peak memory of the process: {peak:,.0f} MiB (the {args.mib} MiB written, and on reading the "
        "pieces and the joined bytes).",
    ]
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "snapshot_size.json").write_text(json.dumps(out, indent=2) + "\n")
    (RESULTS / "snapshot_size.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
