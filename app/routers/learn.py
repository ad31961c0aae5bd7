"""``POST /learn`` and ``POST /models/{name}/learn``: durable learning from labelled events."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Coroutine, Sequence
from typing import Annotated, Any
from urllib.parse import unquote

import orjson
from fastapi import APIRouter, Header, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from starlette.responses import Response
from starlette.types import Scope

from ..admission import EventBatch, LearnEvent
from ..deps import WriteDefaultModel, WriteModel
from ..errors import FastJSON
from ..exceptions import InvalidInput, Loc
from ..group_commit import KEY_LOC
from ..hosting import ModelHost
from ..ingest import check_batch, check_one
from ..json_route import JSONRoute
from ..registry import DEFAULT_MODEL
from ..schemas import LearnBody, LearnResult
from ..validation import field_error


class LearnRoute(JSONRoute):
    """A learn route: a request refused before its events reach the writer (a body that is
    not JSON or not a learn body, over ``max_body_bytes``, or with headers refused) tells its
    model's ordering, so a request that names it in ``Idempotency-After`` is refused at once,
    not after :data:`~app.ordering.AFTER_WAIT_SECONDS`."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def learn_or_refused(request: Request) -> Response:
            try:
                return await handler(request)
            except (RequestValidationError, HTTPException, InvalidInput) as exc:
                if not isinstance(exc, HTTPException) or exc.status_code in (413, 422):
                    report_refused(request.scope)
                raise

        return learn_or_refused


_LEARN_PATH = re.compile(r"/models/([^/]+)/learn")


def report_refused(scope: Scope) -> None:
    """Tell the model's ordering that the learn request of ``scope`` (if it is one, with one
    ``Idempotency-Key``) was refused (on the writer: a replica forwards learns unread). Also
    called by :class:`~app.body_limit.BodyLimitMiddleware` for a body refused unread."""
    path = scope.get("path", "")
    named = _LEARN_PATH.fullmatch(path)
    if path != "/learn" and named is None:
        return
    keys = [v for k, v in scope.get("headers", ()) if k == b"idempotency-key"]
    app = scope.get("app")
    node = getattr(getattr(app, "state", None), "node", None)
    if len(keys) != 1 or node is None or not node.ready or not node.is_writer():
        return
    host = node.registry.get(DEFAULT_MODEL if named is None else unquote(named.group(1)))
    if host is not None:
        host.refused(keys[0].decode("latin-1"))


router = APIRouter(tags=["learn"], route_class=LearnRoute)

_DOC = """Learn one event (`features`, `label`, optional `id`) or a batch (`events`).

An event with an `id` and a `label` but no `features` labels the features of the earlier
`predict_proba` call made with that `id`. The response is sent only once the events are
durable; `seq` is the sequence number of the request's last event. A refused event (422,
naming the field) means none of the request's events was learned. A batch names each `id`
at most once (422 otherwise).

With an `Idempotency-Key` header (1 to 255 printable ASCII characters), a retry of the
request with the same key and body (within `idempotency_window_seconds`, default 24 h, per
model) gets the first answer (same `learned` and `seq`) and learns nothing; the same key with
another body is a 422 naming the header.

With `Idempotency-After` too (the `Idempotency-Key` of an earlier request to the same
model), the request is learned only after that one: a client keeps several requests in
flight and its events are still learned in the order it sent them. If that request was
refused or failed, or has not reached the service within 10 s, the answer is 409
(`"type": "after_not_learned"`) and nothing is learned."""

#: Where a refused ``Idempotency-After`` is, in a 422's ``loc``.
AFTER_LOC: Loc = ("header", "Idempotency-After")

#: Longest accepted ``Idempotency-Key``.
MAX_KEY_LENGTH = 255

#: The ``Idempotency-Key`` request header (optional).
IdempotencyKey = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        description="Makes a retry of this request learn nothing: "
        "it gets the first answer (1-255 printable ASCII characters)",
    ),
]


#: The ``Idempotency-After`` request header (optional): the key of the request this one follows.
IdempotencyAfter = Annotated[
    str | None,
    Header(
        alias="Idempotency-After",
        description="The Idempotency-Key of an earlier request to this model: "
        "this one is learned only after it (409 if it was not learned)",
    ),
]


async def learn(host: ModelHost, body: LearnBody, key: str | None = None, after: str | None = None) -> FastJSON:
    """Check the request's limits, queue it for the model's writer, answer once durable."""
    if key is not None:
        _check_key(key, KEY_LOC, "Idempotency-Key")
    if after is not None:
        _check_key(after, AFTER_LOC, "Idempotency-After")
        if key is None:
            raise field_error(AFTER_LOC, "Idempotency-After needs an Idempotency-Key on the same request", "missing")
        if after == key:
            raise field_error(AFTER_LOC, "Idempotency-After names another request's key, not this one's", "value_error")
    events: Sequence[LearnEvent]
    if body.events is None:  # refused: reported to the ordering by LearnRoute
        assert body.label is not None
        events = [check_one(body.features, body.label, body.id, ("body",), host.limits)]
    else:
        events = check_batch(body.events, host.limits)  # in one pass over each column (app.ingest)
    batch = body.events is not None
    learned, seq = await host.learn(events, batch, key, _body_hash(events, batch) if key is not None else "", after)
    return FastJSON({"learned": learned, "seq": seq})


def _check_key(key: str, loc: Loc, header: str) -> None:
    """Refuse a key (of the ``header`` at ``loc``) that is empty, too long or not printable ASCII."""
    if not 1 <= len(key) <= MAX_KEY_LENGTH or not all(" " <= c <= "~" for c in key):
        raise field_error(loc, f"An {header} is 1 to {MAX_KEY_LENGTH} printable ASCII characters", "idempotency_key")


def _body_hash(events: Sequence[LearnEvent], batch: bool) -> str:
    """A digest of the request's events (canonical JSON, keys sorted): equal for a retried body."""
    if isinstance(events, EventBatch):
        ids = events.ids if events.ids is not None else [None] * len(events)
        rows = list(map(list, zip(events.xs, events.ys, ids, strict=True)))
    else:
        rows = [[e.features, e.label, e.id] for e in events]
    canonical = orjson.dumps([batch, rows], option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(canonical).hexdigest()


def _once(request: Request, key: str | None, after: str | None) -> None:
    """Refuse a request that sends either header twice: which one is its key?"""
    for value, header, loc in ((key, "Idempotency-Key", KEY_LOC), (after, "Idempotency-After", AFTER_LOC)):
        if value is not None and len(request.headers.getlist(header)) > 1:
            raise field_error(loc, f"Send {header} once; this request sends it more than once", "idempotency_key")


@router.post("/learn", response_model=LearnResult, summary="Learn (default model)", description=_DOC)
async def learn_default(
    body: LearnBody,
    host: WriteDefaultModel,
    request: Request,
    idempotency_key: IdempotencyKey = None,
    idempotency_after: IdempotencyAfter = None,
) -> FastJSON:
    _once(request, idempotency_key, idempotency_after)
    return await learn(host, body, idempotency_key, idempotency_after)


@router.post("/models/{name}/learn", response_model=LearnResult, summary="Learn", description=_DOC)
async def learn_named(
    body: LearnBody,
    host: WriteModel,
    request: Request,
    idempotency_key: IdempotencyKey = None,
    idempotency_after: IdempotencyAfter = None,
) -> FastJSON:
    _once(request, idempotency_key, idempotency_after)
    return await learn(host, body, idempotency_key, idempotency_after)
