"""The compose file's load balancer, run for real: ``docker/haproxy.cfg`` in front of two
instances on one PostgreSQL, with only the servers' addresses changed to loopback ports (no
container network here). Learns and predictions through it reach both instances, and after
the writer is killed they go on through the survivor."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from tests.app.test_cluster import FAST, health, wait_until
from tests.app.test_process import free_port, request, start

DOCKER = Path(__file__).resolve().parents[2] / "docker"

pytestmark = pytest.mark.slow


def local_config(ports: list[int], listen: int) -> str:
    """``docker/haproxy.cfg`` with its servers on loopback ports, its frontend on ``listen``,
    no container DNS and no log target (there is no syslog here)."""
    config = (DOCKER / "haproxy.cfg").read_text()
    servers = re.findall(r"^(\s*server (\S+) )(\S+)$", config, flags=re.M)
    assert len(servers) >= len(ports)
    for (prefix, _, address), port in zip(servers, ports, strict=False):
        config = config.replace(prefix + address, prefix + f"127.0.0.1:{port}")
    for prefix, _, address in servers[len(ports) :]:
        config = config.replace(prefix + address + "\n", "")
    config = config.replace("bind :8000", f"bind 127.0.0.1:{listen}")
    config = re.sub(r"^resolvers docker\n([ \t]+.*\n)+", "", config, flags=re.M)
    config = config.replace(" resolvers docker init-addr last,libc,none", "")
    return config.replace("    log stdout format raw local0 info\n", "").replace("    log global\n", "")


def test_learns_go_through_haproxy_to_both_instances_and_survive_the_writer(tmp_path: Path, pg_url: str) -> None:
    exe = shutil.which("haproxy")
    if exe is None:
        pytest.skip("haproxy is not installed")
    ports = [free_port(), free_port()]
    procs = [start(tmp_path / f"i{k}", port, database_url=pg_url, **FAST) for k, port in enumerate(ports)]
    lb = free_port()
    cfg = tmp_path / "haproxy.cfg"
    cfg.write_text(local_config(ports, lb))
    haproxy = subprocess.Popen([exe, "-db", "-f", str(cfg)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        wait_until(lambda: socket.create_connection(("127.0.0.1", lb), timeout=1).close() is None, 10, "haproxy up")
        time.sleep(2.5)  # the first health checks
        seqs = []
        for i in range(10):  # round robin: half of them reach the replica, which forwards them
            status, out = request(lb, "POST", "/learn", {"features": {"a": float(i)}, "label": "x" if i % 2 else "y"})
            assert status == 200, out
            seqs.append(out["seq"])
        assert seqs == list(range(1, 11))
        status, out = request(lb, "POST", "/predict_proba", {"features": {"a": 1.0}, "min_seq": 10})
        assert status == 200 and out["seq"] == 10
        procs[0].send_signal(signal.SIGKILL)  # the writer
        procs[0].wait(timeout=30)
        wait_until(lambda: health(ports[1])["role"] == "writer", 10, "the replica takes over")
        learned = 0
        deadline = time.monotonic() + 15
        while learned < 10 and time.monotonic() < deadline:  # a client retrying what the balancer refuses
            status, out = request(lb, "POST", "/learn", {"features": {"a": 0.5}, "label": "x"})
            if status == 200:
                learned += 1
                assert out["seq"] == 10 + learned
            else:
                assert status in (502, 503), (status, out)
                time.sleep(0.2)
        assert learned == 10, "learns through the balancer did not resume after the failover"
    finally:
        haproxy.send_signal(signal.SIGTERM)
        haproxy.wait(timeout=30)
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=30)
        if os.environ.get("STREAMTREE_SHOW_HAPROXY") and haproxy.stdout is not None:
            print(haproxy.stdout.read().decode())
