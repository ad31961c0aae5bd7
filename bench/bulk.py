"""``streamtree learn`` on a 1,000,000-row CSV: events/s, peak memory, and an interrupted run resumed.

Writes a CSV of ``--rows`` rows (10 numeric columns, 3 string columns, about 1% blank cells,
a ``yes``/``no`` label) in a temporary directory, starts ``streamtree serve`` of this checkout
on a free loopback port with a fresh data directory, then:

1. ``streamtree learn`` (the console script, a subprocess) learns the whole file into a new
   model: wall time, events/s, the CLI's peak RSS and CPU seconds (``wait4``), the server's
   peak RSS (``VmHWM``) and CPU seconds over the run;
2. a second model: the same command is killed (SIGKILL) once the model's ``seq`` passes 40%
   of the rows, then run again; the second run's summary counts the rows learned before
   the kill as already learned (the CLI's peak RSS is its ``VmHWM`` read every 20 ms);
3. both models' exports (``GET /models/NAME/events``, a page at a time) are read back: each
   must hold exactly ``--rows`` events, seqs 1..n, labels in the file's order;
4. in this process, the client side alone: the file read and encoded into events and their
   JSON (no requests), events/s, to tell the CLI's cost from the service's; and the model
   alone learning the first 200,000 rows as the service calls it (no HTTP, no log).

Usage::

    flock /tmp/streamtree-bench.lock nice -n 0 .venv/bin/python -m bench.bulk [--rows N]

Results: ``bench/results/bulk.json`` and ``bulk.md``. Client and server share the machine's
cores over loopback.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bench.http_load import ROOT, cpu_seconds, free_port, run_header, start_server
from streamtree.bulk.rows import chunk_key, encode_learn
from streamtree.bulk.sources import open_source
from streamtree.client import Client

RESULTS = ROOT / "bench" / "results"
EXE = Path(sys.executable).parent / "streamtree"
TARGETS = {"events_per_s": 50_000.0, "cli_peak_rss_mb": 300.0}
SUMMARY = re.compile(r"learned ([\d,]+) events .*\(([\d,]+) new, ([\d,]+) already learned\) in ([\d.]+) s")


def make_csv(path: Path, rows: int, seed: int = 0) -> np.ndarray:
    """Write the benchmark's CSV at ``path`` (in pieces, so the generator's memory stays small);
    the labels, in order."""
    rng = np.random.default_rng(seed)
    piece = 100_000
    labels = []
    for start in range(0, rows, piece):
        n = min(piece, rows - start)
        x = rng.normal(size=(n, 10))
        frame = pd.DataFrame(x, columns=[f"x{i}" for i in range(10)])
        for j, k in enumerate((4, 12, 40)):
            frame[f"s{j}"] = np.char.add(f"c{j}_", rng.integers(0, k, size=n).astype(str))
        score = x[:, 0] + 0.5 * x[:, 1] * x[:, 2] + (frame["s0"] == "c0_1").to_numpy() + rng.normal(scale=0.5, size=n)
        frame["y"] = np.where(score > 0.3, "yes", "no")
        blank = rng.random((n, 13)) < 0.01
        for c, name in enumerate(frame.columns[:13]):
            frame.loc[blank[:, c], name] = None
        frame.to_csv(path, mode="a" if start else "w", header=not start, index=False)
        labels.append(frame["y"].to_numpy())
    return np.concatenate(labels)


def proc_status(pid: int) -> dict[str, int]:
    """``VmHWM``/``VmRSS`` (kB) of a process."""
    out: dict[str, int] = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(("VmHWM:", "VmRSS:")):
                out[line.split(":")[0]] = int(line.split()[1])
    return out


def learn_cmd(csv: Path, name: str, url: str, config: Path, batch: int, in_flight: int = 2) -> list[str]:
    return [
        str(EXE), "learn", str(csv), "--model", name, "--label", "y", "--url", url,
        "--create", str(config), "--batch-size", str(batch), "--in-flight", str(in_flight), "--no-progress",
    ]  # fmt: skip


def run_cli(cmd: list[str], server_pid: int, kill_at: tuple[Client, str, int] | None = None) -> dict[str, Any]:
    """Run the CLI to its end (or SIGKILL it once the model's seq passes ``kill_at``'s mark):
    wall seconds, its peak RSS and CPU seconds, the server's CPU seconds and peak RSS, its output."""
    env = os.environ | {"PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    server_cpu = cpu_seconds(server_pid)
    started = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=env)
        killed_at, peak_kb, last_check = None, 0, 0.0
        while True:
            # VmHWM of the CLI after its exec (a fork's pages of this process are not counted,
            # as wait4's ru_maxrss would count them); read until it exits
            try:
                peak_kb = max(peak_kb, proc_status(proc.pid)["VmHWM"])
            except (OSError, KeyError, IndexError):
                pass
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if kill_at is not None and killed_at is None and time.monotonic() - last_check > 0.05:
                last_check = time.monotonic()
                client, name, mark = kill_at
                try:
                    seq = int(client.model(name).info()["seq"])
                except Exception:  # noqa: BLE001 - the model is created by the CLI
                    seq = 0
                if seq >= mark:
                    proc.send_signal(signal.SIGKILL)
                    killed_at = seq
            time.sleep(0.02)
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - started
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(), err.read().decode()
    server_cpu = cpu_seconds(server_pid) - server_cpu
    server_after = proc_status(server_pid)
    return {
        "wall_s": wall,
        "returncode": proc.returncode,
        "killed_at_seq": killed_at,
        "cli_peak_rss_mb": peak_kb / 1024,
        "cli_cpu_s": usage.ru_utime + usage.ru_stime,
        "server_cpu_s": server_cpu,
        "server_peak_rss_mb": server_after["VmHWM"] / 1024,
        "stdout": stdout.strip(),
        "stderr": stderr.strip()[-2000:],
    }


