"""A replica merges the small learns it forwards: one request to the writer carries the learns
that arrived while earlier ones were on their way.

Forwarded one by one, every learn sent to a replica costs the writer a request of its own
(parsing, routing, a place in a group commit) on top of the replica's hop, and on a machine
the instances share, the hop's CPU comes out of the writer's. Merged, the writer answers a
few requests carrying many events each, as the clients would have sent them had they
batched (what each way reached: ``docs/decisions/forwarding.md``).

What merges, and how:

- learns (``POST /learn``, ``POST /models/{name}/learn``) without an ``Idempotency-Key`` (a
  key belongs to its own request) whose JSON body is one event (``features``, ``label``,
  ``id``) or a batch of at most :data:`SMALL` events; anything else is forwarded as it came;
- only with learns to the same path and with the same ``Authorization`` and
  ``Content-Type``: the same model, the same credentials;
- nothing waits for a timer: a learn is sent at once while fewer than :data:`IN_FLIGHT`
  merged requests to its path are on their way, and otherwise joins the next one, sent as
  soon as one returns (a group commit's rule: batches grow only when the writer is busy);
- the writer learns the merged batch in order, each learn's events contiguous, so learn
  ``i`` of a batch answered ``{"learned": N, "seq": S}`` gets ``{"learned": n_i, "seq": S -
  (events after it)}``: what it would have got alone, had the others come just before and
  after it;
- a merged request refused as a whole (422: an event, or two learns naming one ``id``; 413:
  too large) learned nothing (the writer checks a batch before learning any of it), so each
  of its learns is sent again on its own and gets its own answer; any other answer (401, 403,
  404, 503 ...) is every learn's own: same model, same credentials, same writer.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

__all__ = ["IN_FLIGHT", "LOCAL", "MAX_EVENTS", "SMALL", "Coalescer", "mergeable_events"]

#: Learns of at most this many events are merged. Larger ones are batches already: merging
#: them made the writer learn one large request after another, and slowed them
#: (``docs/decisions/forwarding.md``).
SMALL = 20
#: Most events in one merged request.
MAX_EVENTS = 1_000
#: Merged requests to one path on their way at once. With one, the learns that arrive
#: meanwhile gather into the next; more in flight merge less and reached less of the
#: writer's rate (``docs/decisions/forwarding.md``).
IN_FLIGHT = 1
#: Statuses of a merged request that refused it whole, learning nothing: each learn is sent alone.
_RESEND = (413, 422)
_EVENT_KEYS = frozenset(("features", "label", "id"))
#: An integer orjson may read as a float: 20 digits in a row (2**64 has 20), or 19 after a minus
#: sign (below -2**63). 19 digits without one are below 10**19 < 2**64: read exactly.
_LONG_DIGITS = re.compile(rb"\d{20}|-\d{19}")

#: A learn's answer when this instance became the writer meanwhile: it learns the request itself.
LOCAL = None
Answer = tuple[int, bytes, list[tuple[bytes, bytes]]]
#: The answer to a request whose answer from the writer's address is not one a streamtree
#: writer gives (another service on that address: a wrong ``advertise_url``, a proxy's page).
UNREADABLE: Answer = (
    502,
    orjson.dumps(
        {
            "detail": "The writer's address answered something no streamtree writer answers (check the "
            "writer's advertise_url), so the request may or may not have been learned."
        }
    ),
    [],
)
#: Sends one request body to the writer (the path and headers are bound): its answer, or
#: ``None`` when this instance is the writer now.
Send = Callable[[bytes], Awaitable[Answer | None]]


def mergeable_events(body: bytes) -> list[Any] | None:
    """The events of a learn's JSON body if it can be merged (module docstring), else None.

    A single event becomes a one-event list: ``{"features": x, "label": y}`` learns what
    ``{"events": [{"features": x, "label": y}]}`` learns. Bodies the writer might answer
    otherwise than as a batch event (not JSON, unknown keys, not an object) are not merged.
    """
    # orjson, not the routes' parser (app.json_route.parse_json): the merged events are
    # written out again, and orjson refuses NaN and infinities, which it could not write back.
    # It reads an integer beyond 64 bits as a float, which the writer would then take where it
    # refuses the integer: a body with such a run of digits goes to the writer as it came. What
    # else orjson reads, the routes' parser reads alike (escaped keys, a repeated key's last).
    if _LONG_DIGITS.search(body):
        return None
    try:
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(parsed, dict):
        return None
    if parsed.keys() == {"events"}:
        events = parsed["events"]
        if isinstance(events, list) and 1 <= len(events) <= SMALL and all(isinstance(e, dict) for e in events):
            return events
        return None
    if "label" in parsed and parsed.keys() <= _EVENT_KEYS and parsed.get("label") is not None:
        return [parsed]
    return None


@dataclass
class _Learn:
    events: list[Any]
    body: bytes
    answer: asyncio.Future[Answer | None] = field(default_factory=lambda: asyncio.get_running_loop().create_future())


@dataclass
class _Queue:
    waiting: list[_Learn] = field(default_factory=list)
    in_flight: int = 0


class Coalescer:
    """Merges the learns a replica forwards, per path and credentials (module docstring)."""

    def __init__(self) -> None:
        self._queues: dict[tuple[Any, ...], _Queue] = {}

    async def learn(self, key: tuple[Any, ...], events: list[Any], body: bytes, send: Send) -> Answer | None:
        """Forward one learn (``events``, parsed from its ``body``) with the others of ``key``;
        its answer, or :data:`LOCAL` if this instance became the writer meanwhile."""
        queue = self._queues.setdefault(key, _Queue())
        learn = _Learn(events, body)
        queue.waiting.append(learn)
        self._drain(key, queue, send)
        # shielded: a client that goes away must not cancel its future, which its merged request still settles
        return await asyncio.shield(learn.answer)

    def _drain(self, key: tuple[Any, ...], queue: _Queue, send: Send) -> None:
        """Start merged requests while there is room on the way and learns waiting."""
        while queue.waiting and queue.in_flight < IN_FLIGHT:
            batch: list[_Learn] = []
            total = 0
            while queue.waiting and (not batch or total + len(queue.waiting[0].events) <= MAX_EVENTS):
                learn = queue.waiting.pop(0)
                batch.append(learn)
                total += len(learn.events)
            queue.in_flight += 1
            asyncio.get_running_loop().create_task(self._send(key, queue, batch, send))

    async def _send(self, key: tuple[Any, ...], queue: _Queue, batch: list[_Learn], send: Send) -> None:
        try:
            await _answer(batch, send)
        except BaseException as exc:  # noqa: BLE001 - every learn must get an answer or the error
            for learn in batch:
                if not learn.answer.done():
                    learn.answer.set_exception(exc)
        finally:
            queue.in_flight -= 1
            if queue.waiting:
                self._drain(key, queue, send)
            elif not queue.in_flight:
                self._queues.pop(key, None)


async def _answer(batch: list[_Learn], send: Send) -> None:
    """Send ``batch`` merged (one learn: its own body) and give each learn its answer."""
    if len(batch) == 1:
        batch[0].answer.set_result(await send(batch[0].body))
        return
    merged = await send(orjson.dumps({"events": [e for learn in batch for e in learn.events]}))
    if merged is None or merged[0] != 200:
        if merged is not None and merged[0] in _RESEND:
            answers = await asyncio.gather(*(send(learn.body) for learn in batch))
        else:
            answers = [merged] * len(batch)
        for learn, answer in zip(batch, answers, strict=True):
            learn.answer.set_result(answer)
        return
    status, body, headers = merged
    try:
        result = orjson.loads(body)
        seq, learned = int(result["seq"]), result["learned"]
    except (ValueError, KeyError, TypeError):  # not a streamtree writer's answer
        for learn in batch:
            learn.answer.set_result(UNREADABLE)
        return
    after = sum(len(learn.events) for learn in batch)
    if learned != after:
        raise RuntimeError(f"the writer learned {learned} of {after} merged events")
    for learn in batch:
        after -= len(learn.events)
        learn.answer.set_result((status, orjson.dumps({"learned": len(learn.events), "seq": seq - after}), headers))
