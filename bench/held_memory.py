"""What crowds of large requests make ``streamtree serve`` hold, with its bounds and without.

Each scenario runs on a fresh server (SQLite, loopback), twice: with the service's defaults,
and with the bound in question lifted to what the service did before it had one. The server's
peak resident memory over the scenario (``VmHWM`` after it, less ``VmRSS`` before it) is the
measure; the two runs are compared in the same run of this script.

* **queued learns** (``max_held_body_bytes``): ``--clients`` clients each send one learn of
  about 3.5 MiB (10,000 events of 20 numbers) at once to a 20-tree forest, which learns them
  one after another: every body waits, parsed, for its turn. Refused learns (503, with
  ``Retry-After``) are counted, not retried.
* **a large answer** (``max_answer_values``): a model of 1,000 labels is asked for the
  largest answer the defaults allow (2,000 instances), and for the 10,000 instances a request
  could ask for before (refused now: 422).
* **an answer not read** (``send_stall_seconds``): a client asks for the 2,000-instance
  answer and reads nothing; the server's memory while it holds the answer, and after the
  connection is cut off (here after 5 s).

Usage::

    flock /tmp/streamtree-bench.lock .venv/bin/python -m bench.held_memory [--clients 30]

Results go to ``bench/results/held_memory.json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import platform
import random
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench.http_load import free_port, start_server

MiB = 1024 * 1024
OUT = Path(__file__).parent / "results"
UNBOUNDED = str(1 << 40)
#: ``send_stall_seconds`` of the unread-answer scenario.
STALL = 5


def memory(pid: int, field: str) -> int:
    """``VmRSS`` or ``VmHWM`` of the process, bytes."""
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith(field + ":"))


def post(port: int, path: str, body: bytes, timeout: float = 600) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    conn.request("POST", path, body=body, headers={"Content-Type": "application/json"})
    r = conn.getresponse()
    data = r.read()
    conn.close()
    return r.status, data


def put(port: int, path: str, body: dict[str, Any]) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("PUT", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
    status = conn.getresponse().status
    conn.close()
    return status


class Server:
    """A fresh ``streamtree serve`` in a temporary data directory, killed on exit."""

    def __init__(self, settings: dict[str, str]) -> None:
        self.settings = settings

    def __enter__(self) -> Server:
        self.tmp = tempfile.TemporaryDirectory(prefix="held-memory-")
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] = start_server(
            Path(self.tmp.name) / "data", self.port, settings=self.settings
        )
        return self

    def __exit__(self, *exc: object) -> None:
        self.proc.kill()
        self.proc.wait(timeout=30)
        self.tmp.cleanup()

    def rss(self) -> int:
        return memory(self.proc.pid, "VmRSS")

    def peak(self) -> int:
        return memory(self.proc.pid, "VmHWM")


def queued_learns(settings: dict[str, str], clients: int) -> dict[str, Any]:
    rng = random.Random(7)
    bodies = []
    for c in range(clients):
        events = [
            {"features": {f"f{j}": round(rng.random(), 6) for j in range(20)}, "label": f"y{(c + i) % 5}"}
            for i in range(10_000)
        ]
        bodies.append(json.dumps({"events": events}).encode())
    with Server(settings) as server:
        assert put(server.port, "/models/f", {"estimator": "forest", "n_trees": 20, "seed": 1}) == 201
        before = server.rss()
        statuses: list[int] = []
        started = time.monotonic()
        first_learned: list[int] = []  # the peak until the first learn is answered: bodies queued, the model young
        done = threading.Event()

        def send(body: bytes) -> None:
            status = post(server.port, "/models/f/learn", body)[0]
            if status == 200 and not first_learned:
                first_learned.append(server.rss())
            statuses.append(status)

        def sample() -> None:
            while not done.is_set() and not first_learned:
                samples.append(server.rss())
                time.sleep(0.02)

        samples: list[int] = []
        sampler = threading.Thread(target=sample)
        sampler.start()
        threads = [threading.Thread(target=send, args=(b,)) for b in bodies]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        done.set()
        sampler.join()
        took = time.monotonic() - started
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
        conn.request("GET", "/models/f")
        model_bytes = json.loads(conn.getresponse().read())["summary"]["memory_bytes"]
        conn.close()
        return {
            "body_mib": round(sum(map(len, bodies)) / len(bodies) / MiB, 2),
            "clients": clients,
            "learned": statuses.count(200),
            "refused_503": statuses.count(503),
            "other": len(statuses) - statuses.count(200) - statuses.count(503),
            "seconds": round(took, 1),
            "queued_peak_mib_more": round((max(samples + first_learned) - before) / MiB, 1),
            "peak_mib_more": round((server.peak() - before) / MiB, 1),
            "model_mib_at_end": round(model_bytes / MiB, 1),
        }


def labelled(port: int) -> None:
    events = [{"features": {"x": float(i)}, "label": f"label-{i}"} for i in range(1_000)]
    status, _ = post(port, "/learn", json.dumps({"events": events}).encode())
    assert status == 200


def predict_body(n: int) -> bytes:
    return json.dumps({"instances": [{"x": float(i % 1_000)} for i in range(n)]}).encode()


def large_answer(settings: dict[str, str], instances: int) -> dict[str, Any]:
    with Server(settings) as server:
        labelled(server.port)
        before = server.rss()
        started = time.monotonic()
        status, data = post(server.port, "/predict_proba", predict_body(instances))
        return {
            "instances": instances,
            "status": status,
            "answer_mib": round(len(data) / MiB, 1),
            "seconds": round(time.monotonic() - started, 2),
            "peak_mib_more": round((server.peak() - before) / MiB, 1),
        }


def unread_answer(settings: dict[str, str], instances: int) -> dict[str, Any]:
    with Server(settings | {"send_stall_seconds": str(STALL)}) as server:
        labelled(server.port)
        before = server.rss()
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
        s.connect(("127.0.0.1", server.port))
        body = predict_body(instances)
        s.sendall(
            b"POST /predict_proba HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        time.sleep(3)
        holding = server.rss() - before
        # cut off once a whole period passes with nothing taken: the first may see the kernel
        # still moving bytes into the client's receive buffer
        time.sleep(2 * STALL)
        after = server.rss() - before
        s.close()
        return {
            "instances": instances,
            "mib_held_at_3_s": round(holding / MiB, 1),
            f"mib_held_at_{2 * STALL + 3}_s": round(after / MiB, 1),
        }


def report(results: dict[str, Any]) -> str:
    q, a, u = results["queued_learns"], results["large_answer"], results["unread_answer"]
    lines = [
        f"# Memory held by crowds of large requests ({results['when']}, commit {results['commit']}, "
        f"{results['cpus']} CPUs)",
        "",
        "Peak resident memory of the server over each scenario, more than before it; each row on a fresh "
        "server. Command: `flock /tmp/streamtree-bench.lock .venv/bin/python -m bench.held_memory`.",
        "",
        f"## Learns queued for a busy writer ({q['bounded']['clients']} clients, one learn of "
        f"{q['bounded']['body_mib']} MiB each, at once, to a 20-tree forest)",
        "",
        "| `max_held_body_bytes` | learned | refused (503) | other | seconds | peak MiB more while queued "
        "(until the first answer) | peak MiB more over all | the model's arrays at the end, MiB |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, label in (("bounded", "16 MiB (default)"), ("unbounded", "unbounded (before)")):
        r = q[name]
        lines.append(
            f"| {label} | {r['learned']} | {r['refused_503']} | {r['other']} | {r['seconds']} | "
            f"{r['queued_peak_mib_more']} | {r['peak_mib_more']} | {r['model_mib_at_end']} |"
        )
    ratio = q["bounded"]["queued_peak_mib_more"] / max(q["unbounded"]["queued_peak_mib_more"], 1)
    lines += [
        "",
        f"Peak while queued, with the bound / without: {ratio:.2f}.",
        "",
        "## One prediction of a 1,000-label model",
        "",
        "| instances | `max_answer_values` | status | answer MiB | seconds | peak MiB more |",
        "|---:|---|---:|---:|---:|---:|",
    ]
    for name, label in (
        ("largest_allowed", "2,000,000 (default)"),
        ("refused", "2,000,000 (default)"),
        ("before", "unbounded (before)"),
    ):
        r = a[name]
        lines.append(
            f"| {r['instances']:,} | {label} | {r['status']} | {r['answer_mib']} | {r['seconds']} | {r['peak_mib_more']} |"
        )
    late = 2 * STALL + 3
    lines += [
        "",
        f"## An answer its client does not read ({u['instances']:,} instances of 1,000 labels, "
        f"`send_stall_seconds` {STALL})",
        "",
        f"| MiB held 3 s after the request | MiB held {late} s after |",
        "|---:|---:|",
        f"| {u['mib_held_at_3_s']} | {u[f'mib_held_at_{late}_s']} |",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=30)
    args = parser.parse_args()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    results: dict[str, Any] = {
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "commit": commit,
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
    }
    results["queued_learns"] = {
        "bounded": queued_learns({}, args.clients),
        "unbounded": queued_learns({"max_held_body_bytes": UNBOUNDED}, args.clients),
    }
    results["large_answer"] = {
        "largest_allowed": large_answer({}, 2_000),
        "refused": large_answer({}, 10_000),
        "before": large_answer({"max_answer_values": str(10**12)}, 10_000),
    }
    results["unread_answer"] = unread_answer({}, 2_000)
    OUT.mkdir(exist_ok=True)
    (OUT / "held_memory.json").write_text(json.dumps(results, indent=2) + "\n")
    (OUT / "held_memory.md").write_text(report(results))
    print(report(results))


if __name__ == "__main__":
    main()
