"""What ``streamtree.client`` costs over hand-written httpx requests, against a local service.

Two workloads, each timed through the client and by hand, alternating, several repetitions,
the medians compared:

- learning: ``N`` events through ``RemoteModel.writer(batch_size=1000)``, against the same
  events posted as hand-built batches of 1,000 with httpx (the bodies built in the timed loop
  as a user would: a dict per event, ``orjson.dumps``, an ``Idempotency-Key`` per request, as
  the writer sends). Each run learns into a fresh model, so every run does the same work on
  the service;
- predicting: ``M`` single ``predict_proba_one`` calls, against the same requests posted with
  httpx and their JSON read (``orjson.loads``), on one trained model.

The service runs on this machine (loopback, SQLite), started by the benchmark on a free port.
Targets: the writer at least 80% of the hand-built rate, ``predict_proba_one`` at least 90%.

Usage::

    flock /tmp/streamtree-bench.lock nice -n 0 .venv/bin/python -m bench.client [--quick]

Writes ``bench/results/client.md``.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import orjson

from bench.http_load import free_port, make_stream, run_header, start_server
from streamtree.client import Client

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "client.md"
BATCH = 1000


def timed(fn: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer events and repetitions (a smoke run)")
    args = parser.parse_args()
    n_learn, n_predict, reps = (5_000, 500, 3) if args.quick else (50_000, 4_000, 7)
    xs, ys = make_stream(n_learn, seed=1)
    probes = make_stream(n_predict, seed=2)[0]
    load_before = os.getloadavg()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory() as tmp:
        proc = start_server(Path(tmp) / "data", port)
        try:
            with Client(url) as client, httpx.Client(base_url=url) as raw:
                learn = learning(client, raw, xs, ys, reps)
                predict = predicting(client, raw, xs, ys, probes, reps)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)
    header = run_header(load_before)
    write(header, learn, predict, n_learn, n_predict, reps, args.quick)


def learning(client: Client, raw: httpx.Client, xs: list[dict[str, Any]], ys: list[str], reps: int) -> dict[str, Any]:
    """Events/s learned through the writer and by hand, ``reps`` runs each, alternating."""
    headers = {"Content-Type": "application/json"}
    runs: dict[str, list[float]] = {"client": [], "httpx": []}

    def through_client(name: str) -> None:
        model = client.model(name)
        with model.writer(batch_size=BATCH, flush_seconds=60.0) as w:
            for x, y in zip(xs, ys, strict=True):
                w.learn_one(x, y)
        assert w.learned == len(xs)

    def by_hand(name: str) -> None:
        path = f"/models/{name}/learn"
        for i in range(0, len(xs), BATCH):
            body = orjson.dumps(
                {"events": [{"features": x, "label": y} for x, y in zip(xs[i : i + BATCH], ys[i : i + BATCH])]}
            )
            r = raw.post(path, content=body, headers=headers | {"Idempotency-Key": uuid.uuid4().hex})
            r.raise_for_status()

    for rep in range(reps):
        for kind, fn in (
            (("client", through_client), ("httpx", by_hand))
            if rep % 2 == 0
            else (
                ("httpx", by_hand),
                ("client", through_client),
            )
        ):
            name = f"learn-{kind}-{rep}"
            raw.put(f"/models/{name}", content=b"{}", headers=headers).raise_for_status()
            runs[kind].append(len(xs) / timed(lambda fn=fn, name=name: fn(name)))
            raw.delete(f"/models/{name}").raise_for_status()
    return runs


def predicting(
    client: Client,
    raw: httpx.Client,
    xs: list[dict[str, Any]],
    ys: list[str],
    probes: list[dict[str, Any]],
    reps: int,
) -> dict[str, Any]:
    """Single predictions/s through ``predict_proba_one`` and by hand, ``reps`` runs each, alternating."""
    name = "predict"
    model = client.model(name)
    model.create()
    model.learn_many(xs[:10_000], ys[:10_000])
    path = f"/models/{name}/predict_proba"
    headers = {"Content-Type": "application/json"}
    runs: dict[str, list[float]] = {"client": [], "httpx": []}

    def through_client() -> None:
        for x in probes:
            model.predict_proba_one(x)

    def by_hand() -> None:
        for x in probes:
            r = raw.post(path, content=orjson.dumps({"features": x}), headers=headers)
            r.raise_for_status()
            orjson.loads(r.content)["probabilities"]

    assert {str(k): p for k, p in model.predict_proba_one(probes[0]).items()} == orjson.loads(
        raw.post(path, content=orjson.dumps({"features": probes[0]}), headers=headers).content
    )["probabilities"]
    for rep in range(reps):
        order = (("client", through_client), ("httpx", by_hand))
        for kind, fn in order if rep % 2 == 0 else order[::-1]:
            runs[kind].append(len(probes) / timed(fn))
    return runs


def write(
    header: dict[str, Any],
    learn: dict[str, list[float]],
    predict: dict[str, list[float]],
    n_learn: int,
    n_predict: int,
    reps: int,
    quick: bool,
) -> None:
    rows = []
    verdicts = []
    for what, runs, unit, target in (
        ("learn: `writer(batch_size=1000)` vs hand-built batches", learn, "events/s", 0.80),
        ("predict: `predict_proba_one` vs a raw httpx request", predict, "calls/s", 0.90),
    ):
        c, h = statistics.median(runs["client"]), statistics.median(runs["httpx"])
        ratio = c / h
        rows.append(
            f"| {what} | {c:,.0f} | {h:,.0f} | {unit} | {ratio:.2f} | {target:.2f} | {'yes' if ratio >= target else 'no'} |"
        )
        verdicts.append(
            f"- {what.split(':')[0]}, every run ({unit}): client "
            + ", ".join(f"{r:,.0f}" for r in runs["client"])
            + "; httpx "
            + ", ".join(f"{r:,.0f}" for r in runs["httpx"])
        )
    m = header["machine"]
    text = "\n".join(
        [
            f"# The Python client's overhead ({header['date_utc']}, commit {header['commit']})",
            "",
            "Command: `flock /tmp/streamtree-bench.lock nice -n 0 .venv/bin/python -m bench.client"
            + (" --quick" if quick else "")
            + "` (`bench/client.py`).",
            "",
            f"Machine: {m['cpus']} CPUs, Python {m['python']}, {m['platform']}; load average "
            f"{m['loadavg_before'][0]:.2f} before, {m['loadavg_after'][0]:.2f} after. The service (SQLite, "
            "default settings) and the client share the machine over loopback.",
            "",
            f"{n_learn:,} events learned per run into a fresh model; {n_predict:,} single predictions per run "
            f"on a model trained on 10,000 events. {reps} runs of each way, alternating which goes first; "
            "medians compared.",
            "",
            "| workload | client | httpx by hand | unit | client / httpx | target | met |",
            "|---|---:|---:|---|---:|---:|---|",
            *rows,
            "",
            *verdicts,
            "",
        ]
    )
    RESULTS.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
