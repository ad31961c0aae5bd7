"""One writer and a replica on PostgreSQL: forwarded throughput, replica lag, failover time.

Runs ``streamtree serve`` of this checkout twice on one throwaway PostgreSQL cluster
(``tests/pg.py``, ``fsync=on``; both instances ``sync=full``), all on loopback, and measures:

1. **What one writer sustains, and through a replica**: learns of 1, 10, 100 and 1,000 events
   a request (keep-alive clients, ``bench/http_load.py``) sent to the writer, then the same
   sent to the replica, which forwards each to the writer. Target: through the replica at
   least 80% of the events per second sent to the writer.
2. **Replica lag at 5,000 events/s**: batches of 50 events sent to the writer at a fixed 100
   requests a second (open loop) while the replica's ``/health`` is read every 2 ms; an
   event's lag is from the writer's answer to the first read showing it applied on the
   replica (a read's period, 2 ms plus the read itself, is included). Target: p99 under 100 ms.
3. **Failover**: 20 times, the writer is SIGKILLed while a client learns single events
   through the replica, one after the other; the failover time is from the kill to the first
   learn answered 200 after it (by the former replica, now the writer; the client's request
   in flight at the kill gets a 503 and it sends the next); then the killed instance is
   started again (it comes back as a replica) and the next round kills the new writer.
   Targets: max under 10 s, median under 3 s. Five SIGSTOPs are timed the same way (the
   stopped writer's session stays open, so the lease must expire: ``lease_seconds``, 3 s by
   default), each writer resumed with SIGCONT afterwards (it comes back as a replica).

Usage::

    flock /tmp/streamtree-bench.lock .venv/bin/python -m bench.scaleout [--quick]

Results go to ``bench/results/scaleout.{json,md}`` and ``bench/results/scaleout_writer.png``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import statistics
import tempfile
import threading
import time
import urllib.request
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench.http_load import RESULTS, Connection, Result, free_port, make_stream, run_header, run_load, start_server

#: Every instance's settings (the defaults, spelled out).
SETTINGS = {"lease_seconds": "3", "lease_poll_seconds": "0.25", "sync": "full"}

#: (events per request, clients, requests) of the throughput workloads: enough clients to keep
#: the writer busy (with fewer, a closed-loop client measures the extra hop's latency, not
#: what the writer sustains).
WORKLOADS = [(1, 8, 3000), (10, 16, 1200), (100, 16, 480), (1000, 8, 96)]


class Instance:
    """One ``streamtree serve`` on the shared database."""

    def __init__(self, root: Path, url: str, name: str) -> None:
        self.port = free_port()
        self.proc = start_server(root / name, self.port, url, SETTINGS)

    def health(self) -> dict[str, Any]:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=5) as r:
            return dict(json.loads(r.read()))

    def kill(self, sig: int = signal.SIGKILL) -> None:
        self.proc.send_signal(sig)
        if sig == signal.SIGKILL:
            self.proc.wait(timeout=30)


async def get(conn: Connection, path: str) -> bytes:
    """``GET path`` on a keep-alive connection; the body."""
    conn.writer.write(f"GET {path} HTTP/1.1\r\nHost: {conn.host}\r\n\r\n".encode())
    raw = await conn.reader.readuntil(b"\r\n\r\n")
    length = next(int(line[15:]) for line in raw.split(b"\r\n") if line[:15].lower() == b"content-length:")
    return await conn.reader.readexactly(length)


def bodies(xs: list[dict[str, Any]], ys: list[str], size: int, n: int, offset: int) -> list[bytes]:
    out = []
    for r in range(n):
        i = (offset + r * size) % (len(xs) - size)
        out.append(
            json.dumps(
                {
                    "events": [
                        {"features": x, "label": y} for x, y in zip(xs[i : i + size], ys[i : i + size], strict=True)
                    ]
                }
            ).encode()
        )
    return out


async def throughput(
    writer: Instance, replica: Instance, xs: list[dict[str, Any]], ys: list[str], scale: float
) -> list[dict[str, Any]]:
    rows = []
    offset = 0
    for size, clients, n in WORKLOADS:
        n = max(clients * 2, int(n * scale))
        row: dict[str, Any] = {"events_per_request": size, "clients": clients, "runs": []}
        # alternated three times (writer, replica, writer, ...): the machine's other load and
        # the tree's growth hit both alike (runs of about a second varied by 15% with two)
        for target, inst in (("writer", writer), ("replica", replica)) * 3:
            result: Result = await run_load(
                "127.0.0.1", inst.port, f"learn {size}", "/learn", bodies(xs, ys, size, n, offset), clients, size
            )
            offset += n * size
            row["runs"].append({"target": target} | asdict(result))
            print(
                f"  {size:>5} events/request via {target:<7}: {result.items_per_s:>9,.0f} events/s "
                f"(p50 {result.p50_ms:.1f} ms, p99 {result.p99_ms:.1f} ms, {result.errors} errors)",
                flush=True,
            )
        for target in ("writer", "replica"):
            runs = [r for r in row["runs"] if r["target"] == target]
            row[target] = {
                "items_per_s": statistics.mean(r["items_per_s"] for r in runs),
                "p50_ms": statistics.mean(r["p50_ms"] for r in runs),
                "p99_ms": max(r["p99_ms"] for r in runs),
                "errors": sum(r["errors"] for r in runs),
            }
        row["ratio"] = row["replica"]["items_per_s"] / row["writer"]["items_per_s"]
        rows.append(row)
    return rows


async def replica_lag(
    writer: Instance, replica: Instance, xs: list[dict[str, Any]], ys: list[str], rate: int, seconds: float
) -> dict[str, Any]:
    """Open-loop batches of 50 at ``rate`` events/s to the writer; lag per event on the replica."""
    size = 50
    per_s = rate / size
    n = int(per_s * seconds)
    payloads = bodies(xs, ys, size, n, 7)
    acks: list[tuple[int, float]] = []  # (seq, answered at)
    reads: list[tuple[float, int]] = []  # (read at, applied seq)
    done = asyncio.Event()
    conns = [await Connection.open("127.0.0.1", writer.port) for _ in range(8)]
    free: asyncio.Queue[Connection] = asyncio.Queue()
    for c in conns:
        free.put_nowait(c)
    late = 0

    async def send(body: bytes) -> None:
        conn = await free.get()
        status, out = await conn.post("/learn", body)
        acks.append((int(json.loads(out)["seq"]), time.perf_counter()))
        assert status == 200, out
        free.put_nowait(conn)

    async def poll() -> None:
        conn = await Connection.open("127.0.0.1", replica.port)
        while not done.is_set():
            t = time.perf_counter()
            seq = json.loads(await get(conn, "/health"))["seq"]["default"]
            reads.append((t, seq))
            await asyncio.sleep(0.002)
        conn.close()

    poller = asyncio.create_task(poll())
    t0 = time.perf_counter()
    tasks = []
    for k, body in enumerate(payloads):
        wait = t0 + k / per_s - time.perf_counter()
        if wait > 0:
            await asyncio.sleep(wait)
        elif wait < -0.05:
            late += 1
        tasks.append(asyncio.create_task(send(body)))
    await asyncio.gather(*tasks)
    sent_s = time.perf_counter() - t0
    last = max(seq for seq, _ in acks)
    while not reads or reads[-1][1] < last:
        await asyncio.sleep(0.01)
    done.set()
    await poller
    for c in conns:
        c.close()
    lags = []
    j = 0
    for seq, at in sorted(acks):
        while reads[j][1] < seq:
            j += 1
        lags.append(max(0.0, reads[j][0] - at) if reads[j][0] >= at else 0.0)
    # the ack of a batch stands for its 50 events
    lags.sort()
    q = lambda p: 1e3 * lags[min(len(lags) - 1, int(p * len(lags)))]  # noqa: E731
    return {
        "target_events_per_s": rate,
        "achieved_events_per_s": n * size / sent_s,
        "requests": n,
        "requests_sent_late": late,
        "reads": len(reads),
        "p50_ms": q(0.5),
        "p90_ms": q(0.9),
        "p99_ms": q(0.99),
        "max_ms": 1e3 * lags[-1],
    }


class Learner(threading.Thread):
    """Learns single events through one instance, one after the other, recording each 200's time."""

    def __init__(self, port: int) -> None:
        super().__init__(daemon=True)
        self.port = port
        self.ok: list[float] = []
        self.stop = threading.Event()

    def run(self) -> None:
        body = json.dumps({"features": {"a": 1.0, "c": "x"}, "label": "p"}).encode()
        while not self.stop.is_set():
            req = urllib.request.Request(
                f"http://127.0.0.1:{self.port}/learn", data=body, headers={"Content-Type": "application/json"}
            )
            try:
                with urllib.request.urlopen(req, timeout=30) as r:
                    if r.status == 200:
                        self.ok.append(time.monotonic())
            except OSError:
                time.sleep(0.01)


