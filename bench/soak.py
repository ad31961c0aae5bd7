"""Soak test of the service (outside CI): mixed traffic from 16 clients for a long time.

Starts ``streamtree serve`` (this checkout's code) on loopback with a fresh data directory,
an API key and open reads, then runs ``--clients`` threads for ``--duration`` seconds, each
with its own keep-alive connection, drawing every request from a fixed mix:

* authenticated: single learns, batches of 50, predictions with an id followed later by the
  id's label (sometimes in a batch), batch predictions, model reads (metrics, history, tree);
* anonymous (reads are open): predictions, predictions with ids that are never labelled (a
  flood of pending ids), refused writes;
* hostile, from both: lone surrogates, integers beyond 64 bits in events and configs, a
  batch naming one id twice, predicting again with a pending id, unknown ids.

It reports the count of 5xx and of non-JSON answers, p50/p99 latency (all requests and by
kind), the server's RSS sampled every ``--sample`` seconds beside the model's own arrays
(``memory_bytes`` of its summary), and whether any acknowledged event was lost: the
acknowledged counts must add up to the model's ``seq``, and again after a SIGTERM and a
restart. Targets (issue 15): no 5xx or non-JSON answer, no acknowledged event lost, RSS within
10% over the last 80% of the run.

The model is bounded as a production deployment bounds it (``--max-nodes``, default 2,000):
unbounded, a noisy stream's tree grows for as long as events come, and its memory with it,
which is the model's size and not a leak. Both figures are reported, so growth that is not the
model's shows on its own.

Usage::

    flock /tmp/streamtree-bench.lock .venv/bin/python bench/soak.py [--duration 600] [--clients 16]

Results go to ``bench/results/soak.json`` and ``.md`` (``--out`` elsewhere, e.g. for a short
smoke run).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import platform
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUT = Path(__file__).parent / "results"
KEY = "soak-key-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {KEY}"}
MODEL = "default"

Request = tuple[str, str, str, dict[str, str]]  # method, path, body, extra headers


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(data_dir: Path, port: int) -> subprocess.Popen[bytes]:
    """``streamtree serve`` on this checkout's code; returns once ``/health`` answers."""
    exe = Path(sys.executable).parent / "streamtree"
    env = os.environ | {"PYTHONPATH": str(ROOT), "STREAMTREE_API_KEYS": KEY}
    proc = subprocess.Popen([str(exe), "serve", "--data-dir", str(data_dir), "--host", "127.0.0.1",
                             "--port", str(port), "--log-level", "warning"], env=env)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("the server exited during start")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", "/health")
            if conn.getresponse().status == 200:
                return proc
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("the server did not become healthy")


