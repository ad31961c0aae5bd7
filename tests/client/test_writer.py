"""The batching writer: batches go out when full, when ``flush_seconds`` have passed since
their first event, and on leaving the block, in order; an error stops it and is raised."""

from __future__ import annotations

import time

import pytest

from streamtree.client import InvalidRequest, RemoteModel, WriterStopped
from tests.app.conftest import make_stream
from tests.client.conftest import LoseAnswers, Service, client_with, fresh_name


def _eventually(check: object, seconds: float = 20.0) -> bool:
    """Whether ``check()`` becomes true within ``seconds`` (a bound on waiting, not a speed claim)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return True
        time.sleep(0.01)
    return False


def test_full_batches_go_out_and_the_rest_on_exit(model: RemoteModel) -> None:
    events = make_stream(23, seed=5)
    with model.writer(batch_size=5, flush_seconds=3600) as w:
        for i, (x, y) in enumerate(events):
            w.learn_one(x, y)
            assert w.learned == (i + 1) // 5 * 5  # posted when full, by the call that filled it
        assert model.info()["seq"] == 20
    assert (w.learned, w.seq) == (23, 23)
    assert [(e["features"], e["label"]) for e in model.events()] == events


def test_a_batch_goes_out_after_flush_seconds(model: RemoteModel) -> None:
    with model.writer(batch_size=1000, flush_seconds=0.2) as w:
        w.learn_one({"a": 1.0}, "x")
        w.learn_one({"a": 2.0}, "y")
        assert _eventually(lambda: w.learned == 2)
        assert model.info()["seq"] == 2
        w.learn_one({"a": 3.0}, "x")  # a new batch, its own timer
        assert _eventually(lambda: w.learned == 3)
        w.learn_one({"a": 4.0}, "y")
        w.flush()
        assert w.learned == 4
    assert [e["features"]["a"] for e in model.events()] == [1.0, 2.0, 3.0, 4.0]


def test_an_error_is_raised_by_the_call_that_posted_and_stops_the_writer(model: RemoteModel) -> None:
    model.learn_one({"a": 0.0}, "x")  # the model's labels are strings
    with pytest.raises(InvalidRequest) as exc, model.writer(batch_size=2, flush_seconds=3600) as w:
        w.learn_one({"a": 1.0}, "y")
        w.learn_one({"a": 2.0}, 3)  # an integer label: the batch is refused
    assert exc.value.loc == ("body", "events", 1, "label")
    [batch] = w.unsent
    assert batch.events == [{"features": {"a": 1.0}, "label": "y"}, {"features": {"a": 2.0}, "label": 3}]
    assert batch.posted and len(batch.key) == 32
    assert model.info()["seq"] == 1
    with pytest.raises(WriterStopped):
        w.learn_one({"a": 3.0}, "y")


def test_an_error_of_the_timer_is_raised_by_the_next_call(model: RemoteModel) -> None:
    model.learn_one({"a": 0.0}, "x")
    w = model.writer(batch_size=1000, flush_seconds=0.1)
    w.learn_one({"a": 1.0}, 5)
    assert _eventually(lambda: w.unsent)
    with pytest.raises(InvalidRequest):
        w.learn_one({"a": 2.0}, "y")
    with pytest.raises(WriterStopped):
        w.flush()
    w.close(raise_error=False)
    assert w.learned == 0 and model.info()["seq"] == 1


def test_an_error_on_exit_is_raised_on_exit(model: RemoteModel) -> None:
    model.learn_one({"a": 0.0}, "x")
    with pytest.raises(InvalidRequest), model.writer(batch_size=1000, flush_seconds=3600) as w:
        w.learn_one({"a": 1.0}, "y")
        w.learn_one({"a": 2.0}, 7)
    assert [len(b.events) for b in w.unsent] == [2] and w.learned == 0


def test_a_lost_answer_is_retried_and_learned_once(service: Service) -> None:
    lose = LoseAnswers("POST", n=0)
    m = client_with(service, lose).model(fresh_name())
    m.create()
    with m.writer(batch_size=3) as w:
        for i in range(7):
            lose.n = 1 if i in (2, 5) else lose.n  # lose the answers to the first two batches
            w.learn_one({"a": float(i)}, "x")
    assert (w.learned, w.seq) == (7, 7)
    assert [e["features"]["a"] for e in m.events()] == [float(i) for i in range(7)]
