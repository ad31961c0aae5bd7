"""SIGSTOP trials of a writer on PostgreSQL: takeover after the lease expires, no seq acknowledged twice.

Issue 32, case 2: in 1 of 20 SIGSTOP trials the stopped writer held the lease row locked in
the middle of a write, and no learn was acknowledged for the whole stop. This benchmark runs
``streamtree serve`` of this checkout twice on one throwaway PostgreSQL cluster
(``tests/pg.py``, ``fsync=on``, default lease settings: 3 s, polled every 0.25 s), with
clients learning through both instances all along: single events, batches of 5, and batches
of 100 sent with an ``Idempotency-Key`` (a transaction with the keys),
while the writer snapshots every 1,000 events (a transaction of pieces). Each of ``--trials``
(100) trials waits a random 0.5-3 s, SIGSTOPs the writer at that moment, whatever it is
doing, and measures, against the stopped writer's lease expiry (its last renewal as the
server recorded it; the lease row is read every 10 ms):

- **lease taken**: when the lease row shows the replica's token (within 10 ms);
- **first learn acknowledged**: the first 200 to a learn after the expiry (by the new
  writer, the stopped one cannot answer).

Target (issue 32): every takeover, the first learn acknowledged, within 5 s after the expiry.
The stopped writer is resumed a random 0-1 s after the replica became the writer; it comes
back as a replica, and the next trial stops the new writer. At the end the event log is read
from the database and checked: it is numbered 1..N without a gap, no seq was acknowledged
for two requests, and every acknowledged event is in the log under its seq.

Usage::

    flock /tmp/streamtree-bench.lock .venv/bin/python -m bench.sigstop [--trials 100] [--seed 1]

Results go to ``bench/results/sigstop.{json,md}`` (``--trials`` under 100: ``sigstop_smoke``).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import shlex
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import psycopg

from app.storage.records import expand
from bench.http_load import RESULTS, free_port, make_stream, run_header, start_server

#: Every instance's settings: the default lease, full durability, frequent snapshots.
SETTINGS = {"lease_seconds": "3", "lease_poll_seconds": "0.25", "sync": "full", "snapshot_every": "1000"}

#: The issue's bound: seconds from the lease's expiry to the first learn acknowledged after it.
BOUND = 5.0


class Instance:
    """One ``streamtree serve`` on the shared database."""

    def __init__(self, root: Path, url: str, name: str) -> None:
        self.port = free_port()
        self.proc = start_server(root / name, self.port, url, SETTINGS)

    def role(self) -> str | None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=2) as r:
                return str(json.loads(r.read())["role"])
        except OSError:
            return None


class Client(threading.Thread):
    """Learns through one instance until stopped: single events, batches of 5, batches of 100
    with an ``Idempotency-Key``; records each acknowledged event under its seq, with the time."""

    def __init__(self, port: int, tid: int, seed: int) -> None:
        super().__init__(daemon=True)
        self.port, self.tid = port, tid
        xs, ys = make_stream(200_000, seed=seed)
        # the stream's rows, each sent again and again as the client goes on: event k is row
        # k mod 200,000 with "k" added, so every event is told apart in the log (a client
        # learned 200,000 events in about 35 trials once batches were one row of the log)
        self.rows = list(zip(xs, ys, strict=True))
        self.acked: list[tuple[int, tuple[dict[str, Any], str], float]] = []  # (seq, event, answered at)
        self.statuses: dict[int, int] = {}
        self.not_json = 0
        self.stop = threading.Event()

    def run(self) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        i = step = 0
        rows = self.rows
        while not self.stop.is_set():
            step += 1
            n = (1, 5, 1, 100)[step % 4]
            chunk = [
                ({"tid": self.tid, "k": k} | rows[k % len(rows)][0], rows[k % len(rows)][1]) for k in range(i, i + n)
            ]
            i += n
            body = (
                {"events": [{"features": x, "label": y} for x, y in chunk]}
                if n > 1
                else {"features": chunk[0][0], "label": chunk[0][1]}
            )
            headers = {"Content-Type": "application/json"}
            if n == 100:
                headers["Idempotency-Key"] = f"c{self.tid}-{step}"
            try:
                conn.request("POST", "/learn", body=json.dumps(body), headers=headers)
                r = conn.getresponse()
                data = r.read()
            except (OSError, http.client.HTTPException):
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
                time.sleep(0.05)
                continue
            at = time.time()
            self.statuses[r.status] = self.statuses.get(r.status, 0) + 1
            try:
                out = json.loads(data)
            except ValueError:
                self.not_json += 1
                continue
            if r.status == 200:
                last = int(out["seq"])
                for j, event in enumerate(chunk):
                    self.acked.append((last - n + 1 + j, event, at))


class LeaseWatch(threading.Thread):
    """Reads the lease row every 10 ms: ``(server time, token, holder, expires_at)``, epoch seconds."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.url = url
        self.rows: list[tuple[float, int, str, float]] = []
        self.stop = threading.Event()

    def run(self) -> None:
        with psycopg.connect(self.url, autocommit=True) as conn:
            while not self.stop.is_set():
                row = conn.execute(
                    "SELECT extract(epoch FROM clock_timestamp())::float8, token, holder, "
                    "extract(epoch FROM expires_at)::float8 FROM streamtree_lease"
                ).fetchone()
                if row is not None:
                    self.rows.append((float(row[0]), int(row[1]), str(row[2]), float(row[3])))
                time.sleep(0.01)

    def since(self, t: float) -> list[tuple[float, int, str, float]]:
        return [r for r in list(self.rows) if r[0] >= t]