def rss_bytes(pid: int) -> int:
    """Resident set size of a process (Linux)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def features(rng: random.Random) -> dict[str, Any]:
    """One event's features: 3 numeric, 2 nominal, as the tests' stream."""
    return {"a": round(rng.gauss(0, 1), 6), "b": round(rng.uniform(-2, 2), 6), "c": rng.randint(0, 9),
            "colour": rng.choice(["red", "green", "blue"]), "flag": rng.random() < 0.5}


def label(x: dict[str, Any], rng: random.Random) -> str:
    s = x["a"] + 0.5 * x["b"] - 0.7 * (x["colour"] == "red")
    y = "low" if s < -0.4 else ("mid" if s < 0.6 else "high")
    return rng.choice(["low", "mid", "high"]) if rng.random() < 0.05 else y


class Client(threading.Thread):
    """One client: a keep-alive connection and a stream of requests drawn from the mix."""

    def __init__(self, port: int, cid: int, until: float) -> None:
        super().__init__(daemon=True)
        self.port, self.cid, self.until = port, cid, until
        self.rng = random.Random(cid)
        self.latencies: dict[str, list[float]] = defaultdict(list)
        self.statuses: Counter[tuple[str, int]] = Counter()
        self.server_errors: list[str] = []
        self.not_json: list[str] = []
        self.acked = 0  # events acknowledged as learned
        self.pending: list[tuple[str, dict[str, Any]]] = []
        self.n = 0
        self.mix: list[tuple[float, Callable[[], tuple[str, Request]]]] = [
            (20, self.learn_one), (5, self.learn_batch), (25, self.predict), (5, self.predict_batch),
            (10, self.predict_with_id), (8, self.label_pending), (4, self.read_model),
            (10, self.anonymous_flood), (3, self.anonymous_write), (10, self.hostile),
        ]

    def next_id(self) -> str:
        self.n += 1
        return f"c{self.cid}-{self.n}"

    # ---------------------------------------------------------------- the mix
    def learn_one(self) -> tuple[str, Request]:
        x = features(self.rng)
        return "learn", ("POST", "/learn", json.dumps({"features": x, "label": label(x, self.rng)}), AUTH)

    def learn_batch(self) -> tuple[str, Request]:
        xs = [features(self.rng) for _ in range(50)]
        body = {"events": [{"features": x, "label": label(x, self.rng)} for x in xs]}
        return "learn_batch", ("POST", "/learn", json.dumps(body), AUTH)

    def predict(self) -> tuple[str, Request]:
        return "predict", ("POST", "/predict_proba", json.dumps({"features": features(self.rng)}), AUTH)

    def predict_batch(self) -> tuple[str, Request]:
        body = {"instances": [features(self.rng) for _ in range(100)]}
        return "predict_batch", ("POST", "/predict_proba", json.dumps(body), {})

    def predict_with_id(self) -> tuple[str, Request]:
        x, key = features(self.rng), self.next_id()
        self.pending.append((key, x))
        return "predict_id", ("POST", "/predict_proba", json.dumps({"features": x, "id": key}), AUTH)

    def label_pending(self) -> tuple[str, Request]:
        if not self.pending:
            return self.learn_one()
        take, self.pending = self.pending[:3], self.pending[3:]
        body = {"events": [{"id": key, "label": label(x, self.rng)} for key, x in take]}
        return "label", ("POST", "/learn", json.dumps(body), AUTH)

    def read_model(self) -> tuple[str, Request]:
        path = self.rng.choice([f"/models/{MODEL}/metrics", f"/models/{MODEL}/metrics/history", f"/models/{MODEL}",
                                f"/models/{MODEL}/tree", "/models"])
        return "read", ("GET", path, "", {})

    def anonymous_flood(self) -> tuple[str, Request]:
        body = {"features": features(self.rng), "id": f"anon-{self.cid}-{self.next_id()}"}
        return "anon_predict_id", ("POST", "/predict_proba", json.dumps(body), {})

    def anonymous_write(self) -> tuple[str, Request]:
        x = features(self.rng)
        return "anon_learn", ("POST", "/learn", json.dumps({"features": x, "label": "low"}), {})

    def hostile(self) -> tuple[str, Request]:
        x = features(self.rng)
        kind = self.rng.randrange(6)
        if kind == 0:
            body = '{"features": {"a\\ud800": 1}, "label": "low"}'
        elif kind == 1:
            body = '{"features": {"a": %d}, "label": "low"}' % 2**70
        elif kind == 2:
            return "hostile", ("PUT", f"/models/soak-{self.cid}", '{"grace_period": %d}' % 2**70, AUTH)
        elif kind == 3:
            key = self.next_id()
            body = json.dumps({"events": [{"id": key, "label": "low"}, {"id": key, "label": "mid"}]})
        elif kind == 4 and self.pending:  # predict again with a pending id: 409
            key, _ = self.pending[0]
            return "hostile", ("POST", "/predict_proba", json.dumps({"features": x, "id": key}), AUTH)
        else:
            body = json.dumps({"id": f"never-{self.next_id()}", "label": "low"})
        return "hostile", ("POST", "/learn", body, AUTH)

    # ---------------------------------------------------------------- the loop
    def run(self) -> None:
        weights = [w for w, _ in self.mix]
        makers = [m for _, m in self.mix]
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        while time.monotonic() < self.until:
            kind, (method, path, body, headers) = self.rng.choices(makers, weights)[0]()
            start = time.perf_counter()
            try:
                conn.request(method, path, body=body.encode() if body else None,
                             headers={"Content-Type": "application/json"} | headers)
                r = conn.getresponse()
                data = r.read()
            except (OSError, http.client.HTTPException) as exc:  # a dropped connection counts as a server error
                self.server_errors.append(f"{kind} {method} {path}: {exc!r}")
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
                continue
            self.latencies[kind].append(time.perf_counter() - start)
            self.statuses[(kind, r.status)] += 1
            if r.status >= 500:
                self.server_errors.append(f"{kind} {method} {path}: {r.status} {data[:200]!r}")
            content_type = r.getheader("content-type", "")
            is_prometheus = path == "/metrics"
            if r.status != 204 and not is_prometheus:
                try:
                    answer = json.loads(data)
                    assert content_type.startswith("application/json")
                except (ValueError, AssertionError):
                    self.not_json.append(f"{kind} {method} {path}: {r.status} {content_type}")
                    continue
                if kind in ("learn", "learn_batch", "label") and r.status == 200:
                    self.acked += answer["learned"]
        conn.close()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def call(port: int, method: str, path: str, body: str | None = None) -> tuple[int, Any]:
    """One authenticated request on a new connection: status and decoded JSON (or None)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request(method, path, body=body, headers=AUTH | {"Content-Type": "application/json"})
    response = conn.getresponse()
    raw = response.read()
    conn.close()
    return response.status, (json.loads(raw) if raw else None)


