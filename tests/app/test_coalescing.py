"""A replica merges the small learns it forwards (app/coalescing.py); through real instances
on PostgreSQL in test_cluster.py."""

from __future__ import annotations

import asyncio

import orjson
import pytest

from app.coalescing import LOCAL, MAX_EVENTS, SMALL, Answer, Coalescer, mergeable_events

OK = b'{"learned": %d, "seq": %d}'


def event(i: int) -> dict[str, object]:
    return {"features": {"a": float(i)}, "label": "x" if i % 2 else "y"}


@pytest.mark.parametrize(
    "body, expected",
    [
        (b'{"features": {"a": 1}, "label": "x"}', [{"features": {"a": 1}, "label": "x"}]),
        (b'{"id": "order-1", "label": "x"}', [{"id": "order-1", "label": "x"}]),
        (b'{"events": [{"features": {"a": 1}, "label": "x"}]}', [{"features": {"a": 1}, "label": "x"}]),
        (b'{"events": []}', None),  # the writer's to refuse, alone
        (b'{"events": [1]}', None),
        (b'{"events": [{"label": "x"}], "label": "y"}', None),
        (b'{"features": {"a": 1}}', None),  # no label
        (b'{"features": {"a": 1}, "label": null}', None),
        (b'{"features": {"a": 1}, "label": "x", "extra": 1}', None),  # unknown key: refused alone
        (b'{"features": ', None),
        (b'[{"features": {"a": 1}, "label": "x"}]', None),
        # read by the routes' parser as the writer reads it, not merged: orjson would read an
        # integer beyond 64 bits as a float, which the writer then takes where it refuses the integer
        (b'{"features": {"a": 123456789012345678901234567890}, "label": "x"}', None),
        (b'{"features": {"a": 18446744073709551616}, "label": "x"}', None),
        (b'{"features": {"a": 9223372036854775808}, "label": "x"}', [{"features": {"a": 2**63}, "label": "x"}]),
        # 19 digits after a minus: below -2**63, a float to orjson (it was merged as -1e19 and learned)
        (b'{"features": {"a": -9999999999999999999}, "label": "x"}', None),
        (b'{"features": {"a": 1}, "label": -9223372036854775809}', None),
        (
            b'{"features": {"a": 9999999999999999999}, "label": "x"}',
            [{"features": {"a": 9999999999999999999}, "label": "x"}],
        ),
        (rb'{"f\u0065atures": {"a": 1}, "label": "x"}', [{"features": {"a": 1}, "label": "x"}]),
    ],
)
def test_mergeable_bodies_are_one_event_or_a_small_batch(body: bytes, expected: list[object] | None) -> None:
    assert mergeable_events(body) == expected


def test_a_batch_larger_than_small_is_forwarded_as_it_came() -> None:
    assert mergeable_events(orjson.dumps({"events": [event(i) for i in range(SMALL)]})) is not None
    assert mergeable_events(orjson.dumps({"events": [event(i) for i in range(SMALL + 1)]})) is None


class Writer:
    """Stands in for the forwarder: records each body sent, answers as the writer would
    (numbering the events), after ``release`` is set for the first request."""

    def __init__(self, status: int = 200, refuse: object = None, answer: bytes | None = None) -> None:
        self.answer = answer  # a 200's body in place of the writer's (once merged)
        self.bodies: list[list[object]] = []
        self.seq = 0
        self.status = status
        self.refuse = refuse
        self.release = asyncio.Event()

    async def send(self, body: bytes) -> Answer | None:
        parsed = orjson.loads(body)
        events = parsed["events"] if "events" in parsed else [parsed]
        self.bodies.append(events)
        if len(self.bodies) == 1:
            await self.release.wait()  # the first request is on its way while the others arrive
        if self.status == 0:
            return LOCAL
        if self.status != 200:
            return self.status, b'{"detail": "no"}', []
        if self.refuse in events:
            return 422, b'{"detail": [{"loc": ["body"]}]}', []
        self.seq += len(events)
        if self.answer is not None and len(events) > 1:
            return 200, self.answer, []
        return 200, OK % (len(events), self.seq), []


async def _submit(writer: Writer, bodies: list[bytes]) -> list[asyncio.Future[Answer | None]]:
    """Each body's learn, one after the other (the first is on its way as the rest arrive)."""
    coalescer = Coalescer()
    tasks = []
    for body in bodies:
        events = mergeable_events(body)
        assert events is not None
        tasks.append(asyncio.ensure_future(coalescer.learn(("/learn",), events, body, writer.send)))
        await asyncio.sleep(0)
    return tasks


