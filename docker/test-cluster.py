"""The compose deployment's topology with the real image: PostgreSQL, a writer and two replicas
of the image behind ``docker/haproxy.cfg``; learns through the balancer, convergence, the
writer killed, the killed one back as a replica.

Run by ``docker/test-image.sh`` once it has built the image (its engine's ``DOCKER_HOST`` in
the environment), with the repository's virtualenv::

    .venv/bin/python docker/test-cluster.py IMAGE NAME_PREFIX

No registry can be reached on these machines, so the images compose.yaml pulls for PostgreSQL
and HAProxy cannot be; their programs come from the host instead (Debian's ``postgresql``, a
throwaway cluster as in the tests, ``tests/pg.py``; Debian's ``haproxy`` with compose's
config, servers on loopback ports, ``tests/app/test_load_balancer.py``). Everything else is
compose's: the image and its HEALTHCHECK, the environment compose gives each instance, the
start order (the first instance healthy before the others start), a fresh ``/data`` volume
each. Containers use the host's network (no bridge here), so each listens on its own port.
"""

from __future__ import annotations

import http.client
import json
import random
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.app.test_load_balancer import local_config  # noqa: E402
from tests.app.test_process import free_port  # noqa: E402
from tests.pg import start_cluster, stop_cluster  # noqa: E402

DOCKER = "/usr/bin/docker"


def log(message: str) -> None:
    print(f"[test-cluster {time.strftime('%H:%M:%S', time.gmtime())}] {message}", flush=True)


