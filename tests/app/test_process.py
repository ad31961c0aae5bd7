"""The real process: ``streamtree serve`` under concurrent clients, SIGKILL mid-load, restart.

After a SIGKILL at an arbitrary moment, every acknowledged event must be in the log under
the sequence number it was acknowledged with, the log must be gap-free, and the restarted
model must equal, prediction for prediction, a fresh model fed the logged events in order
(events committed whose acknowledgement the kill cut off may be there too: they were sent).
SIGTERM must exit cleanly after writing a snapshot.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from streamtree import ProbabilityTree

from app.storage import DB_NAME
from tests.app.conftest import batch_proba, make_stream

pytestmark = pytest.mark.slow

EXE = Path(sys.executable).parent / "streamtree"
#: The checkout under test: the server imports its ``app`` and ``streamtree`` first, whichever
#: checkout the virtual environment was installed from (a git worktree shares one).
ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start(data_dir: Path, port: int, **env: str) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen([str(EXE), "serve", "--data-dir", str(data_dir), "--host", "127.0.0.1",
                             "--port", str(port), "--log-level", "warning"],
                            env=os.environ | {"PYTHONPATH": str(ROOT)} | {f"STREAMTREE_{k.upper()}": v for k, v in env.items()})
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert proc.poll() is None, "server exited during start"
        try:
            status, _ = request(port, "GET", "/health")
            if status == 200:
                return proc
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise AssertionError("server did not become healthy")


def request(port: int, method: str, path: str, body: Any = None,
            conn: http.client.HTTPConnection | None = None) -> tuple[int, Any]:
    c = conn or http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    payload = None if body is None else json.dumps(body)
    c.request(method, path, body=payload, headers={"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    if conn is None:
        c.close()
    return r.status, json.loads(data) if data else None


class Client(threading.Thread):
    """Mixes single learns, batches of 5 and predictions until the server goes away."""

    def __init__(self, port: int, tid: int) -> None:
        super().__init__(daemon=True)
        self.port, self.tid = port, tid
        self.events = [({"tid": tid, "k": k} | x, y) for k, (x, y) in enumerate(make_stream(4000, seed=100 + tid))]
        self.acked: dict[int, tuple[dict[str, Any], Any]] = {}
        self.sent: list[tuple[dict[str, Any], Any]] = []
        self.statuses: list[int] = []

    def run(self) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        i = step = 0
        try:
            while i < len(self.events) - 5:
                step += 1
                if step % 3 == 0:
                    status, _ = request(self.port, "POST", "/predict_proba", {"features": self.events[i][0]}, conn)
                    self.statuses.append(status)
                    continue
                n = 5 if step % 2 else 1
                chunk = self.events[i:i + n]
                i += n
                body = ({"events": [{"features": x, "label": y} for x, y in chunk]} if n > 1
                        else {"features": chunk[0][0], "label": chunk[0][1]})
                self.sent.extend(chunk)
                status, out = request(self.port, "POST", "/learn", body, conn)
                self.statuses.append(status)
                if status == 200:
                    for j, event in enumerate(chunk):
                        self.acked[out["seq"] - n + 1 + j] = event
        except (OSError, http.client.HTTPException):
            return  # the server was killed


def read_log(data_dir: Path) -> list[tuple[int, dict[str, Any]]]:
    with sqlite3.connect(data_dir / DB_NAME) as db:
        rows = db.execute("SELECT seq, event FROM events WHERE model='default' ORDER BY seq").fetchall()
    # each event also holds its arrival time "t" (for the metrics history); compare the rest
    return [(seq, {k: v for k, v in json.loads(text).items() if k != "t"}) for seq, text in rows]


def served_equals_fresh(port: int, log: list[tuple[int, dict[str, Any]]]) -> None:
    config = request(port, "GET", "/models/default")[1]["config"]
    fresh = ProbabilityTree(**config)
    for _, e in log:
        fresh.learn_one(e["x"], e["y"])
    probes = [{"tid": 0, "k": 0} | x for x, _ in make_stream(40, seed=999)]
    status, out = request(port, "POST", "/predict_proba", {"instances": probes})
    assert status == 200 and out["probabilities"] == batch_proba(fresh, probes)
    for x in probes[:10]:
        served = request(port, "POST", "/predict_proba", {"features": x})[1]["probabilities"]
        assert served == fresh.predict_proba_one(x)
    assert request(port, "GET", "/models/default")[1]["summary"]["n_examples"] == len(log)


def test_sigkill_mid_load_loses_no_acknowledged_event(tmp_path: Path) -> None:
    data_dir, port = tmp_path / "data", free_port()
    proc = start(data_dir, port, snapshot_every="300")
    clients = [Client(port, t) for t in range(6)]
    for c in clients:
        c.start()
    time.sleep(2.5)
    assert all(c.is_alive() for c in clients), "clients ran out of events before the kill"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    for c in clients:
        c.join(timeout=30)

    acked = {seq: e for c in clients for seq, e in c.acked.items()}
    statuses = [s for c in clients for s in c.statuses]
    assert len(acked) > 100, "too little load before the kill to mean anything"
    assert all(s < 500 for s in statuses), sorted(set(statuses))

    proc = start(data_dir, port, snapshot_every="300")
    try:
        seq = request(port, "GET", "/models/default")[1]["seq"]
        log = read_log(data_dir)
        assert [s for s, _ in log] == list(range(1, seq + 1)), "gap or extra event in the log"
        for s, (x, y) in acked.items():
            assert log[s - 1][1] == {"x": x, "y": y}, f"acknowledged event {s} changed or lost"
        sent = {json.dumps({"x": x, "y": y}, sort_keys=True) for c in clients for x, y in c.sent}
        for s, e in log:
            assert s in acked or json.dumps(e, sort_keys=True) in sent
        served_equals_fresh(port, log)

        # SIGTERM: graceful, with a snapshot of the final state.
        status, out = request(port, "POST", "/learn", {"features": {"tid": 9, "k": 0, "a": 1.0}, "label": "low"})
        assert status == 200 and out["seq"] == seq + 1
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
        with sqlite3.connect(data_dir / DB_NAME) as db:
            assert db.execute("SELECT MAX(seq) FROM snapshots WHERE model='default'").fetchone()[0] == seq + 1
        proc = start(data_dir, port)
        served_equals_fresh(port, read_log(data_dir))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
