"""A fork with a writer and a replica on a real PostgreSQL: the writer makes it learn, the
replica follows the fork's own log like any model's, and after the writer is killed the new
writer resumes it where its log ends."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest

from tests.app.conftest import make_stream
from tests.app.test_cluster import health, instances, learn, predictions, wait_until
from tests.app.test_process import request

pytestmark = pytest.mark.slow

FOREST = {"estimator": "forest", "n_trees": 3, "seed": 5}


def fork_of(port: int, name: str = "forest") -> dict[str, Any]:
    status, out = request(port, "GET", f"/models/{name}")
    assert status == 200, out
    return dict(out["fork"])


def log_of(port: int, name: str) -> list[Any]:
    status, out = request(port, "GET", f"/models/{name}/events?limit=10000")
    assert status == 200, out
    return list(out["events"])


def test_a_fork_on_a_writer_and_a_replica_and_through_a_failover(tmp_path: Path, pg_url: str) -> None:
    events = make_stream(900, seed=8)
    with instances(tmp_path, pg_url, 2) as [(writer, w), (_, r)]:
        assert learn(w, events[:500]) == 500
        status, out = request(r, "PUT", "/models/forest", {"config": FOREST, "from": "default"})  # forwarded
        assert status == 201, out
        wait_until(lambda: fork_of(w)["seq"] == 500 and fork_of(w)["state"] == "following", 60, "fork caught up")
        wait_until(lambda: health(r)["seq"].get("forest") == 500, 30, "replica holds the fork's log")
        assert fork_of(r) == {"from": "default", "seq": 500, "source_seq": 500, "state": "following"}
        assert predictions(w, "forest") == predictions(r, "forest")

        status, out = request(r, "POST", "/models/forest/learn", {"features": {"a": 1.0}, "label": "low"})
        assert status == 409 and out["source"] == "default", out  # the writer's answer, forwarded
        assert request(r, "DELETE", "/models/default")[1]["forks"] == ["forest"]

        learn(r, events[500:700])
        wait_until(lambda: fork_of(w)["seq"] == 700, 60, "the fork follows")
        writer.send_signal(signal.SIGKILL)
        writer.wait(timeout=30)
        wait_until(lambda: health(r)["role"] == "writer", 30, "the replica takes over")
        assert learn(r, events[700:900]) == 900
        wait_until(lambda: fork_of(r)["seq"] == 900, 60, "the new writer resumes the fork")
        assert log_of(r, "forest") == log_of(r, "default")
        assert [e["seq"] for e in log_of(r, "forest")] == list(range(1, 901))
