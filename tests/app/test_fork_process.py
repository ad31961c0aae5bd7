"""A fork across real restarts of ``streamtree serve``: SIGKILL while it follows its source
under load, then SIGTERM; each time it resumes where its own log ends and catches up, so its
log stays the source's, event for event (nothing learned twice or skipped), and it predicts
what a fresh model of its config fed those events predicts.
"""

from __future__ import annotations

import http.client
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from streamtree.estimators import ESTIMATORS
from tests.app.conftest import batch_proba, make_stream
from tests.app.test_process import free_port, request, start

pytestmark = pytest.mark.slow

FOREST = {"estimator": "forest", "n_trees": 3, "seed": 3, "tree": {"grace_period": 50}}


def log_of(port: int, name: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    while True:
        status, body = request(port, "GET", f"/models/{name}/events?after={len(out)}&limit=5000")
        assert status == 200, body
        if not body["events"]:
            return out
        out += body["events"]


def caught_up(port: int, name: str, deadline_s: float = 120.0) -> dict[str, Any]:
    """The fork's progress once it holds every event its source logged (a bound for a broken fork only)."""
    end = time.monotonic() + deadline_s
    while True:
        fork = request(port, "GET", f"/models/{name}")[1]["fork"]
        if fork["state"] == "following" and fork["seq"] == fork["source_seq"]:
            return fork
        assert fork["state"] != "stopped", fork
        assert time.monotonic() < end, fork
        time.sleep(0.05)


class Feeder(threading.Thread):
    """Learns batches of 20 events into ``default`` until stopped or the server goes away."""

    def __init__(self, port: int) -> None:
        super().__init__(daemon=True)
        self.port, self.stop = port, threading.Event()
        self.events = make_stream(20_000, seed=21)

    def run(self) -> None:
        for i in range(0, len(self.events), 20):
            if self.stop.is_set():
                return
            body = {"events": [{"features": x, "label": y} for x, y in self.events[i : i + 20]]}
            try:
                request(self.port, "POST", "/learn", body)
            except (OSError, http.client.HTTPException):  # a server killed mid-answer: IncompleteRead
                return


def assert_fork_is_its_source_log(port: int) -> None:
    log = log_of(port, "forest")
    assert [e["seq"] for e in log] == list(range(1, len(log) + 1))
    assert log == log_of(port, "default")
    fresh = ESTIMATORS(**FOREST)
    for e in log:
        fresh.learn_one(e["features"], e["label"])
    probes = [x for x, _ in make_stream(30, seed=77)]
    status, out = request(port, "POST", "/models/forest/predict_proba", {"instances": probes})
    assert status == 200 and out["probabilities"] == batch_proba(fresh, probes)


def test_a_fork_survives_sigkill_and_sigterm(tmp_path: Path) -> None:
    data_dir, port = tmp_path / "data", free_port()
    proc = start(data_dir, port, snapshot_every="400")
    try:
        for i in range(0, 2000, 200):
            body = {"events": [{"features": x, "label": y} for x, y in make_stream(2000)[i : i + 200]]}
            assert request(port, "POST", "/learn", body)[0] == 200
        status, out = request(port, "PUT", "/models/forest", {"config": FOREST, "from": "default"})
        assert status == 201, out
        feeder = Feeder(port)
        feeder.start()
        caught_up(port, "forest")  # replayed, now following under load
        time.sleep(1.0)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        feeder.join(timeout=30)

        proc = start(data_dir, port, snapshot_every="400")
        fork = caught_up(port, "forest")
        assert fork["seq"] > 2000
        assert_fork_is_its_source_log(port)

        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
        proc = start(data_dir, port)
        assert (
            request(port, "GET", "/models/forest")[1]["fork"]["seq"] == fork["seq"]
        )  # restored (its snapshot at the stop)
        assert request(port, "POST", "/learn", {"features": {"a": 0.3, "colour": "red"}, "label": "low"})[0] == 200
        assert caught_up(port, "forest")["seq"] == fork["seq"] + 1
        assert_fork_is_its_source_log(port)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