def wait_role(inst: Instance, role: str, timeout: float = 30) -> None:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        try:
            if inst.health()["role"] == role:
                return
        except OSError:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"instance on {inst.port} is not the {role} after {timeout} s")


def failover(
    writer: Instance, replica: Instance, root: Path, url: str, rounds: int, sig: int
) -> tuple[list[float], Instance, Instance]:
    """``rounds`` failovers by ``sig``; their times, and the (writer, replica) after them."""
    times = []
    for k in range(rounds):
        learner = Learner(replica.port)
        learner.start()
        time.sleep(0.5)
        assert learner.ok, "nothing learned through the replica before the failover"
        t_kill = time.monotonic()
        writer.kill(sig)
        t_deadline = t_kill + 30
        while time.monotonic() < t_deadline and not any(t > t_kill for t in learner.ok):
            time.sleep(0.005)
        learner.stop.set()
        learner.join(timeout=60)
        after = [t for t in learner.ok if t > t_kill]
        if not after:
            raise RuntimeError("no learn succeeded within 30 s of the failover")
        times.append(after[0] - t_kill)
        print(f"  {signal.Signals(sig).name} {k + 1}/{rounds}: {times[-1]:.2f} s", flush=True)
        wait_role(replica, "writer")
        if sig == signal.SIGKILL:
            old = Instance(root, url, f"r{k}")
        else:
            writer.proc.send_signal(signal.SIGCONT)
            old = writer
        wait_role(old, "replica")
        writer, replica = replica, old
    return times, writer, replica


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = [r["events_per_request"] for r in rows]
    fig, ax = plt.subplots(figsize=(6.4, 4.0), dpi=120)
    ax.plot(sizes, [r["writer"]["items_per_s"] for r in rows], "o-", label="learns sent to the writer")
    ax.plot(sizes, [r["replica"]["items_per_s"] for r in rows], "s--", label="learns sent to a replica (forwarded)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("events per learn request")
    ax.set_ylabel("events learned per second (durable)")
    ax.set_title("One writer on PostgreSQL (2 cores shared by writer, replica, DB, client)", fontsize=9)
    for r in rows:
        ax.annotate(
            f"{r['writer']['items_per_s']:,.0f}",
            (r["events_per_request"], r["writer"]["items_per_s"]),
            textcoords="offset points",
            xytext=(4, 6),
            fontsize=7,
        )
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def report(out: dict[str, Any]) -> str:
    lines = [
        f"# Scale-out on PostgreSQL: one writer, a replica ({out['date_utc']}, commit {out['commit']}, "
        f"{out['machine']['cpus']} CPUs, load average {out['machine']['loadavg_before'][0]:.2f} before)",
        "",
        "Writer, replica, PostgreSQL (fsync=on, sync=full) and the load generator share the machine's cores "
        "over loopback.",
        "",
        "## Throughput: learns sent to the writer, and to the replica (forwarded)",
        "",
        "Each workload ran three times on each target, alternated; events/s and p50 are the means, p99 the worse.",
        "",
        "| events/request | clients | writer events/s | via replica events/s | ratio | writer p50 ms | "
        "replica p50 ms | replica p99 ms | errors |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in out["throughput"]:
        w, p = r["writer"], r["replica"]
        lines.append(
            f"| {r['events_per_request']:,} | {r['clients']} | {w['items_per_s']:,.0f} | "
            f"{p['items_per_s']:,.0f} | {r['ratio']:.0%} | {w['p50_ms']:.1f} | {p['p50_ms']:.1f} | "
            f"{p['p99_ms']:.1f} | {w['errors'] + p['errors']} |"
        )
    lag = out["lag"]
    lines += [
        "",
        "## Replica lag",
        "",
        f"{lag['achieved_events_per_s']:,.0f} events/s sent (target {lag['target_events_per_s']:,}; "
        f"{lag['requests']} batches of 50, {lag['requests_sent_late']} sent over 50 ms late): lag p50 "
        f"{lag['p50_ms']:.1f} ms, p90 {lag['p90_ms']:.1f} ms, **p99 {lag['p99_ms']:.1f} ms**, max "
        f"{lag['max_ms']:.1f} ms ({lag['reads']} reads of the replica's /health).",
        "",
    ]
    for sig, times in out["failover"].items():
        lines.append(f"## Failover by {sig} ({len(times)} rounds)")
        lines += [
            "",
            f"Median **{statistics.median(times):.2f} s**, max **{max(times):.2f} s**, min "
            f"{min(times):.2f} s. Each: " + ", ".join(f"{t:.2f}" for t in times) + " s.",
            "",
        ]
    lines += ["## Verdicts", ""] + [f"- {k}: {v}" for k, v in out["verdicts"].items()]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer requests and rounds (a smoke run)")
    args = parser.parse_args()
    from tests.pg import start_cluster, stop_cluster

    scale = 0.2 if args.quick else 1.0
    kills, stops = (3, 1) if args.quick else (20, 5)
    load_before = os.getloadavg()
    xs, ys = make_stream(60_000, seed=5)
    cluster = start_cluster(fsync=True)
    root = Path(tempfile.mkdtemp(prefix="streamtree-scaleout-"))
    instances: list[Instance] = []
    try:
        url = cluster.create_database()
        writer = Instance(root, url, "w")
        replica = Instance(root, url, "r")
        instances += [writer, replica]
        wait_role(writer, "writer")
        wait_role(replica, "replica")
        print("throughput", flush=True)
        rows = asyncio.run(throughput(writer, replica, xs, ys, scale))
        print("replica lag at 5,000 events/s", flush=True)
        lag = asyncio.run(replica_lag(writer, replica, xs, ys, 5000, 4.0 if args.quick else 20.0))
        print(f"  p50 {lag['p50_ms']:.1f} ms, p99 {lag['p99_ms']:.1f} ms", flush=True)
        print("failover", flush=True)
        killed, writer, replica = failover(writer, replica, root, url, kills, signal.SIGKILL)
        instances += [writer, replica]
        stopped, writer, replica = failover(writer, replica, root, url, stops, signal.SIGSTOP)
        instances += [writer, replica]
    finally:
        for inst in instances:
            if inst.proc.poll() is None:
                inst.proc.send_signal(signal.SIGCONT)
                inst.proc.kill()
                inst.proc.wait(timeout=30)
        stop_cluster(cluster)
        shutil.rmtree(root, ignore_errors=True)

    out: dict[str, Any] = run_header(load_before) | {
        "settings": SETTINGS,
        "throughput": rows,
        "lag": lag,
        "failover": {"SIGKILL": killed, "SIGSTOP": stopped},
    }
    worst = min(r["ratio"] for r in rows)
    out["verdicts"] = {
        "through a replica >= 80% of the writer (worst workload)": f"{worst:.0%} "
        f"({'met' if worst >= 0.8 else 'NOT met'})",
        "replica lag p99 < 100 ms at 5,000 events/s": f"{lag['p99_ms']:.1f} ms "
        f"({'met' if lag['p99_ms'] < 100 else 'NOT met'})",
        "SIGKILL failover max < 10 s": f"{max(killed):.2f} s ({'met' if max(killed) < 10 else 'NOT met'})",
        "SIGKILL failover median < 3 s": f"{statistics.median(killed):.2f} s "
        f"({'met' if statistics.median(killed) < 3 else 'NOT met'})",
    }
    suffix = "_quick" if args.quick else ""
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"scaleout{suffix}.json").write_text(json.dumps(out, indent=2) + "\n")
    (RESULTS / f"scaleout{suffix}.md").write_text(report(out))
    plot(rows, RESULTS / f"scaleout_writer{suffix}.png")
    print(report(out))


if __name__ == "__main__":
    main()