def docker(*args: str) -> str:
    out = subprocess.run([DOCKER, *args], capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        raise RuntimeError(f"docker {' '.join(args)}: {out.stderr.strip()}")
    return out.stdout.strip()


def request(port: int, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    """One request on loopback: ``(status, JSON body)``, or the body's text when it is not
    JSON (HAProxy's own 502/503 pages)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request(
            method, path, body=None if body is None else json.dumps(body), headers={"Content-Type": "application/json"}
        )
        r = conn.getresponse()
        data = r.read()
    finally:
        conn.close()
    try:
        return r.status, json.loads(data) if data else None
    except ValueError:
        return r.status, data.decode(errors="replace")


def listening(port: int) -> bool:
    socket.create_connection(("127.0.0.1", port), timeout=1).close()
    return True


def wait_until(check: Callable[[], bool], timeout: float, what: str) -> float:
    """Poll ``check`` until true; the seconds it took (an error naming ``what`` past ``timeout``)."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        try:
            if check():
                return time.monotonic() - start
        except (OSError, RuntimeError, ValueError):
            pass
        time.sleep(0.1)
    raise AssertionError(f"{what}: not within {timeout} s")


def healthy(name: str) -> bool:
    return docker("inspect", "--format", "{{.State.Health.Status}}", name) == "healthy"


def health(port: int) -> dict[str, Any]:
    status, out = request(port, "GET", "/health")
    if status != 200:
        raise RuntimeError(f"/health {status}")
    return dict(out)


def events(n: int, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        a, b = rng.gauss(0, 1), rng.choice(["x", "y", "z"])
        out.append({"features": {"a": a, "b": b}, "label": "hi" if a + 0.5 * (b == "x") > 0.2 else "lo"})
    return out


def learn_through(lb: int, batch: list[dict[str, Any]], timeout: float = 20.0) -> int:
    """Learn ``batch`` through the balancer as a client would, sending again what it refused
    (502/503: no instance could take it, nothing was learned); the seq of the answer."""
    deadline = time.monotonic() + timeout
    while True:
        status, out = request(lb, "POST", "/learn", {"events": batch})
        if status == 200:
            return int(out["seq"])
        assert status in (502, 503), (status, out)
        assert time.monotonic() < deadline, f"learns through the balancer refused for {timeout} s: {out}"
        time.sleep(0.2)


def state(port: int, seq: int) -> str:
    """Predictions of the default model on one instance once it has applied ``seq``."""
    probes = [e["features"] for e in events(30, 99)]
    status, out = request(port, "POST", "/predict_proba", {"instances": probes, "min_seq": seq})
    assert status == 200 and out["seq"] == seq, (port, status, out)
    return json.dumps(out["probabilities"], sort_keys=True)


def main() -> None:
    image, prefix = sys.argv[1], sys.argv[2]
    haproxy_exe = "/usr/sbin/haproxy"
    cluster = start_cluster()
    names = [f"{prefix}-{k}" for k in (1, 2, 3)]
    ports = [free_port() for _ in names]
    lb = free_port()
    haproxy = None
    try:
        url = cluster.create_database()

        def run(k: int) -> None:
            docker(
                "run",
                "-d",
                "--name",
                names[k],
                "--network",
                "host",
                "--health-interval",
                "1s",
                "--health-start-period",
                "60s",
                "-v",
                "/data",
                "-e",
                "STREAMTREE_HOST=127.0.0.1",
                "-e",
                f"STREAMTREE_PORT={ports[k]}",
                "-e",
                f"STREAMTREE_DATABASE_URL={url}",
                "-e",
                "STREAMTREE_LEASE_SECONDS=3",
                "-e",
                f"STREAMTREE_ADVERTISE_URL=http://127.0.0.1:{ports[k]}",
                image,
            )

        run(0)
        wait_until(lambda: healthy(names[0]), 180, f"{names[0]} healthy")
        for k in (1, 2):
            run(k)
        for name in names[1:]:
            wait_until(partial(healthy, name), 180, f"{name} healthy")
        roles = [health(p)["role"] for p in ports]
        assert roles == ["writer", "replica", "replica"], roles
        log(f"three instances of {image} healthy on one database: {roles}")

        cfg = Path(cluster.root) / "haproxy.cfg"
        cfg.write_text(local_config(ports, lb))
        haproxy = subprocess.Popen(
            [haproxy_exe, "-db", "-f", str(cfg)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        wait_until(lambda: listening(lb), 10, "haproxy listening")
        time.sleep(2.5)  # its first health checks

        stream = events(1200, 1)
        seqs = [learn_through(lb, stream[i : i + 50]) for i in range(0, 900, 50)]
        assert seqs == list(range(50, 901, 50)), seqs  # round robin: two of three forwarded, none lost
        same = {state(p, 900) for p in ports}
        assert len(same) == 1, "instances at the same seq predict differently"
        log("900 events learned through the balancer; all three at seq 900, predictions identical")

        docker("kill", "-s", "KILL", names[0])
        took = wait_until(
            lambda: any(health(p)["role"] == "writer" for p in ports[1:]), 10, "a replica takes the writer's lease"
        )
        log(f"writer killed; a replica took over after {took:.2f} s")
        seqs = [learn_through(lb, stream[i : i + 50]) for i in range(900, 1200, 50)]
        assert seqs == list(range(950, 1201, 50)), seqs
        docker("start", names[0])
        wait_until(lambda: healthy(names[0]), 180, f"{names[0]} healthy again")
        assert health(ports[0])["role"] == "replica", "the killed writer did not come back as a replica"
        same = {state(p, 1200) for p in ports}
        assert len(same) == 1, "instances at seq 1200 predict differently after the failover"
        log(
            "300 more learned after the failover; the killed instance is back as a replica; "
            "all three at seq 1200, predictions identical"
        )
    except BaseException:
        for name in names:
            try:
                print(
                    f"--- {name} ---\n"
                    + "\n".join(
                        subprocess.run(
                            [DOCKER, "logs", name], capture_output=True, text=True, timeout=60
                        ).stderr.splitlines()[-25:]
                    )
                )
            except Exception:  # noqa: BLE001 - best effort diagnostics
                pass
        raise
    finally:
        if haproxy is not None:
            haproxy.terminate()
            haproxy.wait(timeout=30)
        for name in names:
            subprocess.run([DOCKER, "rm", "-f", "-v", name], capture_output=True, timeout=120)
        stop_cluster(cluster)


if __name__ == "__main__":
    main()
