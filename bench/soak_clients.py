"""The soak's clients (:mod:`bench.soak`): the event stream and the mix of requests each
thread sends on its own keep-alive connection, with what it counts."""

from __future__ import annotations

import http.client
import json
import random
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from typing import Any

Request = tuple[str, str, str, dict[str, str]]  # method, path, body, extra headers
KEY = "soak-key-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {KEY}"}
MODEL = "default"
IDS = "ids"  # the model whose events carry an id-like feature
MODELS = (MODEL, IDS)
LEARN_KINDS = {"learn": MODEL, "learn_batch": MODEL, "label": MODEL, "learn_ids": IDS, "learn_ids_batch": IDS}


def features(rng: random.Random) -> dict[str, Any]:
    """One event's features: 3 numeric, 2 nominal, as the tests' stream."""
    return {
        "a": round(rng.gauss(0, 1), 6),
        "b": round(rng.uniform(-2, 2), 6),
        "c": rng.randint(0, 9),
        "colour": rng.choice(["red", "green", "blue"]),
        "flag": rng.random() < 0.5,
    }


def label(x: dict[str, Any], rng: random.Random) -> str:
    s = x["a"] + 0.5 * x["b"] - 0.7 * (x["colour"] == "red")
    y = "low" if s < -0.4 else ("mid" if s < 0.6 else "high")
    return rng.choice(["low", "mid", "high"]) if rng.random() < 0.05 else y


