"""``streamtree demo``: a seeded Sine stream whose concept reverses, posted to a model of its own."""

from __future__ import annotations

import math
from typing import Any

import pytest

from app import cli, demo_stream


def above(x: dict[str, float]) -> bool:
    return x["x1"] < math.sin(x["x2"])  # river's SINE1: label 1 below the curve


def test_events_reverse_their_concept_at_drift_at() -> None:
    events = list(demo_stream.events(400, 250, noise=0.0, seed=3))
    assert len(events) == 400 and all(set(x) == {"x1", "x2"} and y in (0, 1) for x, y in events)
    before = {above(x) == bool(y) for x, y in events[:250]}
    after = {above(x) == bool(y) for x, y in events[250:]}
    assert len(before) == 1 and len(after) == 1 and before != after  # one rule, then its opposite
    assert events == list(demo_stream.events(400, 250, noise=0.0, seed=3))  # seeded
    noisy = list(demo_stream.events(4000, 4000, noise=0.1, seed=3))
    flipped = sum(above(x) != bool(y) for x, y in noisy) / len(noisy)
    assert min(flipped, 1 - flipped) == pytest.approx(0.1, abs=0.02)


def test_run_creates_the_model_and_posts_every_event(client, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    def call(url: str, method: str, path: str, body: Any, token: str | None) -> tuple[int, Any]:
        assert url == "http://test" and token is None
        r = client.request(method, path, json=body)
        return r.status_code, r.json()

    monkeypatch.setattr(demo_stream, "_call", call)
    said: list[str] = []
    seq = demo_stream.run("http://test", model="demo", n=250, drift_at=100, batch=60, rate=0, say=said.append)
    assert seq == 250 and client.get("/models/demo").json()["summary"]["n_examples"] == 250
    assert any("/dashboard" in line for line in said)
    assert client.put("/models/demo", json={"grace_period": 7}).status_code == 409
    client.put("/models/other", json={"grace_period": 7})
    with pytest.raises(RuntimeError, match="PUT /models/other: 409"):
        demo_stream.run("http://test", model="other", n=10, drift_at=5, rate=0, say=said.append)
    client.put("/models/strings", json={})
    client.post("/models/strings/learn", json={"features": {"a": 1}, "label": "yes"})
    with pytest.raises(RuntimeError, match="learn: 422"):  # integer labels on a model of string labels
        demo_stream.run("http://test", model="strings", n=10, drift_at=5, rate=0, say=said.append)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--events", "0"], "--events must be at least 1"),
        (["--batch", "0"], "--batch must be at least 1"),
        (["--rate", "-1"], "--rate must be >= 0"),
        (["--noise", "0.5"], "--noise in [0, 0.5)"),
        (["--url", "http://127.0.0.1:9", "--events", "5"], "streamtree demo: "),
    ],
)
def test_bad_arguments_and_an_unreachable_service_exit_with_the_reason(argv: list[str], message: str) -> None:
    with pytest.raises(SystemExit) as info:
        cli.main(["demo", *argv])
    assert message in str(info.value.code)
