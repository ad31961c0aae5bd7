"""Durable learning on SQLite against PostgreSQL: the same workloads on each engine, in one run.

For each engine: ``streamtree serve`` of this checkout on loopback (``--data-dir`` for SQLite,
``--database-url`` for PostgreSQL, both with ``sync=full``: the log is on disk before each
answer), driven by ``bench/http_load.py``'s keep-alive client with batched learns (1,000 events
a request, 1 and 4 clients) and single-event learns (1 and 8 clients), plus the store alone:
one-event appends per second (one commit each), which bounds single learns from one client.

Without ``--database-url`` a throwaway PostgreSQL cluster is started from the server
binaries (``tests/pg.py``) with ``fsync=on``, in a temporary directory on the same disk as
SQLite's.

Usage::

    flock /tmp/streamtree-bench.lock .venv/bin/python -m bench.storage_engines [--database-url URL] [--quick]

Results go to ``bench/results/storage_engines.{json,md}``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench.http_load import RESULTS, Result, free_port, make_stream, run_header, run_load, start_server

ONE_EVENT = '{"x": {"a": 1.0}, "y": "p"}'


def append_rate(target: str | Path, n: int) -> float:
    """One-event appends (one commit each) per second on a fresh model of the store at ``target``."""
    from app.storage import open_store

    store = open_store(target, sync="full")
    name = f"bench-{time.monotonic_ns()}"
    store.create_model(name, "{}")
    t0 = time.perf_counter()
    for i in range(n):
        store.append(name, i + 1, [ONE_EVENT])
    seconds = time.perf_counter() - t0
    store.delete_model(name)
    store.close()
    return n / seconds


async def learn_workloads(
    port: int, xs: list[dict[str, Any]], ys: list[str], n_batched: int, n_single: int
) -> list[Result]:
    dumps = json.dumps
    batches = [
        dumps(
            {"events": [{"features": x, "label": y} for x, y in zip(xs[i : i + 1000], ys[i : i + 1000], strict=True)]}
        ).encode()
        for i in range(0, 3 * n_batched, 1000)
    ]
    single = [
        dumps({"features": x, "label": y}).encode()
        for x, y in zip(xs[3 * n_batched :], ys[3 * n_batched :], strict=True)
    ]
    one = n_batched // 1000
    return [
        await run_load("127.0.0.1", port, "learn batched", "/learn", batches[:one], 1, 1000),
        # the batched workload: 4 clients, so one request's commit overlaps another's parse
        await run_load("127.0.0.1", port, "learn batched", "/learn", batches[one:], 4, 1000),
        await run_load("127.0.0.1", port, "learn single", "/learn", single[:n_single], 1, 1),
        await run_load("127.0.0.1", port, "learn single", "/learn", single[n_single : 3 * n_single], 8, 1),
    ]


def run_engine(
    database_url: str | None, xs: list[dict[str, Any]], ys: list[str], n_batched: int, n_single: int, n_appends: int
) -> dict[str, Any]:
    """The service's learn workloads, then the store's append rate, on one engine."""
    data_dir = Path(tempfile.mkdtemp(prefix="streamtree-bench-"))
    port = free_port()
    server = start_server(data_dir, port, database_url)
    try:
        results = asyncio.run(learn_workloads(port, xs, ys, n_batched, n_single))
    finally:
        server.terminate()
        server.wait(timeout=60)
    try:
        appends = append_rate(database_url or data_dir / "appends", n_appends)
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
    return {"results": [asdict(r) for r in results], "appends_per_s": appends}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--database-url", help="A PostgreSQL database to use (default: a throwaway cluster).")
    parser.add_argument("--quick", action="store_true", help="Small run (a smoke test, not for results).")
    parser.add_argument("--out", type=Path, default=RESULTS / "storage_engines", help="Output path without suffix.")
    args = parser.parse_args()
    n_batched, n_single, n_appends = (2_000, 200, 100) if args.quick else (10_000, 1_500, 500)
    xs, ys = make_stream(3 * n_batched + 3 * n_single + 10, seed=0)

    cluster = None
    url = args.database_url
    if url is None:
        from tests.pg import start_cluster

        cluster = start_cluster(fsync=True)
        url = cluster.create_database()
    load_before = os.getloadavg()
    try:
        engines = {
            "sqlite": run_engine(None, xs, ys, n_batched, n_single, n_appends),
            "postgresql": run_engine(url, xs, ys, n_batched, n_single, n_appends),
        }
    finally:
        if cluster is not None:
            from tests.pg import stop_cluster

            stop_cluster(cluster)

    report = {
        "benchmark": "bench/storage_engines.py",
        **run_header(load_before),
        "quick": args.quick,
        "postgresql": "given URL" if args.database_url else "throwaway local cluster, fsync=on, same disk",
        "notes": "Both engines with sync=full (SQLite WAL synchronous=FULL; PostgreSQL synchronous_commit=on). "
        "Client, server and PostgreSQL share the machine's cores over loopback.",
        "engines": engines,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(report, indent=2) + "\n")
    md = [
        f"# Durable learning: SQLite against PostgreSQL ({report['date_utc']}, commit {report['commit']}, "
        f"{os.cpu_count()} CPUs, load average {load_before[0]:.2f} before, {os.getloadavg()[0]:.2f} after)",
        "",
        f"PostgreSQL: {report['postgresql']}. {report['notes']}",
        "",
        "| workload | clients | requests | SQLite events/s | PostgreSQL events/s | SQLite p50 ms | "
        "PostgreSQL p50 ms | SQLite p99 ms | PostgreSQL p99 ms |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for s, p in zip(engines["sqlite"]["results"], engines["postgresql"]["results"], strict=True):
        md.append(
            f"| {s['name']} | {s['clients']} | {s['requests']} | {s['items_per_s']:,.0f} | "
            f"{p['items_per_s']:,.0f} | {s['p50_ms']:.2f} | {p['p50_ms']:.2f} | {s['p99_ms']:.2f} | "
            f"{p['p99_ms']:.2f} |"
        )
    md.append(
        f"| store alone: one-event appends | 1 | {n_appends} | {engines['sqlite']['appends_per_s']:,.0f} | "
        f"{engines['postgresql']['appends_per_s']:,.0f} | | | | |"
    )
    errors = {e: sum(r["errors"] for r in v["results"]) for e, v in engines.items()}
    md += ["", f"Non-200 answers: {errors}."]
    args.out.with_suffix(".md").write_text("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
