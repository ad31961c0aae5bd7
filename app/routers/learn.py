"""``POST /learn`` and ``POST /models/{name}/learn``: durable learning from labelled events."""

from __future__ import annotations

from fastapi import APIRouter

from app.deps import WriteDefaultModel, WriteModel
from app.errors import FastJSON
from app.hosting import ModelHost
from app.schemas import LearnBody, LearnResult
from app.validation import check_features, check_id, check_label, check_length, event_loc

router = APIRouter(tags=["learn"])

_DOC = """Learn one event (`features`, `label`, optional `id`) or a batch (`events`).

An event with an `id` and a `label` but no `features` labels the features of the earlier
`predict_proba` call made with that `id`. The response is sent only once the events are
durable; `seq` is the sequence number of the request's last event. A refused event (422,
naming the field) means none of the request's events was learned."""


async def learn(host: ModelHost, body: LearnBody) -> FastJSON:
    """Check the request's limits, queue it for the model's writer, answer once durable."""
    events = body.as_events()
    limits = host.limits
    batch = body.is_batch
    if batch:
        check_length(events, ("body", "events"), limits)
    for i, event in enumerate(events):
        loc = event_loc(batch, "events", i)
        if event.features is not None:
            check_features(event.features, (*loc, "features"), limits)
        check_label(event.label, (*loc, "label"), limits)
        if event.id is not None:
            check_id(event.id, (*loc, "id"), limits)
    learned, seq = await host.learn(events, batch)
    return FastJSON({"learned": learned, "seq": seq})


@router.post("/learn", response_model=LearnResult,
             summary="Learn (default model)", description=_DOC)
async def learn_default(body: LearnBody, host: WriteDefaultModel) -> FastJSON:
    return await learn(host, body)


@router.post("/models/{name}/learn", response_model=LearnResult,
             summary="Learn", description=_DOC)
async def learn_named(body: LearnBody, host: WriteModel) -> FastJSON:
    return await learn(host, body)
