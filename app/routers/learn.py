"""``POST /learn`` and ``POST /models/{name}/learn``: durable learning from labelled events."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from app.deps import WriteDefaultModel, WriteModel
from app.errors import FastJSON
from app.exceptions import Loc
from app.hosting import LearnEvent, ModelHost
from app.json_route import JSONRoute
from app.schemas import LearnBody, LearnResult
from app.validation import Limits, check_features, check_id, check_label, check_length, field_error

router = APIRouter(tags=["learn"], route_class=JSONRoute)

_DOC = """Learn one event (`features`, `label`, optional `id`) or a batch (`events`).

An event with an `id` and a `label` but no `features` labels the features of the earlier
`predict_proba` call made with that `id`. The response is sent only once the events are
durable; `seq` is the sequence number of the request's last event. A refused event (422,
naming the field) means none of the request's events was learned. A batch names each `id`
at most once (422 otherwise)."""


async def learn(host: ModelHost, body: LearnBody) -> FastJSON:
    """Check the request's limits, queue it for the model's writer, answer once durable."""
    limits = host.limits
    if body.events is None:
        assert body.label is not None
        events = [_checked(body.features, body.label, body.id, ("body",), limits)]
    else:
        check_length(body.events, ("body", "events"), limits)
        events = [_checked(e.get("features"), e["label"], e.get("id"), ("body", "events", i), limits)
                  for i, e in enumerate(body.events)]
        _check_ids_once(events)
    learned, seq = await host.learn(events, body.events is not None)
    return FastJSON({"learned": learned, "seq": seq})


def _check_ids_once(events: list[LearnEvent]) -> None:
    """Refuse a batch that names one id twice: an id labels one prediction, once."""
    first: dict[str | int, int] = {}
    for i, event in enumerate(events):
        if event.id is None:
            continue
        if event.id in first:
            raise field_error(("body", "events", i, "id"), f"This id is also at events[{first[event.id]}]; "
                              "a batch names each id at most once", "duplicate_id")
        first[event.id] = i


def _checked(features: dict[str, Any] | None, label: Any, id: Any, loc: Loc, limits: Limits) -> LearnEvent:
    """One event, its values checked against the limits."""
    if features is not None:
        check_features(features, (*loc, "features"), limits)
    elif id is None:
        raise field_error(loc, "Value error, an event needs 'features', or an 'id' of an earlier prediction")
    check_label(label, (*loc, "label"), limits)
    if id is not None:
        check_id(id, (*loc, "id"), limits)
    return LearnEvent(features, label, id)


@router.post("/learn", response_model=LearnResult,
             summary="Learn (default model)", description=_DOC)
async def learn_default(body: LearnBody, host: WriteDefaultModel) -> FastJSON:
    return await learn(host, body)


@router.post("/models/{name}/learn", response_model=LearnResult,
             summary="Learn", description=_DOC)
async def learn_named(body: LearnBody, host: WriteModel) -> FastJSON:
    return await learn(host, body)