class Client(threading.Thread):
    """One client: a keep-alive connection and a stream of requests drawn from the mix.

    Once ``killed`` is set (the server is being killed), failed requests are counted as cut
    by the kill, not as server errors, and the client stops at its next failure.
    """

    def __init__(self, port: int, cid: int, until: float, killed: threading.Event, rate: float) -> None:
        super().__init__(daemon=True)
        self.port, self.cid, self.until, self.killed = port, cid, until, killed
        self.rate = rate  # requests per second this client is scheduled to send (0: back to back)
        self.rng = random.Random(cid)
        self.latencies: dict[str, list[float]] = defaultdict(list)
        self.statuses: Counter[tuple[str, int]] = Counter()
        self.server_errors: list[str] = []
        self.not_json: list[str] = []
        self.acked: Counter[str] = Counter()  # events acknowledged as learned, by model
        self.cut_by_kill = 0
        self.pending: list[tuple[str, dict[str, Any]]] = []
        self.n = 0
        self.mix: list[tuple[float, Callable[[], tuple[str, Request]]]] = [
            (20, self.learn_one),
            (5, self.learn_batch),
            (25, self.predict),
            (5, self.predict_batch),
            (10, self.predict_with_id),
            (8, self.label_pending),
            (4, self.read_model),
            (10, self.anonymous_flood),
            (3, self.anonymous_write),
            (10, self.hostile),
            (4, self.learn_ids_one),
            (2, self.learn_ids_batch),
        ]

    def next_id(self) -> str:
        self.n += 1
        return f"c{self.cid}-{self.n}"

    # ---------------------------------------------------------------- the mix
    def learn_one(self) -> tuple[str, Request]:
        x = features(self.rng)
        return "learn", ("POST", "/learn", json.dumps({"features": x, "label": label(x, self.rng)}), AUTH)

    def learn_batch(self) -> tuple[str, Request]:
        xs = [features(self.rng) for _ in range(50)]
        body = {"events": [{"features": x, "label": label(x, self.rng)} for x in xs]}
        return "learn_batch", ("POST", "/learn", json.dumps(body), AUTH)

    def id_event(self) -> dict[str, Any]:
        x = features(self.rng)
        return {"features": x | {"order_id": f"order-{self.next_id()}"}, "label": label(x, self.rng)}

    def learn_ids_one(self) -> tuple[str, Request]:
        return "learn_ids", ("POST", f"/models/{IDS}/learn", json.dumps(self.id_event()), AUTH)

    def learn_ids_batch(self) -> tuple[str, Request]:
        body = {"events": [self.id_event() for _ in range(50)]}
        return "learn_ids_batch", ("POST", f"/models/{IDS}/learn", json.dumps(body), AUTH)

    def predict(self) -> tuple[str, Request]:
        return "predict", ("POST", "/predict_proba", json.dumps({"features": features(self.rng)}), AUTH)

    def predict_batch(self) -> tuple[str, Request]:
        body = {"instances": [features(self.rng) for _ in range(100)]}
        return "predict_batch", ("POST", "/predict_proba", json.dumps(body), {})

    def predict_with_id(self) -> tuple[str, Request]:
        x, key = features(self.rng), self.next_id()
        self.pending.append((key, x))
        return "predict_id", ("POST", "/predict_proba", json.dumps({"features": x, "id": key}), AUTH)

    def label_pending(self) -> tuple[str, Request]:
        if not self.pending:
            return self.learn_one()
        take, self.pending = self.pending[:3], self.pending[3:]
        body = {"events": [{"id": key, "label": label(x, self.rng)} for key, x in take]}
        return "label", ("POST", "/learn", json.dumps(body), AUTH)

    def read_model(self) -> tuple[str, Request]:
        path = self.rng.choice(
            [
                f"/models/{MODEL}/metrics",
                f"/models/{MODEL}/metrics/history",
                f"/models/{MODEL}",
                f"/models/{MODEL}/tree",
                "/models",
                f"/models/{IDS}",
            ]
        )
        return "read", ("GET", path, "", {})

    def anonymous_flood(self) -> tuple[str, Request]:
        body = {"features": features(self.rng), "id": f"anon-{self.cid}-{self.next_id()}"}
        return "anon_predict_id", ("POST", "/predict_proba", json.dumps(body), {})

    def anonymous_write(self) -> tuple[str, Request]:
        x = features(self.rng)
        return "anon_learn", ("POST", "/learn", json.dumps({"features": x, "label": "low"}), {})

    def hostile(self) -> tuple[str, Request]:
        x = features(self.rng)
        kind = self.rng.randrange(8)
        if kind == 0:
            body = '{"features": {"a\\ud800": 1}, "label": "low"}'
        elif kind == 1:
            body = '{"features": {"a": %d}, "label": "low"}' % 2**70
        elif kind == 2:
            return "hostile", ("PUT", f"/models/soak-{self.cid}", '{"grace_period": %d}' % 2**70, AUTH)
        elif kind == 3:
            key = self.next_id()
            body = json.dumps({"events": [{"id": key, "label": "low"}, {"id": key, "label": "mid"}]})
        elif kind == 4 and self.pending:  # predict again with a pending id: 409
            key, _ = self.pending[0]
            return "hostile", ("POST", "/predict_proba", json.dumps({"features": x, "id": key}), AUTH)
        elif kind == 5:  # a forest far past the operator's bound on trees
            return "hostile", ("PUT", f"/models/soak-big-{self.cid}", '{"model": "forest", "n_trees": 1000}', AUTH)
        elif kind == 6:  # an escaped key must mean the same as the plain one
            return "hostile", (
                "POST",
                "/predict_proba",
                '{"features": {"a": 1}, "\\u0069d": "esc-%s"}' % self.next_id(),
                AUTH,
            )
        else:
            body = json.dumps({"id": f"never-{self.next_id()}", "label": "low"})
        return "hostile", ("POST", "/learn", body, AUTH)

    # ---------------------------------------------------------------- the loop
    def run(self) -> None:
        weights = [w for w, _ in self.mix]
        makers = [m for _, m in self.mix]
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        scheduled = time.perf_counter()
        while time.monotonic() < self.until:
            kind, (method, path, body, headers) = self.rng.choices(makers, weights)[0]()
            if self.rate:
                # Poisson arrivals; a request's latency counts from when it was due, so a slow answer
                # that delays the next requests is charged to them too (no coordinated omission)
                scheduled += self.rng.expovariate(self.rate)
                time.sleep(max(0.0, scheduled - time.perf_counter()))
                start = scheduled
            else:
                start = time.perf_counter()
            try:
                conn.request(
                    method,
                    path,
                    body=body.encode() if body else None,
                    headers={"Content-Type": "application/json"} | headers,
                )
                r = conn.getresponse()
                data = r.read()
            except (OSError, http.client.HTTPException) as exc:  # a dropped connection counts as a server error
                if self.killed.is_set():
                    self.cut_by_kill += 1
                    break
                self.server_errors.append(f"{kind} {method} {path}: {exc!r}")
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
                continue
            self.latencies[kind].append(time.perf_counter() - start)
            self.statuses[(kind, r.status)] += 1
            if r.status >= 500:
                self.server_errors.append(f"{kind} {method} {path}: {r.status} {data[:200]!r}")
            content_type = r.getheader("content-type", "")
            if r.status != 204:
                try:
                    answer = json.loads(data)
                    assert content_type.startswith("application/json")
                except (ValueError, AssertionError):
                    self.not_json.append(f"{kind} {method} {path}: {r.status} {content_type}")
                    continue
                if kind in LEARN_KINDS and r.status == 200:
                    self.acked[LEARN_KINDS[kind]] += answer["learned"]
        conn.close()
