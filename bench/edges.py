"""Issue 32's edge cases, measured on a real ``streamtree serve``: unfinished huge headers and
event log exports, before and after their fixes (run it on two checkouts).

Four short phases on one server with a log of ``--events`` events:

* *quiet*: single learns, one after the other (latency p50, p99);
* *headers*: 20 connections each send an unfinished header of 32 MiB in 64 KiB pieces (as
  the issue did); the server's peak RSS while they do, and how much each could send;
* *stalled exports*: 100 connections ask for an export of 10,000 events and never read;
  peak RSS, and single learns meanwhile;
* *exporters*: 8 clients page through the log as fast as they can; single learns meanwhile.

Usage (one line of JSON per run; run it under ``flock /tmp/streamtree-bench.lock``)::

    python -m bench.edges --checkout /path/to/checkout --label after
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

EXE = Path(sys.executable).parent / "streamtree"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def call(port: int, method: str, path: str, body: Any = None, timeout: float = 120) -> tuple[int, Any]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    conn.request(
        method, path, body=None if body is None else json.dumps(body), headers={"Content-Type": "application/json"}
    )
    r = conn.getresponse()
    data = r.read()
    conn.close()
    return r.status, data


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) / 1024


class Peak(threading.Thread):
    """The process's peak RSS while running."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid, self.peak, self.stop = pid, rss_mib(pid), threading.Event()

    def run(self) -> None:
        while not self.stop.wait(0.05):
            self.peak = max(self.peak, rss_mib(self.pid))


def learns(port: int, n: int, until: threading.Event | None = None) -> list[float]:
    """Seconds each of ``n`` single learns took (one after the other), or until ``until``."""
    out = []
    for i in range(n):
        if until is not None and until.is_set():
            break
        t0 = time.monotonic()
        status, _ = call(port, "POST", "/learn", {"features": {"a": i % 13, "b": float(i % 7)}, "label": i % 2 == 0})
        out.append(time.monotonic() - t0)
        assert status == 200
    return out


def summary(seconds: list[float]) -> dict[str, float]:
    ms = sorted(s * 1000 for s in seconds)
    return {
        "n": len(ms),
        "p50_ms": round(statistics.median(ms), 1),
        "p99_ms": round(ms[int(0.99 * (len(ms) - 1))], 1),
        "max_ms": round(ms[-1], 1),
    }


def headers_phase(port: int, pid: int) -> dict[str, Any]:
    peak = Peak(pid)
    peak.start()
    before = rss_mib(pid)
    sent: list[int] = []
    t0 = time.monotonic()

    def endless() -> None:
        n = 0
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=120) as s:
                s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Endless: ")
                while n < 32 * 1024 * 1024:
                    s.sendall(b"a" * 65536)
                    n += 65536
                time.sleep(1.0)  # hold it a moment, unfinished
        except OSError:
            pass
        sent.append(n)

    clients = [threading.Thread(target=endless) for _ in range(20)]
    for c in clients:
        c.start()
    for c in clients:
        c.join()
    peak.stop.set()
    peak.join()
    return {
        "rss_before_mib": round(before),
        "rss_peak_mib": round(peak.peak),
        "seconds": round(time.monotonic() - t0, 1),
        "max_sent_mib": round(max(sent) / 2**20, 2),
        "health": call(port, "GET", "/health")[0],
    }


def stalled_phase(port: int, pid: int) -> dict[str, Any]:
    peak = Peak(pid)
    peak.start()
    before = rss_mib(pid)
    socks = []
    for _ in range(100):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.connect(("127.0.0.1", port))
        s.sendall(b"GET /models/default/events?limit=10000 HTTP/1.1\r\nHost: x\r\n\r\n")
        socks.append(s)
    time.sleep(2.0)
    during = summary(learns(port, 50))
    after_learns = rss_mib(pid)
    for s in socks:
        s.close()
    peak.stop.set()
    peak.join()
    return {
        "rss_before_mib": round(before),
        "rss_peak_mib": round(peak.peak),
        "rss_with_100_mib": round(after_learns),
        "learn": during,
    }


def exporters_phase(port: int, n_events: int) -> dict[str, Any]:
    stop = threading.Event()
    pages = [0]
    refused = [0]

    def exporter() -> None:
        while not stop.is_set():
            after = 0
            while not stop.is_set() and after < n_events:
                status, data = call(port, "GET", f"/models/default/events?after={after}&limit=10000")
                if status == 429:
                    refused[0] += 1
                    time.sleep(1.0)
                    continue
                pages[0] += 1
                # the last seq, without parsing megabytes here: this process's learn client
                # would wait for the GIL behind json.loads and measure that instead
                last = data.rfind(b'{"seq":')
                if last < 0:
                    break
                after = int(data[last + 7 : data.index(b",", last)])

    threads = [threading.Thread(target=exporter) for _ in range(8)]
    for t in threads:
        t.start()
    time.sleep(1.0)
    during = summary(learns(port, 150))
    stop.set()
    for t in threads:
        t.join()
    return {"learn": during, "pages_read": pages[0], "answered_429": refused[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkout", type=Path, default=Path(__file__).resolve().parents[1])
    parser.add_argument("--label", default="")
    parser.add_argument("--events", type=int, default=30_000)
    args = parser.parse_args()
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        env = os.environ | {"PYTHONPATH": str(args.checkout)}
        proc = subprocess.Popen(
            [str(EXE), "serve", "--data-dir", f"{tmp}/data", "--port", str(port), "--log-level", "error"],
            env=env,
            cwd=args.checkout,
        )
        try:
            deadline = time.monotonic() + 300
            while True:
                try:
                    if call(port, "GET", "/health", timeout=5)[0] == 200:
                        break
                except OSError:
                    pass
                assert time.monotonic() < deadline and proc.poll() is None, "server did not start"
                time.sleep(0.2)
            for i in range(0, args.events, 1_000):  # events of about 300 bytes of JSON
                batch = [
                    {
                        "features": {f"feature_{j}": round((k * 7 + j) % 101 / 3, 6) for j in range(12)},
                        "label": k % 3 == 0,
                    }
                    for k in range(i, i + 1_000)
                ]
                assert call(port, "POST", "/learn", {"events": batch})[0] == 200
            result = {
                "label": args.label,
                "events": args.events,
                "quiet": {"learn": summary(learns(port, 100))},
                "headers": headers_phase(port, proc.pid),
            }
            result["stalled_exports"] = stalled_phase(port, proc.pid)
            time.sleep(1.0)
            result["exporters"] = exporters_phase(port, args.events)
            print(json.dumps(result))
        finally:
            proc.terminate()
            proc.wait(timeout=60)


if __name__ == "__main__":
    main()