def model_info(port: int) -> dict[str, Any]:
    status, info = call(port, "GET", f"/models/{MODEL}")
    if status != 200:
        raise RuntimeError(f"GET /models/{MODEL} answered {status}")
    return dict(info)


def bound_model(port: int, max_nodes: int) -> None:
    """Replace the (empty) default model by one whose growth stops at ``max_nodes`` nodes."""
    if call(port, "DELETE", f"/models/{MODEL}")[0] != 204:
        raise RuntimeError("could not delete the default model")
    if call(port, "PUT", f"/models/{MODEL}", json.dumps({"max_nodes": max_nodes}))[0] != 201:
        raise RuntimeError("could not create the bounded default model")


def soak(duration: float, clients: int, sample: float, max_nodes: int) -> dict[str, Any]:
    """Run the soak; return its figures."""
    data_dir = Path(tempfile.mkdtemp(prefix="streamtree-soak-")) / "data"
    port = free_port()
    proc = start_server(data_dir, port)
    try:
        bound_model(port, max_nodes)
        t0 = time.monotonic()
        workers = [Client(port, i, t0 + duration) for i in range(clients)]
        for w in workers:
            w.start()
        rss: list[tuple[float, int]] = []
        model_bytes: list[tuple[float, int]] = []
        while any(w.is_alive() for w in workers):
            now = round(time.monotonic() - t0, 1)
            rss.append((now, rss_bytes(proc.pid)))
            model_bytes.append((now, int(model_info(port)["summary"]["memory_bytes"])))
            time.sleep(sample)
        rss.append((round(time.monotonic() - t0, 1), rss_bytes(proc.pid)))
        info = model_info(port)
        model_bytes.append((rss[-1][0], int(info["summary"]["memory_bytes"])))
        seq, n_nodes = int(info["seq"]), int(info["summary"]["n_nodes"])
        proc.send_signal(signal.SIGTERM)
        exit_code = proc.wait(timeout=120)
        proc = start_server(data_dir, port)
        seq_after_restart = int(model_info(port)["seq"])
    finally:
        proc.kill()
        proc.wait(timeout=30)
        shutil.rmtree(data_dir.parent, ignore_errors=True)
    latencies: dict[str, list[float]] = defaultdict(list)
    statuses: Counter[tuple[str, int]] = Counter()
    for w in workers:
        for kind, values in w.latencies.items():
            latencies[kind] += values
        statuses.update(w.statuses)
    every = [v for values in latencies.values() for v in values]
    acked = sum(w.acked for w in workers)
    steady = [b for t, b in rss if t >= 0.2 * duration]
    steady_model = [b for t, b in model_bytes if t >= 0.2 * duration]
    return {
        "duration_s": duration, "clients": clients, "requests": len(every),
        "requests_per_s": len(every) / duration,
        "server_errors": sum(len(w.server_errors) for w in workers),
        "server_error_examples": [e for w in workers for e in w.server_errors][:20],
        "not_json": sum(len(w.not_json) for w in workers),
        "not_json_examples": [e for w in workers for e in w.not_json][:20],
        "acked_events": acked, "seq": seq, "seq_after_restart": seq_after_restart,
        "lost_acked_events": max(0, acked - seq_after_restart), "sigterm_exit_code": exit_code,
        "p50_ms": 1e3 * percentile(every, 0.50), "p99_ms": 1e3 * percentile(every, 0.99),
        "by_kind": {kind: {"n": len(v), "p50_ms": 1e3 * percentile(v, 0.5), "p99_ms": 1e3 * percentile(v, 0.99),
                           "statuses": {str(s): c for (k, s), c in sorted(statuses.items()) if k == kind}}
                    for kind, v in sorted(latencies.items())},
        "rss_bytes": rss,
        "rss_steady_growth": (max(steady) / min(steady) - 1) if steady else None,
        "max_nodes": max_nodes, "n_nodes": n_nodes,
        "model_bytes": model_bytes,
        "model_steady_growth_bytes": (max(steady_model) - min(steady_model)) if steady_model else None,
    }


