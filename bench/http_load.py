"""HTTP load benchmark of the streamtree service, beside the in-process rate of the same model.

Starts ``streamtree serve`` (the console script) on loopback with a fresh data directory, then
measures, with a minimal keep-alive HTTP/1.1 client on asyncio (so the client costs little of
the machine's CPU):

* single-event ``learn`` (durable: the response is sent after the fsync) and single
  ``predict_proba`` requests with 1 and 8 concurrent clients: requests/s, p50 and p99 latency;
* batched throughput, 1,000 events or instances per request (1 and 8 clients);
* in the same run, in-process rates of the same model config on the same events:
  ``predict_proba_one``, ``learn_one``, test-then-train (``predict_proba_one`` + ``learn_one``),
  ``learn_many(..., return_proba=True)`` per 1,000 events and per event (what the service
  calls for a request, scoring each event for its prequential metrics), ``learn_many`` and
  ``predict_proba``.

Usage::

    flock /tmp/streamtree-bench.lock .venv/bin/python -m bench.http_load [--quick]

Each workload reports the median of ``--rounds`` (5) independent runs, each on a fresh server:
on this shared machine one run now and then comes out a third slower or faster.

Results go to ``bench/results/http_load.json`` and ``.md`` (the table in docs/service.md).
The client runs on the same machine as the server; with 2 cores, the rates are lower bounds
of what the server would do with a client elsewhere.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.http_baseline import in_process

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"

TARGETS = {
    "predict_p50_ms_1_client": 2.0,
    "predict_p50_ms_8_clients": 5.0,
    "predict_single_8_rps": 1500.0,
    "learn_single_8_rps": 1500.0,
    "predict_batched_per_s": 50_000.0,
    "learn_batched_per_s": 50_000.0,
}


# --------------------------------------------------------------------------- data
def make_stream(n: int, seed: int = 0) -> tuple[list[dict[str, Any]], list[str]]:
    """A deterministic stream: 6 numeric and 4 nominal features, 3 classes, 5% label noise."""
    rng = random.Random(seed)
    xs, ys = [], []
    for _ in range(n):
        x: dict[str, Any] = {f"n{j}": round(rng.gauss(0.0, 1.0), 6) for j in range(6)}
        for j in range(4):
            x[f"c{j}"] = rng.choice(["a", "b", "c", "d"])
        score = x["n0"] + 0.5 * x["n1"] - 0.8 * (x["c0"] == "a") + 0.3 * x["n2"] * (x["c1"] == "b")
        y = "low" if score < -0.5 else ("mid" if score < 0.7 else "high")
        if rng.random() < 0.05:
            y = rng.choice(["low", "mid", "high"])
        xs.append(x)
        ys.append(y)
    return xs, ys


# --------------------------------------------------------------------------- client
class Connection:
    """One keep-alive HTTP/1.1 connection; requests are sent one at a time."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, host: str) -> None:
        self.reader, self.writer, self.host = reader, writer, host

    @classmethod
    async def open(cls, host: str, port: int) -> Connection:
        reader, writer = await asyncio.open_connection(host, port)
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return cls(reader, writer, host)

    async def post(self, path: str, body: bytes) -> tuple[int, bytes]:
        head = (
            f"POST {path} HTTP/1.1\r\nHost: {self.host}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode()
        self.writer.write(head + body)
        raw = await self.reader.readuntil(b"\r\n\r\n")
        lines = raw.split(b"\r\n")
        status = int(lines[0].split()[1])
        length = 0
        for line in lines[1:]:
            if line[:15].lower() == b"content-length:":
                length = int(line[15:])
        return status, await self.reader.readexactly(length)

    def close(self) -> None:
        self.writer.close()


@dataclass
class Result:
    """One measured workload."""

    name: str
    clients: int
    requests: int
    items_per_request: int
    seconds: float
    requests_per_s: float
    items_per_s: float
    p50_ms: float
    p99_ms: float
    errors: int
    server_cores: float | None = None  # the server process's CPU seconds per second of the workload
    client_cores: float | None = None  # this (the clients') process's


def cpu_seconds(pid: int) -> float:
    """A process's CPU seconds so far (user + system, every thread)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def run_load(
    host: str,
    port: int,
    name: str,
    path: str,
    bodies: list[bytes],
    clients: int,
    items_per_request: int,
    server_pid: int | None = None,
) -> Result:
    """Send ``bodies`` split over ``clients`` connections, each sequentially; time every request
    (and, given the server's pid, the CPU the server and the clients used meanwhile)."""
    conns = [await Connection.open(host, port) for _ in range(clients)]
    latencies: list[float] = []
    errors = 0

    async def worker(c: int) -> None:
        nonlocal errors
        conn = conns[c]
        for body in bodies[c::clients]:
            t0 = time.perf_counter()
            status, _ = await conn.post(path, body)
            latencies.append(time.perf_counter() - t0)
            if status != 200:
                errors += 1

    server_cpu = cpu_seconds(server_pid) if server_pid is not None else 0.0
    client_cpu = time.process_time()
    start = time.perf_counter()
    await asyncio.gather(*(worker(c) for c in range(clients)))
    seconds = time.perf_counter() - start
    client_cpu = time.process_time() - client_cpu
    if server_pid is not None:
        server_cpu = cpu_seconds(server_pid) - server_cpu
    for conn in conns:
        conn.close()
    latencies.sort()
    n = len(latencies)
    return Result(
        name,
        clients,
        n,
        items_per_request,
        seconds,
        n / seconds,
        n * items_per_request / seconds,
        1e3 * statistics.median(latencies),
        1e3 * latencies[min(n - 1, int(0.99 * n))],
        errors,
        server_cpu / seconds if server_pid is not None else None,
        client_cpu / seconds,
    )


# --------------------------------------------------------------------------- server
def run_header(load_before: tuple[float, float, float]) -> dict[str, Any]:
    """When, on which commit and on what machine a run was made (with the load average before
    it and now), the fields every service benchmark's JSON starts with."""
    return {
        "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "commit": subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT
        ).stdout.strip(),
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
            "loadavg_before": load_before,
            "loadavg_after": os.getloadavg(),
        },
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(
    data_dir: Path, port: int, database_url: str | None = None, settings: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """``streamtree serve`` of this checkout on loopback (``database_url``: PostgreSQL instead of
    SQLite; ``settings``: more ``STREAMTREE_<NAME>`` variables, by lower-case name)."""
    exe = Path(sys.executable).parent / "streamtree"
    store = ["--database-url", database_url] if database_url else []
    env = os.environ | {"PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    env |= {f"STREAMTREE_{k.upper()}": v for k, v in (settings or {}).items()}
    proc = subprocess.Popen(
        [
            str(exe),
            "serve",
            "--data-dir",
            str(data_dir),
            *store,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--log-level",
            "warning",
        ],
        env=env,
    )
    # the first start on a machine compiles the kernels (minutes): the port opens once they are in
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited with status {proc.returncode} before it was healthy")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1) as r:
                if r.status == 200:
                    return proc
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("server did not become healthy")


# --------------------------------------------------------------------------- main
async def http_workloads(
    host: str,
    port: int,
    xs: list[dict[str, Any]],
    ys: list[str],
    warm: int,
    probe: list[dict[str, Any]],
    n_single: int,
    n_batches: int,
    server_pid: int | None = None,
) -> list[Result]:
    dumps = json.dumps
    results: list[Result] = []

    async def load(*args: Any) -> Result:
        return await run_load(*args, server_pid=server_pid)

    # Batched learning: the first `warm` events, 1,000 per request (1 client, then 8).
    half = warm // 2
    batches = [
        dumps(
            {"events": [{"features": x, "label": y} for x, y in zip(xs[i : i + 1000], ys[i : i + 1000], strict=True)]}
        ).encode()
        for i in range(0, warm, 1000)
    ]
    results.append(await load(host, port, "learn batched", "/learn", batches[: half // 1000], 1, 1000))
    results.append(await load(host, port, "learn batched", "/learn", batches[half // 1000 :], 8, 1000))
    # Single-event learning: the next events, one per request.
    single = [dumps({"features": x, "label": y}).encode() for x, y in zip(xs[warm:], ys[warm:], strict=True)]
    results.append(await load(host, port, "learn single", "/learn", single[: n_single // 2], 1, 1))
    results.append(await load(host, port, "learn single", "/learn", single[n_single // 2 : n_single * 2], 8, 1))
    # Predictions.
    preds = [dumps({"features": x}).encode() for x in probe]
    results.append(await load(host, port, "predict single", "/predict_proba", preds[: n_single // 2], 1, 1))
    results.append(await load(host, port, "predict single", "/predict_proba", preds[: n_single * 2], 8, 1))
    pbatches = [dumps({"instances": probe[i : i + 1000]}).encode() for i in range(0, len(probe), 1000)]
    pb = (pbatches * (n_batches // len(pbatches) + 1))[:n_batches]
    results.append(await load(host, port, "predict batched", "/predict_proba", pb, 1, 1000))
    results.append(await load(host, port, "predict batched", "/predict_proba", pb, 8, 1000))
    return results


def _cores(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}"


def table(results: list[Result], baseline: dict[str, float]) -> str:
    base_for = {
        "learn single": "learn_scored_1_single_phase_per_s",
        "learn batched": "learn_scored_1000_batch_phase_per_s",
        "predict single": "predict_proba_one_per_s",
        "predict batched": "predict_proba_1000_per_s",
    }
    rows = [
        "| workload | clients | requests | items/s | requests/s | p50 ms | p99 ms | in-process items/s "
        "| HTTP / in-process | server CPU (cores) | clients' CPU (cores) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        b = baseline[base_for[r.name]]
        rows.append(
            f"| {r.name} | {r.clients} | {r.requests} | {r.items_per_s:,.0f} | {r.requests_per_s:,.0f} | "
            f"{r.p50_ms:.2f} | {r.p99_ms:.2f} | {b:,.0f} | {r.items_per_s / b:.2f} | "
            f"{_cores(r.server_cores)} | {_cores(r.client_cores)} |"
        )
    return "\n".join(rows)


def verdicts(results: list[Result]) -> dict[str, dict[str, float | bool]]:
    def get(name: str, clients: int) -> Result:
        return next(r for r in results if r.name == name and r.clients == clients)

    measured = {
        "predict_p50_ms_1_client": get("predict single", 1).p50_ms,
        "predict_p50_ms_8_clients": get("predict single", 8).p50_ms,
        "predict_single_8_rps": get("predict single", 8).requests_per_s,
        "learn_single_8_rps": get("learn single", 8).requests_per_s,
        "predict_batched_per_s": max(get("predict batched", c).items_per_s for c in (1, 8)),
        "learn_batched_per_s": max(get("learn batched", c).items_per_s for c in (1, 8)),
    }
    return {
        k: {"measured": v, "target": TARGETS[k], "met": v <= TARGETS[k] if "_p50_ms" in k else v >= TARGETS[k]}
        for k, v in measured.items()
    }


def serve_and_load(
    xs: list[dict[str, Any]], ys: list[str], warm: int, probe: list[dict[str, Any]], n_single: int, n_batches: int
) -> list[Result]:
    """One run: a fresh server on a fresh data directory, every workload, the server stopped."""
    data_dir = Path(tempfile.mkdtemp(prefix="streamtree-bench-"))
    port = free_port()
    server = start_server(data_dir, port)
    try:
        return asyncio.run(http_workloads("127.0.0.1", port, xs, ys, warm, probe, n_single, n_batches, server.pid))
    finally:
        server.terminate()
        server.wait(timeout=60)
        shutil.rmtree(data_dir, ignore_errors=True)


def median_run(runs: list[Result]) -> Result:
    """Of one workload's runs, the one with the median rate (the lower middle of an even number):
    this shared machine slows a run now and then by a third, in either direction of the target."""
    return sorted(runs, key=lambda r: r.items_per_s)[(len(runs) - 1) // 2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="Small run (a smoke test, not for results).")
    parser.add_argument("--out", type=Path, default=RESULTS / "http_load", help="Output path without suffix.")
    parser.add_argument(
        "--rounds",
        type=int,
        default=5,
        help="Independent runs (a fresh server each); each workload reports its median run.",
    )
    args = parser.parse_args()
    warm, n_single, n_batches = (4_000, 600, 8) if args.quick else (20_000, 4_000, 40)

    xs, ys = make_stream(warm + 2 * n_single + 10, seed=0)
    probe, _ = make_stream(5_000, seed=1)
    load_before = os.getloadavg()
    rounds = [serve_and_load(xs, ys, warm, probe, n_single, n_batches) for _ in range(args.rounds)]
    results = [median_run([run[i] for run in rounds]) for i in range(len(rounds[0]))]
    baseline = in_process(xs, ys, warm, probe, n_single, n_batches)

    report = {
        "benchmark": "bench/http_load.py",
        **run_header(load_before),
        "quick": args.quick,
        "notes": "Client and server share the machine (loopback). learn = durable (SQLite WAL, synchronous=FULL, "
        "response after commit) and scored prequentially: each request (or group of concurrent single "
        "requests) is one learn_many(..., return_proba=True) call, so its in-process baseline is that call "
        "on the same events from the same state, per 1,000 events or per event. "
        "With 8 clients on one event loop, p50 latency is queueing: about 8 / requests per second.",
        "rounds": args.rounds,
        "results": [asdict(r) for r in results],
        "items_per_s_by_round": [[r.items_per_s for r in run] for run in rounds],
        "in_process": baseline,
        "targets": verdicts(results),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(report, indent=2) + "\n")
    md = [
        f"# HTTP load ({report['date_utc']}, commit {report['commit']}, {os.cpu_count()} CPUs, "
        f"load average {load_before[0]:.2f} before, {os.getloadavg()[0]:.2f} after)",
        "",
        f"Each workload: the median of {args.rounds} runs, each on a fresh server (items/s of every run in the "
        "JSON file).",
        "",
        table(results, baseline),
        "",
        "| in-process (same model, same events) | per s |",
        "|---|---:|",
    ]
    md += [f"| {k} | {v:,.0f} |" for k, v in baseline.items()]
    md += ["", "| target | measured | goal | met |", "|---|---:|---:|---|"]
    md += [
        f"| {k} | {v['measured']:,.2f} | {v['target']:,.0f} | {'yes' if v['met'] else 'no'} |"
        for k, v in report["targets"].items()
    ]
    args.out.with_suffix(".md").write_text("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
