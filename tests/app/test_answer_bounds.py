"""What one request may make the server hold: an answer's values (``max_answer_values``), an
answer its client does not read (``send_stall_seconds``), and the bodies of the requests in
the server together (``max_held_body_bytes``; the middleware alone: ``test_body_limit.py``)."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from typing import Any

import pytest

from streamtree.estimators import ESTIMATORS
from tests.app.test_process import free_port, request, start

LABELS = [f"l{i}" for i in range(10)]
COSTS = {"a": dict.fromkeys(LABELS, 1.0), "b": dict.fromkeys(LABELS, 2.0)}


def learn_labels(client: Any, path: str, labels: list[str]) -> None:
    events = [{"features": {"x": float(i)}, "label": y} for i, y in enumerate(labels)]
    assert client.post(path, json={"events": events}).status_code == 200


@pytest.mark.parametrize(
    "config", [None, {"estimator": "forest", "n_trees": 100, "seed": 1}], ids=["tree", "forest-paced"]
)
def test_an_answer_over_max_answer_values_is_422_naming_how_many_instances_fit(running, config) -> None:  # type: ignore[no-untyped-def]
    # 10,000 instances of a 1,000-label model were answered whole: 113 MiB, 745 MiB more at its
    # peak. A forest of 100 trees predicts 150 instances in stretches (the check under the lock)
    with running(max_answer_values=1_000) as client:
        base = "/models/m" if config else ""
        if config:
            assert client.put("/models/m", json=config).status_code == 201
        assert client.post(f"{base}/predict_proba", json={"instances": [{"x": 1.0}] * 150}).status_code == 200
        learn_labels(client, f"{base}/learn", LABELS)
        instances = [{"x": float(i)} for i in range(150)]
        r = client.post(f"{base}/predict_proba", json={"instances": instances})
        assert r.status_code == 422, r.text
        (error,) = r.json()["detail"]
        assert error["loc"] == ["body", "instances"] and error["type"] == "too_long"
        assert error["msg"] == (
            "The answer would hold 150 instances x 10 values (10 labels) = 1,500 values, over 1,000 on "
            "this service (setting max_answer_values): send at most 100 instances a request"
        )
        r = client.post(f"{base}/predict_proba", json={"instances": instances[:100]})
        assert r.status_code == 200 and len(r.json()["probabilities"]) == 100
        # a decision's answer also holds an expected cost per decision: 12 values an instance
        r = client.post(f"{base}/decide", json={"instances": instances[:84], "costs": COSTS})
        assert r.status_code == 422 and "at most 83 instances" in r.json()["detail"][0]["msg"], r.text
        r = client.post(f"{base}/decide", json={"instances": instances[:83], "costs": COSTS})
        assert r.status_code == 200 and len(r.json()["decisions"]) == 83
        assert client.post(f"{base}/predict_proba", json={"features": {"x": 1.0}}).status_code == 200


@pytest.mark.slow
def test_an_answer_its_client_does_not_read_is_cut_off_after_send_stall_seconds(tmp_path: Path) -> None:
    # a client that asked for megabytes and read none of them held them in the server's
    # memory until it closed its connection, which it need never do
    port = free_port()
    log = tmp_path / "server.log"
    with open(log, "wb") as stderr:
        proc = start(tmp_path / "data", port, stderr=stderr, send_stall_seconds="1")
    try:
        labels = [f"label-{i}" for i in range(60)]
        events = [{"features": {"x": float(i)}, "label": y} for i, y in enumerate(labels)]
        assert request(port, "POST", "/learn", {"events": events})[0] == 200
        body = json.dumps({"instances": [{"x": float(i % 60)} for i in range(10_000)]}).encode()
        head = f"POST /predict_proba HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"

        def ask() -> socket.socket:
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)  # set before connect to count
            s.settimeout(30)
            s.connect(("127.0.0.1", port))
            s.sendall(head.encode() + body)
            return s

        def read_all(s: socket.socket, pause: float = 0.0, until: float = 0.0) -> tuple[bytes, bool]:
            """The answer's body as far as it came, and whether it came whole; ``pause``
            between reads until ``until`` (a slow reader), then at full speed."""
            data, length = b"", None
            try:
                while length is None or len(data) < length:
                    chunk = s.recv(1 << 20)
                    if not chunk:
                        break
                    data += chunk
                    if length is None and b"\r\n\r\n" in data:
                        head, _, data = data.partition(b"\r\n\r\n")
                        length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
                    if time.monotonic() < until:
                        time.sleep(pause)
            except ConnectionResetError:
                pass
            return data, length is not None and len(data) == length

        stalled = ask()
        time.sleep(3)  # takes nothing for 3 s: cut off after 1
        data, whole = read_all(stalled)
        stalled.close()
        assert not whole, len(data)
        text = log.read_text()
        assert "took nothing of its answer for 1 s (send_stall_seconds)" in text, text[-2000:]
        # a slow client that keeps taking some is served to the end, however long that lasts
        slow = ask()
        data, whole = read_all(slow, pause=0.3, until=time.monotonic() + 3)
        slow.close()
        assert whole, len(data)
        answer = json.loads(data)
        assert len(answer["probabilities"]) == 10_000
        assert request(port, "GET", "/health")[0] == 200
    finally:
        proc.kill()
        proc.wait(timeout=30)


@pytest.mark.slow
def test_a_learn_past_max_held_body_bytes_is_503_and_learned_when_retried(tmp_path: Path) -> None:
    # 40 batches of 3.5 MiB queued for a busy 100-tree forest held 894 MiB more, none refused
    port = free_port()
    proc = start(tmp_path / "data", port, max_body_bytes="65536", max_held_body_bytes="131072")
    held: list[socket.socket] = []
    try:
        events = [{"features": {"x": float(i % 97)}, "label": f"y{i % 3}"} for i in range(2_800)]
        bodies = [json.dumps({"events": events[i : i + 1_400]}).encode() for i in (0, 1_400)]
        assert all(40_000 < len(b) < 65_536 for b in bodies), [len(b) for b in bodies]
        for b in bodies:  # two learns whose bodies are on their way: held at their declared length
            s = socket.create_connection(("127.0.0.1", port), timeout=30)
            s.sendall(
                b"POST /learn HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                + f"Content-Length: {len(b)}\r\n\r\n".encode()
                + b[:100]
            )
            held.append(s)
        time.sleep(0.3)
        third = {"events": events[:1_400]}
        status, answer = request(port, "POST", "/learn", third)
        assert status == 503 and "max_held_body_bytes" in answer["detail"], answer
        assert request(port, "GET", "/models/default")[1]["seq"] == 0  # nothing learned
        for s, b in zip(held, bodies, strict=True):
            s.sendall(b[100:])
            assert s.recv(65536).startswith(b"HTTP/1.1 200"), "a held learn was not learned"
        assert request(port, "POST", "/learn", third) == (200, {"learned": 1_400, "seq": 4_200})
    finally:
        for s in held:
            s.close()
        proc.kill()
        proc.wait(timeout=30)


def test_a_tree_over_max_answer_values_is_refused_and_a_forest_is_read_a_tree_at_a_time(running) -> None:  # type: ignore[no-untyped-def]
    # /tree was built whole on the event loop: a 100-tree forest of a million nodes each, at once
    events = [{"features": {"x": float(i % 200)}, "label": LABELS[i % 10]} for i in range(500)]
    config = {"estimator": "forest", "n_trees": 3, "seed": 2}
    twin = ESTIMATORS(**config)  # the same events and config: the same trees, bit for bit
    twin.learn_many([e["features"] for e in events], [e["label"] for e in events])
    nodes = [m.n_nodes for m in twin.members]
    bound = max(nodes) * 16  # 10 classes and 6 values more a node: the largest tree just fits
    assert bound >= 1_000 and sum(nodes) * 16 > bound, nodes
    with running(max_answer_values=bound) as client:
        assert client.put("/models/f", json=config).status_code == 201
        assert client.post("/models/f/learn", json={"events": events}).status_code == 200
        assert [len(client.get(f"/models/f/tree?member={i}").json()["parent"]) for i in range(3)] == nodes
        r = client.get("/models/f/tree")
        assert r.status_code == 422, r.text
        (error,) = r.json()["detail"]
        assert error["loc"] == ["query", "member"] and error["type"] == "too_long"
        assert error["msg"] == (
            f"The forest's 3 trees hold {sum(nodes):,} nodes of 10 classes: {sum(nodes) * 16:,} values, over "
            f"{bound:,} on this service (setting max_answer_values): ask for one tree at a time (?member=0 to ?member=2)"
        )
        answer = client.get("/models/f/tree?member=1").json()
        assert answer["member"] == 1 and answer["classes"] == LABELS
        for member, why in ((3, "member must be from 0 to 2"), (-1, "greater than or equal to 0")):
            r = client.get(f"/models/f/tree?member={member}")
            assert r.status_code == 422 and why in r.json()["detail"][0]["msg"], r.text
        r = client.get("/models/default/tree?member=0")
        assert r.status_code == 422 and "single tree" in r.json()["detail"][0]["msg"]
        assert client.get("/models/default/tree").status_code == 200