def report(result: dict[str, Any], meta: dict[str, Any]) -> str:
    MiB = 1024 * 1024
    r = result
    lines = [
        "# Soak (`bench/soak.py`)",
        "",
        f"{r['clients']} clients for {r['duration_s']:.0f} s of mixed traffic (authenticated learns, batches, "
        "predictions and delayed labels; anonymous predictions, pending-id floods and refused writes; hostile "
        f"bodies). Python {meta['python']}, {meta['machine']}, {meta['cpus']} CPUs; client and server share them.",
        "",
        "| figure | value |",
        "|---|---:|",
        f"| requests | {r['requests']:,} ({r['requests_per_s']:,.0f}/s) |",
        f"| 5xx or dropped connections | {r['server_errors']} |",
        f"| non-JSON answers | {r['not_json']} |",
        f"| events acknowledged / seq / seq after SIGTERM + restart | {r['acked_events']:,} / {r['seq']:,} / "
        f"{r['seq_after_restart']:,} |",
        f"| acknowledged events lost | {r['lost_acked_events']} |",
        f"| latency p50 / p99 | {r['p50_ms']:.1f} / {r['p99_ms']:.1f} ms |",
        f"| RSS first / last | {r['rss_bytes'][0][1] / MiB:.0f} / {r['rss_bytes'][-1][1] / MiB:.0f} MiB |",
        f"| RSS growth over the last 80% | {100 * (r['rss_steady_growth'] or 0):.1f}% |",
        f"| model: nodes (max_nodes) | {r['n_nodes']:,} ({r['max_nodes']:,}) |",
        f"| model arrays first / last | {r['model_bytes'][0][1] / MiB:.1f} / {r['model_bytes'][-1][1] / MiB:.1f} MiB |",
        "",
        "| kind | requests | p50 ms | p99 ms | statuses |",
        "|---|---:|---:|---:|---|",
    ]
    for kind, k in r["by_kind"].items():
        lines.append(f"| {kind} | {k['n']:,} | {k['p50_ms']:.1f} | {k['p99_ms']:.1f} | "
                     + ", ".join(f"{s}: {c:,}" for s, c in k["statuses"].items()) + " |")
    lines += ["", "RSS over time (s: MiB): " + ", ".join(f"{t:.0f}: {b / MiB:.0f}" for t, b in r["rss_bytes"])]
    lines += ["", "Model arrays over time (s: MiB): "
              + ", ".join(f"{t:.0f}: {b / MiB:.1f}" for t, b in r["model_bytes"])]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--duration", type=float, default=600.0, help="seconds of traffic (default 600)")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--sample", type=float, default=10.0, help="seconds between RSS samples")
    parser.add_argument("--max-nodes", type=int, default=2000, help="the model's max_nodes (default 2000)")
    parser.add_argument("--out", type=Path, default=OUT, help="directory for soak.json and soak.md")
    args = parser.parse_args(argv)
    result = soak(args.duration, args.clients, args.sample, args.max_nodes)
    meta = {"python": sys.version.split()[0], "machine": platform.machine(), "cpus": os.cpu_count()}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "soak.json").write_text(json.dumps({"meta": meta, "result": result}, indent=1) + "\n")
    text = report(result, meta)
    (args.out / "soak.md").write_text(text)
    print(text)
    if result["server_errors"] or result["not_json"] or result["lost_acked_events"]:
        sys.exit(1)


if __name__ == "__main__":
    main()