def parse_summary(line: str) -> dict[str, float]:
    m = SUMMARY.search(line)
    if m is None:
        raise RuntimeError(f"no summary line in the CLI's output: {line!r}")
    learned, new, already = (int(g.replace(",", "")) for g in m.groups()[:3])
    return {"learned": learned, "new": new, "already": already, "seconds": float(m[4])}


def check_export(client: Client, name: str, labels: np.ndarray) -> dict[str, Any]:
    """Read the model's export back: its count, whether seqs are 1..n, whether labels match the file."""
    seqs_ok, labels_ok, n = True, True, 0
    for event in client.model(name).events(page=10_000):
        n += 1
        seqs_ok &= event["seq"] == n
        labels_ok &= n <= len(labels) and event["label"] == labels[n - 1]
    return {"events": n, "seqs_1_to_n": bool(seqs_ok), "labels_in_file_order": bool(labels_ok and n == len(labels))}


def encode_only(csv: Path, batch: int) -> dict[str, float]:
    """The client side alone: read and encode the file (events, JSON bytes, keys), no requests."""
    started = time.perf_counter()
    cpu = time.process_time()
    source = open_source(str(csv), None, batch)
    n = 0
    for index, chunk in enumerate(source.chunks()):
        events, blob = encode_learn(chunk, "y", None)
        chunk_key("bench", index, blob)
        n += len(events)
    source.close()
    wall = time.perf_counter() - started
    return {"events": n, "wall_s": wall, "cpu_s": time.process_time() - cpu, "events_per_s": n / wall}


def in_process_learning(csv: Path, rows: int, batch: int = 1000) -> dict[str, float]:
    """The model's own rate on the file's first ``rows`` rows, as the service learns them
    (``learn_many(..., return_proba=True)``, a default tree, batches of ``batch``), no HTTP:
    the most the service could do with a core to itself."""
    from streamtree import ProbabilityTree

    source = open_source(str(csv), None, batch)
    batches = []
    for chunk in source.chunks():
        events, _ = encode_learn(chunk, "y", None)
        batches.append(([e["features"] for e in events], [e["label"] for e in events]))
        if len(batches) * batch >= rows:
            break
    source.close()
    model = ProbabilityTree()
    model.learn_many(*batches[0], return_proba=True)  # compiled kernels warm
    started = time.perf_counter()
    for xs, ys in batches[1:]:
        model.learn_many(xs, ys, return_proba=True)
    seconds = time.perf_counter() - started
    n = sum(len(ys) for _, ys in batches[1:])
    return {"events": n, "seconds": seconds, "events_per_s": n / seconds}