def wait_role(inst: Instance, role: str, timeout: float) -> float | None:
    """Seconds until ``inst`` reports ``role`` (None: not within ``timeout``)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if inst.role() == role:
            return time.monotonic() - t0
        time.sleep(0.02)
    return None


def roles(instances: list[Instance], timeout: float = 60) -> tuple[Instance, Instance]:
    """``(writer, replica)``, once one instance says it is the writer and the other a replica."""
    deadline = time.monotonic() + timeout
    while True:
        found = [inst.role() for inst in instances]
        if sorted(map(str, found)) == ["replica", "writer"]:
            writer = instances[found.index("writer")]
            return writer, next(inst for inst in instances if inst is not writer)
        if time.monotonic() > deadline:
            raise RuntimeError(f"no writer and replica after {timeout:g} s: {found}")
        time.sleep(0.05)


def trial(
    k: int, writer: Instance, replica: Instance, watch: LeaseWatch, clients: list[Client], rng: random.Random
) -> dict[str, Any]:
    """Stop the writer at a random moment; how long after its lease's expiry the replica took over."""
    time.sleep(rng.uniform(0.5, 3.0))
    pid = writer.proc.pid
    before = watch.rows[-1]
    t_stop = time.time()
    writer.proc.send_signal(signal.SIGSTOP)
    became = wait_role(replica, "writer", 3 * float(SETTINGS["lease_seconds"]) + 20)
    # the first learn acknowledged after the expiry (the stopped writer answers nothing)
    expiry: float | None = None
    deadline = time.monotonic() + 30
    while True:
        rows = watch.since(t_stop - 1)
        old = [r for r in rows if r[1] == before[1]]
        expiry = old[-1][3] if old else before[3]  # its last renewal, as the server recorded it
        acks = [at for c in clients for _, _, at in c.acked[-400:] if at > expiry]
        if acks or time.monotonic() > deadline:
            break
        time.sleep(0.02)
    taken = next((r[0] for r in watch.since(t_stop) if r[1] != before[1]), None)
    hold = rng.uniform(0.0, 1.0)
    time.sleep(hold)
    stopped_for = time.time() - t_stop
    writer.proc.send_signal(signal.SIGCONT)
    back = wait_role(writer, "replica", 60)
    result = {
        "trial": k,
        "stopped_pid": pid,
        "stopped_at": t_stop,
        "lease_expiry": expiry,
        "stopped_before_expiry_s": expiry - t_stop,
        "lease_taken_after_expiry_s": None if taken is None else taken - expiry,
        "first_ack_after_expiry_s": min(acks) - expiry if acks else None,
        "replica_writer_after_stop_s": became,
        "resumed_after_s": hold,
        "stopped_for_s": stopped_for,
        "old_writer_replica_after_s": back,
    }
    lt, fa = result["lease_taken_after_expiry_s"], result["first_ack_after_expiry_s"]
    print(
        f"  trial {k + 1}: lease taken {lt if lt is None else f'{lt:.2f}'} s, first learn "
        f"{fa if fa is None else f'{fa:.2f}'} s after the expiry",
        flush=True,
    )
    return result


