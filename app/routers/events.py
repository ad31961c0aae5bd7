"""``/models/{name}/events``: the model's durable event log, a page at a time (export and audit)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Query, Request

from ..deps import ReadModel
from ..export import EXPORTS_BUSY, EventExport, ExportSlots
from ..json_route import JSONRoute
from ..schemas import LoggedEvents
from ..settings import Settings

__all__ = ["EVENTS_DEFAULT", "EVENTS_MAX", "router"]

router = APIRouter(prefix="/models/{name}", tags=["events"], route_class=JSONRoute)

#: Events per page when ``limit`` is not given, and the most one page may ask for.
EVENTS_DEFAULT = 1_000
EVENTS_MAX = 10_000

#: The largest sequence number a log can hold (a signed 64-bit integer in both engines).
SEQ_MAX = 2**63 - 1


@router.get(
    "/events",
    summary="The event log",
    response_model=LoggedEvents,
    responses={
        429: {"description": "Too many exports are streaming (`max_exports`); retry after `Retry-After` seconds."},
        503: {"description": "The event log could not be read."},
    },
)
async def model_events(
    host: ReadModel,
    request: Request,
    after: Annotated[int, Query(ge=0, le=SEQ_MAX, description="Only events with a larger `seq`.")] = 0,
    limit: Annotated[int, Query(ge=1, le=EVENTS_MAX, description="Most events returned.")] = EVENTS_DEFAULT,
) -> EventExport:
    """The model's logged events with `seq > after`, oldest first, at most `limit`:
    `{"events": [{"seq", "features", "label"}]}`. Only committed (durable) events are
    listed; a delayed label's `features` are those of its prediction. Page through the log
    with `after` = the last `seq` received until the page is empty.

    The answer is streamed as the client reads it; at most `max_exports` answers stream at
    once (429 with `Retry-After` beyond), and one whose client reads nothing for
    `export_stall_seconds` is cut off (it ends without its last chunk)."""
    settings: Settings = request.app.state.settings
    slots: ExportSlots = request.app.state.exports
    if not slots.take():
        raise HTTPException(status_code=429, detail=EXPORTS_BUSY, headers={"Retry-After": "1"})
    export = EventExport(host, after, limit, slots, settings.export_stall_seconds)
    await export.read_first()
    return export
