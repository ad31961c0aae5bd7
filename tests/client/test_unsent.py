"""What a failed or interrupted learn leaves: the events not acknowledged, apart from one
another and each with the ``Idempotency-Key`` that re-sends them without learning twice."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
import pytest

from streamtree.client import AsyncClient, ConnectionFailed, InvalidRequest, UnsentBatch, WriterStopped
from tests.client.conftest import TOKEN, Service, client_with, fresh_name


def _eventually(check: Any, seconds: float = 20.0) -> bool:
    """Whether ``check()`` becomes true within ``seconds`` (a bound on waiting, not a speed claim)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.01)
    return False


class LearnedThenDown(httpx.BaseTransport):
    """Sends the first learn to the service and loses its answer; then, while ``down``, every
    learn finds no service (as when it is killed right after its commit)."""

    def __init__(self) -> None:
        self.inner = httpx.HTTPTransport()
        self.learns = 0
        self.down = True

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/learn"):
            self.learns += 1
            if self.learns == 1:
                self.inner.handle_request(request).read()
                raise httpx.ReadError("the answer was lost (test)", request=request)
            if self.down:
                raise httpx.ConnectError("connection refused (test)", request=request)
        return self.inner.handle_request(request)

    def close(self) -> None:
        self.inner.close()


def test_a_batch_whose_answer_was_lost_is_resent_under_its_key(service: Service) -> None:
    down = LearnedThenDown()
    m = client_with(service, down, retries=2, backoff=1.0).model(fresh_name())
    m.create()
    w = m.writer(batch_size=1000, flush_seconds=0.05)
    for i in range(3):
        w.learn_one({"a": float(i)}, "x")
    assert _eventually(lambda: down.learns >= 1)  # the timer posted them; its retries wait >= 0.5 s
    for i in range(3, 5):
        w.learn_one({"a": float(i)}, "x")  # buffered while that post is retried
    assert _eventually(lambda: w.unsent)
    with pytest.raises(ConnectionFailed):
        w.close()
    assert m.info()["seq"] == 3 and w.learned == 0  # learned, the answer lost
    first, later = w.unsent
    assert first.posted and first.events == [{"features": {"a": float(i)}, "label": "x"} for i in range(3)]
    assert not later.posted and [e["features"]["a"] for e in later.events] == [3.0, 4.0]
    down.down = False
    w.resend()
    assert w.unsent == [] and (w.learned, w.seq) == (5, 5)
    assert [e["features"]["a"] for e in m.events()] == [float(i) for i in range(5)]  # each once


def test_learn_many_says_what_to_send_again(service: Service) -> None:
    down = LearnedThenDown()
    m = client_with(service, down).model(fresh_name())
    m.create()
    with pytest.raises(ConnectionFailed) as exc:
        m.learn_many([{"a": float(i)} for i in range(5)], ["x"] * 5, batch_size=2)
    e = exc.value
    assert (e.learned, e.seq) == (0, 0) and "rows 0 to 1 of X may have been learned" in str(e)
    assert [(b.posted, len(b.events)) for b in e.unsent or []] == [(True, 2), (False, 2), (False, 1)]
    down.down = False
    for b in e.unsent or []:
        m.learn_batch(b.events, b.key)
    assert [ev["features"]["a"] for ev in m.events()] == [float(i) for i in range(5)]


def test_a_refusal_names_the_row_of_x_and_what_was_learned(service: Service) -> None:
    m = client_with(service, httpx.HTTPTransport()).model(fresh_name())
    m.create()
    X = [{"a": float(i)} for i in range(12)]
    with pytest.raises(InvalidRequest) as exc:
        m.learn_many(X, ["x"] * 9 + [3, "x", "x"], batch_size=4)  # an integer label in X[9]
    e = exc.value
    assert (e.row, e.learned, e.seq) == (9, 8, 8)
    assert str(e).endswith("(row 9 of X; the 8 events before its request are learned (seq 8); e.unsent holds the rest)")
    with pytest.raises(InvalidRequest) as exc:
        m.predict_proba_many([{"a": 1.0}] * 1001 + [{"a": "long" * 100}])  # over the service's string limit
    assert exc.value.row == 1001


class Interrupt(httpx.BaseTransport):
    """Raises ``KeyboardInterrupt`` in the first learn, as Ctrl-C during its post would."""

    def __init__(self) -> None:
        self.inner = httpx.HTTPTransport()
        self.learns = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/learn"):
            self.learns += 1
            if self.learns == 1:
                raise KeyboardInterrupt
        return self.inner.handle_request(request)


def test_ctrl_c_during_a_post_keeps_the_batch(service: Service) -> None:
    m = client_with(service, Interrupt()).model(fresh_name())
    m.create()
    w = m.writer(batch_size=3, flush_seconds=3600)
    with pytest.raises(KeyboardInterrupt):
        for i in range(5):
            w.learn_one({"a": float(i)}, "x")
    assert [(b.posted, len(b.events)) for b in w.unsent] == [(True, 3)]
    with pytest.raises(WriterStopped, match="interrupted"):
        w.learn_one({"a": 9.0}, "x")
    w.close(raise_error=False)
    w.resend()
    assert [e["features"]["a"] for e in m.events()] == [0.0, 1.0, 2.0]


class Slow(httpx.AsyncBaseTransport):
    """The service behind a slow link: a learn waits before it is sent."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/learn"):
            await asyncio.sleep(0.5)
        return await self.inner.handle_async_request(request)


def test_a_cancelled_async_post_keeps_the_batch(service: Service) -> None:
    async def main() -> tuple[list[UnsentBatch], Any, list[Any]]:
        async with AsyncClient(service.url, token=TOKEN, transport=Slow()) as client:
            m = client.model(fresh_name())
            await m.create()
            w = m.writer(batch_size=3, flush_seconds=3600)

            async def feed() -> None:
                async with w:
                    for i in range(3):
                        await w.learn_one({"a": float(i)}, "x")  # the third posts the batch

            task = asyncio.create_task(feed())
            await asyncio.sleep(0.1)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            unsent = list(w.unsent)
            await w.resend()
            return unsent, w.learned, [e["features"]["a"] async for e in m.events()]

    unsent, learned, logged = asyncio.run(main())
    assert [(b.posted, len(b.events)) for b in unsent] == [(True, 3)]
    assert learned == 3 and logged == [0.0, 1.0, 2.0]