def check_log(url: str, clients: list[Client]) -> dict[str, Any]:
    """The log against what was acknowledged: gaps, seqs acknowledged twice, events lost."""
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT seq, n, event FROM streamtree_events WHERE model = 'default' ORDER BY seq"
        ).fetchall()
    # a row is a record of n events (app.storage.records)
    log = {seq: json.loads(text) for seq, text in expand("default", rows, 0, sys.maxsize)}
    acked: dict[int, list[tuple[dict[str, Any], str]]] = {}
    for c in clients:
        for seq, event, _ in c.acked:
            acked.setdefault(seq, []).append(event)
    twice = sorted(seq for seq, events in acked.items() if len(events) > 1)
    lost = sorted(
        seq for seq, events in acked.items() if seq not in log or (log[seq]["x"], log[seq]["y"]) != tuple(events[0])
    )
    return {
        "logged": len(log),
        "gap_free": sorted(log) == list(range(1, len(log) + 1)),
        "acknowledged_events": sum(len(e) for e in acked.values()),
        "seqs_acknowledged_twice": len(twice),
        "acknowledged_lost": len(lost),
        "examples_twice": twice[:10],
        "examples_lost": lost[:10],
    }


def summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    q = lambda p: ordered[min(len(ordered) - 1, int(p * len(ordered)))]  # noqa: E731
    return {
        "n": len(ordered),
        "min": ordered[0],
        "p50": statistics.median(ordered),
        "p90": q(0.9),
        "p99": q(0.99),
        "max": ordered[-1],
    }


