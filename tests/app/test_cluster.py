"""One writer and replicas on a real PostgreSQL: real processes, SIGKILL and SIGSTOP.

Every instance is ``streamtree serve`` on the same database. The first to start takes the
writer's lease; the others follow the log and forward writes to it. The tests check that
instances at the same seq predict bit for bit the same, that a killed or stopped writer is
replaced and loses no acknowledged event, that a writer stopped past its lease cannot append
once resumed, that models created or deleted anywhere appear or disappear everywhere, that
delayed labels work through any instance, and that ``min_seq`` reads one's writes.
"""

from __future__ import annotations

import http.client
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.app.conftest import make_stream
from tests.app.test_process import Client, Engine, assert_log_holds, free_port, request, served_equals_fresh, start

pytestmark = pytest.mark.slow

#: Settings of every instance: a short lease, so that a stopped writer is replaced quickly.
FAST = {"lease_seconds": "1.5", "lease_poll_seconds": "0.1", "log_level": "warning"}

PROBES = [x for x, _ in make_stream(25, seed=4242)]


@contextmanager
def instances(tmp_path: Path, url: str, n: int, **env: str) -> Iterator[list[tuple[subprocess.Popen[bytes], int]]]:
    """``n`` instances on database ``url``, started one after the other (the first is the writer)."""
    procs: list[tuple[subprocess.Popen[bytes], int]] = []
    try:
        for i in range(n):
            port = free_port()
            procs.append((start(tmp_path / f"i{i}", port, database_url=url, **(FAST | env)), port))
        yield procs
    finally:
        for proc, _ in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
                proc.kill()
                proc.wait(timeout=30)


def text(port: int, path: str) -> str:
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request("GET", path)
    return c.getresponse().read().decode()


def health(port: int) -> dict[str, Any]:
    status, out = request(port, "GET", "/health")
    assert status == 200, out
    return dict(out)


