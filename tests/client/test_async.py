"""``AsyncClient`` and ``AsyncRemoteModel``: the blocking client's API awaited, against the
same real service, with the async writer and retries of lost answers."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pandas as pd
import pytest

from streamtree import ProbabilityTree
from streamtree.client import AsyncClient, Conflict, InvalidRequest, NotFound, WriterStopped
from tests.app.conftest import make_stream
from tests.client.conftest import TOKEN, Service, fresh_name


def run(service: Service, body: Callable[[AsyncClient], Awaitable[Any]], **kwargs: Any) -> Any:
    async def main() -> Any:
        async with AsyncClient(service.url, token=TOKEN, retries=3, backoff=0.01, **kwargs) as client:
            return await body(client)

    return asyncio.run(main())


def test_learn_batch_after_another(service: Service) -> None:
    async def body(client: AsyncClient) -> list[Any]:
        m = client.model(fresh_name())
        await m.create()
        later = asyncio.ensure_future(m.learn_batch([{"features": {"a": 2.0}, "label": "y"}], "b-2", after="b-1"))
        await asyncio.sleep(0.3)
        assert not later.done()
        assert await m.learn_batch(b'[{"features": {"a": 1.0}, "label": "x"}]', "b-1") == {"learned": 1, "seq": 1}
        assert await later == {"learned": 1, "seq": 2}
        return [e["label"] async for e in m.events()]

    assert run(service, body) == ["x", "y"]


def test_every_method(service: Service) -> None:
    events = make_stream(60, seed=8)
    probes = [x for x, _ in make_stream(5, seed=80)]

    async def body(client: AsyncClient) -> None:
        m = client.model(fresh_name())
        assert (await m.create())["seq"] == 0
        with pytest.raises(Conflict):
            await m.create(exist_ok=False)
        assert (await m.learn_one(*events[0]))["seq"] == 1
        X = pd.DataFrame([x for x, _ in events[1:]])
        assert await m.learn_many(X, [y for _, y in events[1:]], batch_size=25) == {"learned": 59, "seq": 60}
        local = ProbabilityTree(**(await m.info())["config"])
        for x, y in events:
            local.learn_one(x, y)
        assert [await m.predict_proba_one(x) for x in probes] == [local.predict_proba_one(x) for x in probes]
        assert await m.predict_one(probes[0]) == local.predict_one(probes[0])
        frame = await m.predict_proba_many(probes)
        assert frame.to_dict("records") == [local.predict_proba_one(x) for x in probes]
        assert (await m.predict_many(probes)).tolist() == [local.predict_one(x) for x in probes]
        assert len(await m.predict_batch(probes)) == 5
        await m.predict_proba_one(probes[0], id="q-1")
        assert await m.label("q-1", "low") == {"learned": 1, "seq": 61}
        await m.predict_proba_one(probes[1], id="q-2")
        assert (await m.label_many(["q-2"], ["mid"]))["seq"] == 62
        costs = {"act": {"low": 1, "mid": 0, "high": 0}, "wait": {"low": 0, "mid": 1, "high": 1}}
        one = await m.decide(probes[0], costs)
        assert (await m.decide_many(probes[:1], costs))["decisions"] == [one["decision"]]
        assert (await m.decide_batch(probes[:1], costs))["decisions"] == [one["decision"]]
        assert (await m.explain(probes[0]))["proba"] == one["probabilities"]
        assert (await m.metrics())["seq"] == 62 and (await m.summary())["n_examples"] == 62
        logged = [e async for e in m.events(after=58, page=2)]
        assert [e["seq"] for e in logged] == [59, 60, 61, 62]
        assert logged[2]["features"] == probes[0] and logged[2]["label"] == "low"
        assert m.name in {i["name"] for i in await client.models()}
        assert (await client.health())["seq"][m.name] == 62
        await m.delete()
        with pytest.raises(NotFound):
            await m.info()

    run(service, body)


def test_the_async_writer(service: Service) -> None:
    async def body(client: AsyncClient) -> None:
        m = client.model(fresh_name())
        await m.create()
        async with m.writer(batch_size=4, flush_seconds=3600) as w:
            for i in range(10):
                await w.learn_one({"a": float(i)}, "x")
            assert w.learned == 8  # two full batches
        assert (w.learned, w.seq) == (10, 10)
        async with m.writer(batch_size=1000, flush_seconds=0.1) as w:
            await w.learn_one({"a": 10.0}, "y")
            for _ in range(2000):  # the timer task posts it; waiting is bounded, not timed
                if w.learned:
                    break
                await asyncio.sleep(0.01)
            assert w.learned == 1 and (await m.info())["seq"] == 11
        with pytest.raises(InvalidRequest):
            async with m.writer(batch_size=2) as bad:
                await bad.learn_one({"a": 1.0}, "y")
                await bad.learn_one({"a": 2.0}, 3)  # the model's labels are strings
        assert [len(b.events) for b in bad.unsent] == [2]
        with pytest.raises(WriterStopped):
            await bad.learn_one({"a": 1.0}, "y")
        assert [e["features"]["a"] for e in [e async for e in m.events()]] == [float(i) for i in range(11)]

    run(service, body)


class LoseFirstAnswer(httpx.AsyncBaseTransport):
    """Sends every request; loses the answer to the first POST after the service processed it."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.lost = False
        self.keys: list[str | None] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        await response.aread()
        if request.method == "POST":
            self.keys.append(request.headers.get("idempotency-key"))
            if not self.lost:
                self.lost = True
                await response.aclose()
                raise httpx.ReadError("the answer was lost (test)", request=request)
        return response


def test_a_lost_answer_is_retried_and_learned_once(service: Service) -> None:
    transport = LoseFirstAnswer()

    async def body(client: AsyncClient) -> None:
        m = client.model(fresh_name())
        await m.create()
        assert await m.learn_one({"a": 1.0}, "x") == {"learned": 1, "seq": 1}
        assert (await m.info())["seq"] == 1

    run(service, body, transport=transport)
    assert len(transport.keys) == 2 and transport.keys[0] == transport.keys[1] is not None