def report(out: dict[str, Any]) -> str:
    trials = out["trials"]
    lines = [
        f"# SIGSTOP of the writer on PostgreSQL: {len(trials)} trials ({out['date_utc']}, commit {out['commit']}, "
        f"{out['machine']['cpus']} CPUs, load average {out['machine']['loadavg_before'][0]:.2f} before)",
        "",
        f"Command: `{out['command']}` ({out['seconds'] / 60:.1f} min).",
        "",
        "A writer and a replica (`streamtree serve`), PostgreSQL (fsync=on, sync=full) and the clients share the "
        f"machine over loopback; settings {out['settings']}. {out['clients']} clients learn through both "
        "instances all along (single events, batches of 5, batches of 100 with an Idempotency-Key); each trial "
        "SIGSTOPs the writer at a random moment (0.5-3 s after the last), and resumes it 0-1 s after the replica "
        "became the writer. Times are from the stopped writer's lease expiry (its last renewal as the server "
        "recorded it).",
        "",
        "| from the lease's expiry to | trials | p50 s | p90 s | p99 s | max s |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for key, name in (
        ("lease_taken_after_expiry_s", "the lease taken by the replica"),
        ("first_ack_after_expiry_s", "the first learn acknowledged"),
    ):
        s = out["summary"].get(key)
        if s:
            lines.append(f"| {name} | {s['n']} | {s['p50']:.2f} | {s['p90']:.2f} | {s['p99']:.2f} | {s['max']:.2f} |")
    log = out["log"]
    lines += [
        "",
        f"Log: {log['logged']:,} events, gap-free: {log['gap_free']}; {log['acknowledged_events']:,} "
        f"acknowledged, **{log['seqs_acknowledged_twice']} seqs acknowledged twice, {log['acknowledged_lost']} "
        f"acknowledged events lost**. Answers: {out['statuses']} (non-JSON: {out['not_json']}).",
        "",
        "## Verdicts",
        "",
    ] + [f"- {k}: {v}" for k, v in out["verdicts"].items()]
    lines += [
        "",
        "## Each trial (seconds after the expiry: lease taken, first learn)",
        "",
        ", ".join(
            f"{t['lease_taken_after_expiry_s']:.2f}/{t['first_ack_after_expiry_s']:.2f}"
            if t["lease_taken_after_expiry_s"] is not None and t["first_ack_after_expiry_s"] is not None
            else f"none (stopped {t['stopped_for_s']:.0f} s)"
            for t in trials
        ),
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=100, help="SIGSTOP trials (default 100)")
    parser.add_argument("--clients", type=int, default=4, help="learning clients, half on each instance (default 4)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the random moments")
    args = parser.parse_args()
    from tests.pg import start_cluster, stop_cluster

    command = " ".join(
        ["flock /tmp/streamtree-bench.lock .venv/bin/python -m bench.sigstop", *map(shlex.quote, sys.argv[1:])]
    )
    rng = random.Random(args.seed)
    load_before = os.getloadavg()
    t0 = time.monotonic()
    cluster = start_cluster(fsync=True)
    root = Path(tempfile.mkdtemp(prefix="streamtree-sigstop-"))
    instances: list[Instance] = []
    clients: list[Client] = []
    watch: LeaseWatch | None = None
    try:
        url = cluster.create_database()
        writer = Instance(root, url, "a")
        instances.append(writer)
        replica = Instance(root, url, "b")
        instances.append(replica)
        assert wait_role(writer, "writer", 30) is not None and wait_role(replica, "replica", 30) is not None
        watch = LeaseWatch(url)
        watch.start()
        clients = [Client((writer, replica)[t % 2].port, t, seed=1000 + t) for t in range(args.clients)]
        for c in clients:
            c.start()
        time.sleep(2.0)
        results = []
        for k in range(args.trials):
            writer, replica = roles(instances)  # swapped by the last trial, unless its takeover failed
            results.append(trial(k, writer, replica, watch, clients, rng))
        for c in clients:
            c.stop.set()
        for c in clients:
            c.join(timeout=90)
        log = check_log(url, clients)
    finally:
        for c in clients:
            c.stop.set()
        if watch is not None:
            watch.stop.set()
        for inst in instances:
            if inst.proc.poll() is None:
                inst.proc.send_signal(signal.SIGCONT)
                inst.proc.kill()
                inst.proc.wait(timeout=30)
        stop_cluster(cluster)
        shutil.rmtree(root, ignore_errors=True)

    statuses: dict[str, int] = {}
    for c in clients:
        for status, n in c.statuses.items():
            statuses[str(status)] = statuses.get(str(status), 0) + n
    out: dict[str, Any] = run_header(load_before) | {
        "command": command,
        "seconds": time.monotonic() - t0,
        "settings": SETTINGS,
        "clients": args.clients,
        "seed": args.seed,
        "trials": results,
        "log": log,
        "statuses": statuses,
        "not_json": sum(c.not_json for c in clients),
    }
    out["summary"] = {
        key: summary([t[key] for t in results if t[key] is not None])
        for key in ("lease_taken_after_expiry_s", "first_ack_after_expiry_s")
        if any(t[key] is not None for t in results)
    }
    firsts = [t["first_ack_after_expiry_s"] for t in results]
    worst = max((f for f in firsts if f is not None), default=float("inf"))
    missing = sum(f is None for f in firsts)

    def verdict(ok: bool) -> str:
        return "met" if ok else "NOT met"

    twice, lost = log["seqs_acknowledged_twice"], log["acknowledged_lost"]
    out["verdicts"] = {
        f"every first learn acknowledged within {BOUND:g} s after the lease expired": f"max {worst:.2f} s, {missing} trials without one ({verdict(worst < BOUND and not missing)})",
        "no seq acknowledged twice": f"{twice} ({verdict(not twice)})",
        "no acknowledged event lost, log gap-free": f"{lost} lost, gap-free {log['gap_free']} "
        f"({verdict(not lost and log['gap_free'])})",
    }
    name = "sigstop" if args.trials >= 100 else "sigstop_smoke"
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps(out, indent=2) + "\n")
    (RESULTS / f"{name}.md").write_text(report(out))
    print(report(out))


if __name__ == "__main__":
    main()