def wait_until(check: Callable[[], bool], timeout: float, what: str) -> float:
    """Poll ``check`` until it holds; the seconds it took."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        try:
            if check():
                return time.monotonic() - t0
        except OSError:
            pass
        time.sleep(0.02)
    raise AssertionError(f"not within {timeout} s: {what}")


def learn(port: int, events: list[tuple[dict[str, Any], Any]], model: str = "default") -> int:
    status, out = request(
        port, "POST", f"/models/{model}/learn", {"events": [{"features": x, "label": y} for x, y in events]}
    )
    assert status == 200, out
    return int(out["seq"])


def predictions(port: int, model: str = "default") -> tuple[int, Any, list[Any]]:
    """``(seq, batch probabilities, single probabilities)`` on the probes."""
    status, batch = request(port, "POST", f"/models/{model}/predict_proba", {"instances": PROBES})
    assert status == 200, batch
    single = [request(port, "POST", f"/models/{model}/predict_proba", {"features": x})[1] for x in PROBES[:8]]
    assert all(s["seq"] == batch["seq"] for s in single), "the model moved while probing"
    return batch["seq"], batch["probabilities"], [s["probabilities"] for s in single]


def test_instances_converge_bit_identically_and_share_models_labels_and_seqs(tmp_path: Path, pg_url: str) -> None:
    events = make_stream(900, seed=31)
    with instances(tmp_path, pg_url, 2) as [(_, w), (_, r)]:
        assert health(w)["role"] == "writer" and health(r)["role"] == "replica"
        # learns through both: the replica forwards to the writer, which numbers them
        seq = 0
        for i in range(0, 600, 100):
            seq = learn(w if i % 200 else r, events[i : i + 100])
        assert seq == 600
        # read your writes on the replica
        status, out = request(r, "POST", "/predict_proba", {"features": PROBES[0], "min_seq": seq})
        assert status == 200 and out["seq"] >= seq
        wait_until(lambda: health(r)["seq"] == {"default": 600}, 10, "replica at 600")
        assert predictions(w) == predictions(r)
        assert request(r, "GET", "/models/default")[1]["seq"] == 600

        # a model created through the replica exists on both, and learns
        status, out = request(r, "PUT", "/models/forest", {"estimator": "forest", "n_trees": 3, "seed": 7})
        assert status == 201, out
        wait_until(lambda: "forest" in health(w)["seq"] and "forest" in health(r)["seq"], 10, "model on both")
        fseq = learn(r, events[600:800], "forest")
        status, out = request(r, "POST", "/models/forest/predict_proba", {"instances": PROBES, "min_seq": fseq})
        assert status == 200 and out["seq"] == fseq
        assert predictions(w, "forest") == predictions(r, "forest")

        # a delayed label: predicted with an id on the replica, labelled on the replica too
        status, out = request(r, "POST", "/predict_proba", {"features": events[800][0], "id": "order-1"})
        assert status == 200, out
        status, out = request(r, "POST", "/learn", {"id": "order-1", "label": events[800][1]})
        assert status == 200 and out == {"learned": 1, "seq": 601}
        status, out = request(w, "POST", "/learn", {"id": "order-1", "label": events[800][1]})
        assert status == 422, out  # used once

        # min_seq past what exists: bounded wait, then 503 naming the seqs
        status, out = request(r, "POST", "/predict_proba", {"features": PROBES[0], "min_seq": 10_000})
        assert status == 503 and "up to seq 601, not min_seq 10000" in out["detail"]
        status, out = request(r, "POST", "/predict_proba", {"features": PROBES[0], "min_seq": -1})
        assert status == 422 and out["detail"][0]["loc"] == ["body", "min_seq"]

        # a fresh instance with an empty data directory catches up from the database alone
        port = free_port()
        fresh = start(tmp_path / "fresh", port, database_url=pg_url, **FAST)
        try:
            assert health(port) == health(w) | {"role": "replica"}
            assert predictions(port) == predictions(w)
            assert predictions(port, "forest") == predictions(w, "forest")
            # deleted through a replica: gone everywhere
            assert request(port, "DELETE", "/models/forest")[0] == 204
            for p in (w, r, port):
                wait_until(lambda p=p: "forest" not in health(p)["seq"], 10, "model deleted everywhere")
            assert request(r, "GET", "/models/forest")[0] == 404
            metrics = text(port, "/metrics")
            assert 'streamtree_role{role="replica"} 1.0' in metrics
            assert 'streamtree_replica_lag_events{model="default"} 0.0' in metrics
        finally:
            fresh.kill()
            fresh.wait(timeout=30)


def learns_counted(port: int) -> float:
    """Learn requests the instance answered 200 (its Prometheus counter)."""
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text(port, "/metrics").splitlines()
        if line.startswith("streamtree_http_requests_total{") and 'route="/learn"' in line and 'status="200"' in line
    )


def test_concurrent_small_learns_through_a_replica_are_merged_and_each_answered_as_its_own(
    tmp_path: Path, pg_url: str
) -> None:
    events = make_stream(240, seed=77)
    bad = {"features": {"x0": "a" * 10_000}, "label": events[0][1]}  # longer than max_string_length
    with instances(tmp_path, pg_url, 2) as [(_, w), (_, r)]:
        answers: dict[int, tuple[int, Any]] = {}

        def client(t: int) -> None:
            conn = http.client.HTTPConnection("127.0.0.1", r, timeout=30)
            for i in range(t, len(events), 8):
                x, y = events[i]
                answers[i] = request(r, "POST", "/learn", {"features": x, "label": y}, conn=conn)
                if i == 101:
                    answers[-1] = request(r, "POST", "/learn", bad, conn=conn)

        before = learns_counted(w)
        threads = [threading.Thread(target=client, args=(t,)) for t in range(8)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(timeout=120)
        status, out = answers.pop(-1)
        assert status == 422 and out["detail"][0]["loc"] == ["body", "features", "x0"], out
        assert all(status == 200 and out["learned"] == 1 for status, out in answers.values())
        seqs = {out["seq"]: i for i, (_, out) in answers.items()}
        assert sorted(seqs) == list(range(1, len(events) + 1))  # each its own seq, none lost or shared
        # each answered seq is that learn's event in the log
        status, out = request(w, "GET", f"/models/default/events?after=0&limit={len(events)}")
        assert status == 200
        assert {e["seq"]: (e["features"], e["label"]) for e in out["events"]} == {
            seq: tuple(events[i]) for seq, i in seqs.items()
        }
        # fewer requests reached the writer than learns were sent: merged
        assert 0 < learns_counted(w) - before < len(events)


def test_a_replica_forwards_idempotency_after_so_the_writer_keeps_the_order(tmp_path: Path, pg_url: str) -> None:
    events = make_stream(20, seed=78)

    def body(part: list[tuple[dict[str, Any], Any]]) -> dict[str, Any]:
        return {"events": [{"features": x, "label": y} for x, y in part]}

    with instances(tmp_path, pg_url, 2) as [(_, w), (_, r)]:
        answers: dict[str, tuple[int, Any]] = {}
        second = threading.Thread(
            target=lambda: answers.update(
                b=request(
                    r, "POST", "/learn", body(events[10:]), headers={"Idempotency-Key": "b", "Idempotency-After": "a"}
                )
            )
        )
        second.start()
        time.sleep(0.5)
        assert second.is_alive(), "the writer holds the second request until the first is learned"
        answers["a"] = request(r, "POST", "/learn", body(events[:10]), headers={"Idempotency-Key": "a"})
        second.join(timeout=30)
        assert answers == {"a": (200, {"learned": 10, "seq": 10}), "b": (200, {"learned": 10, "seq": 20})}
        status, out = request(w, "GET", "/models/default/events?after=0&limit=20")
        assert status == 200 and [e["label"] for e in out["events"]] == [y for _, y in events]


def test_sigkill_of_the_writer_under_load_loses_no_acknowledged_event(tmp_path: Path, pg_url: str) -> None:
    engine = Engine(tmp_path, pg_url)
    with instances(tmp_path, pg_url, 2, snapshot_every="500") as [(writer, w), (_, r)]:
        clients = [Client(w if t % 2 else r, t, n=20_000) for t in range(6)]
        for c in clients:
            c.start()
        time.sleep(3.0)
        writer.send_signal(signal.SIGKILL)  # the clients of the writer stop, those of the replica go on
        writer.wait(timeout=30)
        took = wait_until(lambda: health(r)["role"] == "writer", 10, "the replica takes over")
        time.sleep(1.5)  # the replica's clients go on through the failover
        on_replica = [c for c in clients if c.port == r]
        before = sum(len(c.acked) for c in on_replica)
        time.sleep(1.5)
        assert sum(len(c.acked) for c in on_replica) > before, "the new writer does not learn"
        for c in clients:
            c.stop.set()
        for c in clients:
            c.join(timeout=60)

        acked = {seq: e for c in clients for seq, e in c.acked.items()}
        assert len(acked) > 200, "too little load to mean anything"
        not_json = [answer for c in clients for answer in c.not_json]  # (status, body): reported, not judged
        assert all(s < 500 or s == 503 for c in clients for s in c.statuses), f"non-JSON answers: {not_json}"
        log = engine.log()
        assert_log_holds(log, health(r)["seq"]["default"], acked)
        served_equals_fresh(r, log)
        print(f"failover after SIGKILL: {took:.2f} s; {len(acked)} acknowledged events")

        # the killed writer, restarted, comes back as a replica and catches up
        port = free_port()
        again = start(tmp_path / "again", port, database_url=pg_url, **FAST)
        try:
            assert health(port)["role"] == "replica"
            assert health(port)["seq"] == health(r)["seq"]
            assert predictions(port) == predictions(r)
        finally:
            again.kill()
            again.wait(timeout=30)


def test_a_writer_stopped_past_its_lease_cannot_append_after_it_resumes(tmp_path: Path, pg_url: str) -> None:
    engine = Engine(tmp_path, pg_url)
    events = make_stream(400, seed=41)
    with instances(tmp_path, pg_url, 2) as procs:
        [(writer, w), (_, r)] = procs
        learn(w, events[:100])
        writer.send_signal(signal.SIGSTOP)  # its database sessions stay open
        # a learn sent to the stopped writer waits in its socket until it resumes
        late: dict[str, Any] = {}
        sender = threading.Thread(
            target=lambda: late.update(
                answer=request(
                    w, "POST", "/learn", {"events": [{"features": x, "label": y} for x, y in events[100:110]]}
                )
            )
        )
        sender.start()
        # one through the replica: forwarded to the stopped writer, given up once the lease passes
        t0 = time.monotonic()
        status, out = request(r, "POST", "/learn", {"features": events[299][0], "label": events[299][1]})
        assert status == 503 and "may or may not have been learned" in out["detail"], (status, out)
        assert time.monotonic() - t0 < 5, "the forwarded request waited past the failover"
        took = wait_until(lambda: health(r)["role"] == "writer", 10, "the replica takes over")
        assert learn(r, events[110:200]) == 190
        writer.send_signal(signal.SIGCONT)
        sender.join(timeout=60)
        status, out = late["answer"]
        # forwarded to the new writer (learned under its numbering), or refused: never appended by the old one
        assert (status == 200 and out == {"learned": 10, "seq": 200}) or status == 503, (status, out)
        wait_until(lambda: health(w)["role"] == "replica", 10, "the old writer steps down")
        # writes sent to the old writer now go to the new one
        expected = 190 + 10 * (status == 200) + 50
        assert learn(w, events[300:350]) == expected
        log = engine.log()
        assert [s for s, _ in log] == list(range(1, expected + 1))
        wait_until(lambda: health(w)["seq"]["default"] == expected, 10, "the old writer catches up")
        assert predictions(w) == predictions(r)
        served_equals_fresh(r, log)
        print(f"failover after SIGSTOP: {took:.2f} s")

        # a clean stop of the writer hands the lease over at once (well within a lease)
        new_writer = next(proc for proc, port in procs if port == r)
        new_writer.send_signal(signal.SIGTERM)
        assert new_writer.wait(timeout=60) == 0
        handover = wait_until(lambda: health(w)["role"] == "writer", 10, "the old writer takes the lease back")
        assert handover < 1.0, handover
        assert learn(w, events[350:360]) == expected + 10


def test_an_instance_that_cannot_rebuild_a_model_starts_but_leaves_the_lease_to_one_that_can(
    tmp_path: Path, pg_url: str
) -> None:
    """Issue 32: a writer whose model was unavailable took the lease anyway. Here instance B
    may not read the events' text (a database role without that column), so it cannot rebuild
    any model: it starts, answers 503 saying why, and when the writer dies it leaves the lease
    to C, which serves every model, although B polls forty times as often."""
    events = make_stream(300, seed=51)
    with instances(tmp_path, pg_url, 1) as [(writer, w)]:
        learn(w, events[:200])
        with psycopg.connect(pg_url, autocommit=True) as conn:
            for sql in [
                "CREATE ROLE limited LOGIN",
                "GRANT CREATE, USAGE ON SCHEMA public TO limited",
                "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO limited",
                "GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO limited",
                "REVOKE SELECT ON streamtree_events FROM limited",
                "GRANT SELECT (model, seq, n, logged_at, idempotency_key) ON streamtree_events TO limited",
            ]:
                conn.execute(sql)
        b, c = free_port(), free_port()
        limited_url = pg_url.replace("postgresql://postgres@", "postgresql://limited@", 1)
        procs = [
            start(
                tmp_path / "b",
                b,
                database_url=limited_url,
                **(FAST | {"lease_seconds": "3", "lease_poll_seconds": "0.05"}),
            ),
            start(tmp_path / "c", c, database_url=pg_url, **(FAST | {"lease_seconds": "3", "lease_poll_seconds": "2"})),
        ]
        try:
            status, out = request(b, "POST", "/predict_proba", {"features": events[0][0]})
            assert status == 503 and out["detail"].startswith(
                "Model 'default' is unavailable: its event log could not be read from the store"
            ), out
            assert health(b)["role"] == "replica" and health(c)["role"] == "replica"
            assert learn(w, events[200:210]) == 210
            writer.send_signal(signal.SIGKILL)  # its session ends: the lease is free at once
            writer.wait(timeout=30)
            wait_until(lambda: health(c)["role"] == "writer", 20, "C takes the lease")
            assert health(b)["role"] == "replica"
            assert learn(c, events[210:220]) == 220
            time.sleep(4.0)  # past a lease and more: C keeps it, B never takes it
            assert health(b)["role"] == "replica" and health(c)["role"] == "writer"
            assert learn(b, events[220:230]) == 230  # B forwards writes to C
        finally:
            for proc in procs:
                proc.kill()
                proc.wait(timeout=30)