def report(res: dict[str, Any]) -> str:
    full, resumed, first = res["full"], res["resumed"], res["interrupted"]
    m = res["machine"]
    lines = [
        f"# streamtree learn: a {res['rows']:,}-row CSV ({res['date_utc']}, commit {res['commit']}, "
        f"{m['cpus']} CPUs, load average {m['loadavg_before'][0]:.2f} before, {m['loadavg_after'][0]:.2f} after)",
        "",
        f"Command: `flock /tmp/streamtree-bench.lock nice -n 0 .venv/bin/python -m bench.bulk --rows {res['rows']} --batch {res['batch']} --in-flight {res['in_flight']}`. "
        f"The file: {res['rows']:,} rows of 10 numeric and 3 string columns, about 1% blank cells, a `yes`/`no` "
        f"label ({res['csv_mb']:.0f} MB). `streamtree learn --batch-size {res['batch']} --in-flight {res['in_flight']}` "
        "as a subprocess against `streamtree serve` (SQLite, default settings) on loopback, same machine (2 cores; "
        "the load averages in the title say how busy it was: a one-minute average still counts a run that "
        "ended just before).",
        "",
        "| run | events/s | wall s | CLI peak RSS MB | CLI CPU s | server CPU s | server peak RSS MB |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for label, r in (("whole file", full), ("killed at ~40%", first), ("resumed", resumed)):
        rate = f"{r['events_per_s']:,.0f}" if "events_per_s" in r else ""
        lines.append(
            f"| {label} | {rate} | {r['wall_s']:.1f} | {r['cli_peak_rss_mb']:.0f} | {r['cli_cpu_s']:.1f} | "
            f"{r['server_cpu_s']:.1f} | {r['server_peak_rss_mb']:.0f} |"
        )
    enc = res["encode_only"]
    lines += [
        "",
        f"The service's RSS when it first answered `/health`, before any model: "
        f"{res.get('server_idle_rss_mb', float('nan')):.0f} MB (the compiled kernels and the libraries).",
        "",
        f"Killed (SIGKILL) at seq {first['killed_at_seq']:,}; the run again: {resumed['summary']['new']:,} new, "
        f"{resumed['summary']['already']:,} already learned (answered from the service's idempotency record).",
        "",
        f"The client side alone (read + encode + JSON + keys, no requests, in one process): "
        f"{enc['events_per_s']:,.0f} events/s ({enc['cpu_s']:.1f} CPU s for {enc['events']:,} rows).",
        "",
        f"The model alone (in this process, no HTTP: `learn_many(..., return_proba=True)` of a default tree "
        f"as the service calls it, batches of 1,000, {res['in_process_learning']['events']:,} rows): "
        f"{res['in_process_learning']['events_per_s']:,.0f} events/s.",
        "",
        "| export check | whole file | resumed |",
        "|---|---|---|",
    ]
    for key in ("events", "seqs_1_to_n", "labels_in_file_order"):
        lines.append(f"| {key} | {res['export_full'][key]} | {res['export_resumed'][key]} |")
    lines += ["", "| target | measured | goal | met |", "|---|---:|---:|---|"]
    for key, (value, goal, met) in res["verdicts"].items():
        lines.append(f"| {key} | {value:,.1f} | {goal:,.0f} | {'yes' if met else 'no'} |")
    n = full["summary"]["learned"]
    server_us, cli_us = 1e6 * full["server_cpu_s"] / n, 1e6 * full["cli_cpu_s"] / n
    s = resumed["summary"]
    replay_us = 1e6 * max(0.0, resumed["server_cpu_s"] - s["new"] * server_us / 1e6) / max(1, s["already"])
    lines += [
        "",
        f"Where the time goes (whole file): the service spent {server_us:.1f} µs of CPU per event and the CLI "
        f"{cli_us:.1f} µs. The service is the bound: with a core to itself it would learn at most "
        f"{1e6 / server_us:,.0f} events/s, and the CLI alone encodes {enc['events_per_s']:,.0f} events/s. "
        f"The model itself learns {res['in_process_learning']['events_per_s']:,.0f} events/s of these rows; the "
        f"rest of the service's cost is its request path (JSON, validation, the prequential metrics, the log's "
        f"commit). A chunk answered from the idempotency record on the resumed run cost the service about "
        f"{replay_us:.1f} µs per event.",
    ]
    return "\n".join(lines).rstrip() + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=10_000, help="--batch-size of the CLI (its default: 10000)")
    parser.add_argument("--in-flight", type=int, default=2, help="--in-flight of the CLI (its default: 2)")
    parser.add_argument("--out", default="bulk", help="results name under bench/results (no suffix)")
    args = parser.parse_args()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="bench-bulk-") as tmp:
        tmp_path = Path(tmp)
        csv = tmp_path / "rows.csv"
        labels = make_csv(csv, args.rows)
        config = tmp_path / "config.json"
        config.write_text("{}")
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        server = start_server(tmp_path / "data", port)
        idle_rss_mb = proc_status(server.pid)["VmRSS"] / 1024  # answering /health, before any model
        try:
            with Client(url, timeout=120) as client:
                full = run_cli(learn_cmd(csv, "full", url, config, args.batch, args.in_flight), server.pid)
                full["summary"] = parse_summary(full["stdout"])
                full["events_per_s"] = full["summary"]["learned"] / full["summary"]["seconds"]
                mark = int(0.4 * args.rows)
                cmd = learn_cmd(csv, "resumed", url, config, args.batch, args.in_flight)
                first = run_cli(cmd, server.pid, kill_at=(client, "resumed", mark))
                resumed = run_cli(cmd, server.pid)
                resumed["summary"] = parse_summary(resumed["stdout"])
                resumed["events_per_s"] = resumed["summary"]["learned"] / resumed["summary"]["seconds"]
                export_full = check_export(client, "full", labels)
                export_resumed = check_export(client, "resumed", labels)
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=60)
        enc = encode_only(csv, args.batch)
        alone = in_process_learning(csv, min(args.rows, 200_000))
        csv_mb = csv.stat().st_size / 2**20
    res: dict[str, Any] = run_header(load_before) | {
        "rows": args.rows,
        "server_idle_rss_mb": idle_rss_mb,
        "in_flight": args.in_flight,
        "batch": args.batch,
        "csv_mb": csv_mb,
        "full": full,
        "interrupted": first,
        "resumed": resumed,
        "export_full": export_full,
        "export_resumed": export_resumed,
        "encode_only": enc,
        "in_process_learning": alone,
    }
    exact = export_resumed["events"] == args.rows and export_resumed["labels_in_file_order"]
    res["verdicts"] = {
        "events_per_s": (
            full["events_per_s"],
            TARGETS["events_per_s"],
            full["events_per_s"] >= TARGETS["events_per_s"],
        ),
        "cli_peak_rss_mb": (
            max(full["cli_peak_rss_mb"], resumed["cli_peak_rss_mb"]),
            TARGETS["cli_peak_rss_mb"],
            max(full["cli_peak_rss_mb"], resumed["cli_peak_rss_mb"]) < TARGETS["cli_peak_rss_mb"],
        ),
        "events_after_resume": (float(export_resumed["events"]), float(args.rows), exact),
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{args.out}.json").write_text(json.dumps(res, indent=2, default=float) + "\n")
    (RESULTS / f"{args.out}.md").write_text(report(res))
    print(report(res))


if __name__ == "__main__":
    main()