async def _learns(writer: Writer, bodies: list[bytes]) -> list[Answer | None]:
    tasks = await _submit(writer, bodies)
    writer.release.set()
    return await asyncio.gather(*tasks)


def test_learns_arriving_while_one_is_on_its_way_go_together_in_order_each_with_its_own_seq() -> None:
    bodies = [
        orjson.dumps(event(0)),
        orjson.dumps(event(1)),
        orjson.dumps({"events": [event(2), event(3)]}),
        orjson.dumps(event(4)),
    ]
    writer = Writer()
    answers = asyncio.run(_learns(writer, bodies))
    assert writer.bodies == [[event(0)], [event(1), event(2), event(3), event(4)]]
    assert [orjson.loads(a[1]) for a in answers if a] == [
        {"learned": 1, "seq": 1},
        {"learned": 1, "seq": 2},
        {"learned": 2, "seq": 4},
        {"learned": 1, "seq": 5},
    ]
    assert all(a is not None and a[0] == 200 for a in answers)


def test_a_merged_request_refused_whole_is_sent_again_learn_by_learn() -> None:
    bad = {"features": {"a": "not a number"}, "label": "x"}
    bodies = [orjson.dumps(event(0)), orjson.dumps(event(1)), orjson.dumps(bad), orjson.dumps(event(2))]
    writer = Writer(refuse=bad)
    answers = asyncio.run(_learns(writer, bodies))
    assert writer.bodies[1] == [event(1), bad, event(2)]  # merged, refused, then one by one
    assert sorted(map(str, writer.bodies[2:])) == sorted(map(str, [[event(1)], [bad], [event(2)]]))
    statuses = [a[0] for a in answers if a]
    assert statuses == [200, 200, 422, 200]
    assert sorted(orjson.loads(a[1])["seq"] for a in answers if a and a[0] == 200) == [1, 2, 3]


@pytest.mark.parametrize("status", [401, 404, 503])
def test_any_other_refusal_is_every_learns_answer(status: int) -> None:
    writer = Writer(status=status)
    answers = asyncio.run(_learns(writer, [orjson.dumps(event(i)) for i in range(3)]))
    assert len(writer.bodies) == 2  # nothing sent again
    assert [a[0] for a in answers if a] == [status] * 3


def test_a_merged_answer_no_writer_gives_is_every_learns_502() -> None:
    writer = Writer(answer=b"<html>not streamtree</html>")
    answers = asyncio.run(_learns(writer, [orjson.dumps(event(i)) for i in range(3)]))
    assert [a[0] for a in answers if a] == [200, 502, 502]
    assert b"advertise_url" in answers[1][1]  # type: ignore[index]


def test_when_this_instance_became_the_writer_every_learn_is_learned_locally() -> None:
    answers = asyncio.run(_learns(Writer(status=0), [orjson.dumps(event(i)) for i in range(3)]))
    assert answers == [LOCAL] * 3


def test_a_merged_request_holds_at_most_max_events() -> None:
    big = orjson.dumps({"events": [event(i) for i in range(SMALL)]})
    writer = Writer()
    n = MAX_EVENTS // SMALL + 2  # the first alone, then more than one merged request's worth
    answers = asyncio.run(_learns(writer, [big] * n))
    assert [len(b) for b in writer.bodies] == [SMALL, MAX_EVENTS, SMALL]
    assert [orjson.loads(a[1])["seq"] for a in answers if a] == [SMALL * (i + 1) for i in range(n)]


def test_an_error_sending_reaches_every_learn_of_the_request() -> None:
    async def broken(body: bytes) -> Answer | None:
        raise ConnectionError("boom")

    async def run() -> list[object]:
        coalescer = Coalescer()
        tasks = [
            asyncio.ensure_future(coalescer.learn(("/learn",), [event(i)], orjson.dumps(event(i)), broken))
            for i in range(3)
        ]
        return await asyncio.gather(*tasks, return_exceptions=True)

    assert all(isinstance(r, ConnectionError) for r in asyncio.run(run()))


def test_a_client_that_goes_away_leaves_the_others_answers_intact() -> None:
    async def run() -> list[Answer | None]:
        writer = Writer()
        tasks = await _submit(writer, [orjson.dumps(event(i)) for i in range(4)])
        tasks[2].cancel()  # its client disconnected while its learn waited to be merged
        await asyncio.sleep(0)
        writer.release.set()
        kept = [t for i, t in enumerate(tasks) if i != 2]
        assert writer.bodies[0] == [event(0)]
        return list(await asyncio.gather(*kept))

    answers = asyncio.run(run())
    assert [orjson.loads(a[1])["seq"] for a in answers if a] == [1, 2, 4]  # the gone one's event was learned (seq 3)
