"""``/models/{name}/events``: the model's durable event log, a page at a time (export and audit)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from app.deps import ReadModel
from app.errors import FastJSON
from app.json_route import JSONRoute
from app.schemas import LoggedEvents

__all__ = ["EVENTS_DEFAULT", "EVENTS_MAX", "router"]

router = APIRouter(prefix="/models/{name}", tags=["events"], route_class=JSONRoute)

#: Events per page when ``limit`` is not given, and the most one page may ask for.
EVENTS_DEFAULT = 1_000
EVENTS_MAX = 10_000

#: The largest sequence number a log can hold (a signed 64-bit integer in both engines).
SEQ_MAX = 2**63 - 1


@router.get("/events", summary="The event log", response_model=LoggedEvents,
            responses={503: {"description": "The event log could not be read."}})
async def model_events(
    host: ReadModel,
    after: Annotated[int, Query(ge=0, le=SEQ_MAX, description="Only events with a larger `seq`.")] = 0,
    limit: Annotated[int, Query(ge=1, le=EVENTS_MAX, description="Most events returned.")] = EVENTS_DEFAULT,
) -> FastJSON:
    """The model's logged events with `seq > after`, oldest first, at most `limit`:
    `{"events": [{"seq", "features", "label"}]}`. Only committed (durable) events are
    listed; a delayed label's `features` are those of its prediction. Page through the log
    with `after` = the last `seq` received until the page is empty."""
    return FastJSON({"events": await host.events(after, limit)})
