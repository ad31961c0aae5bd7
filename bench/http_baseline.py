"""The library alone on the HTTP bench's own events (:mod:`bench.http_load`): each workload's
in-process baseline, and the durable commit rate of the service's store on this disk."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any


def rate(fn: Any, n: int) -> float:
    t0 = time.perf_counter()
    fn()
    return n / (time.perf_counter() - t0)


def in_process(
    xs: list[dict[str, Any]], ys: list[str], warm: int, probe: list[dict[str, Any]], n_single: int, n_batches: int
) -> dict[str, float]:
    """Rates of the library alone on the server's own sequence of events.

    The server learned ``xs[:warm]`` in batches, then ``xs[warm:warm + 2 * n_single]`` one by
    one, scoring each event before learning it (test-then-train, for its metrics); then it
    predicted ``probe`` one by one and in batches of 1,000. The same steps in-process give
    each HTTP workload a baseline on a model of the same size.
    """
    from streamtree import ProbabilityTree

    def ttt(model: Any, xx: list[dict[str, Any]], yy: list[str]) -> None:
        for x, y in zip(xx, yy, strict=True):
            model.predict_proba_one(x)
            model.learn_one(x, y)

    def learn_loop(model: Any, xx: list[dict[str, Any]], yy: list[str]) -> None:
        for x, y in zip(xx, yy, strict=True):
            model.learn_one(x, y)

    out: dict[str, float] = {}
    single_x, single_y = xs[warm : warm + 2 * n_single], ys[warm : warm + 2 * n_single]
    t = ProbabilityTree()
    out["test_then_train_batch_phase_per_s"] = rate(lambda: ttt(t, xs[:warm], ys[:warm]), warm)
    out["test_then_train_single_phase_per_s"] = rate(lambda: ttt(t, single_x, single_y), len(single_x))
    # what the service runs: one learn_many(return_proba=True) per request (batches of 1,000,
    # or one event: a group of single learns is usually a few events)
    scored = ProbabilityTree()
    out["learn_scored_1000_batch_phase_per_s"] = rate(
        lambda: [
            scored.learn_many(xs[i : i + 1000], ys[i : i + 1000], return_proba=True) for i in range(0, warm, 1000)
        ],
        warm,
    )
    out["learn_scored_1_single_phase_per_s"] = rate(
        lambda: [scored.learn_many([x], [y], return_proba=True) for x, y in zip(single_x, single_y, strict=True)],
        len(single_x),
    )
    m = ProbabilityTree()
    out["learn_many_batch_phase_per_s"] = rate(lambda: m.learn_many(xs[:warm], ys[:warm]), warm)
    out["learn_one_single_phase_per_s"] = rate(lambda: learn_loop(m, single_x, single_y), len(single_x))

    def predict_loop() -> None:
        for x in probe[: 2 * n_single]:
            t.predict_proba_one(x)

    out["predict_proba_one_per_s"] = rate(predict_loop, min(2 * n_single, len(probe)))
    chunks = [probe[i : i + 1000] for i in range(0, len(probe), 1000)]
    chunks = (chunks * (n_batches // len(chunks) + 1))[:n_batches]

    def predict_batches() -> None:
        for chunk in chunks:
            t.predict_proba(chunk)

    out["predict_proba_1000_per_s"] = rate(predict_batches, sum(len(c) for c in chunks))
    out["durable_commits_per_s"] = commit_rate()
    return out


def commit_rate(n: int = 300) -> float:
    """One-event durable commits per second of the service's store on this disk, now.

    Each acknowledged learn request waits for one such commit (shared with the requests of
    the same group), so this bounds single-event learning from one client.
    """
    from app.storage import open_store

    with tempfile.TemporaryDirectory(prefix="streamtree-bench-") as d:
        store = open_store(Path(d), sync="full")
        store.create_model("m", "{}")
        t0 = time.perf_counter()
        for i in range(n):
            store.append("m", i + 1, ['{"x": {"a": 1.0}, "y": "p"}'])
        seconds = time.perf_counter() - t0
        store.close()
    return n / seconds
