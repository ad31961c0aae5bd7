"""``/models/{name}/metrics`` (and its ``/history``), ``/tree`` and ``/explain``: looking inside a model."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Response

from ..deps import ReadModel
from ..errors import FastJSON
from ..json_route import JSONRoute
from ..schemas import ExplainBody
from ..validation import check_features

router = APIRouter(prefix="/models/{name}", tags=["inspect"], route_class=JSONRoute)


@router.get("/metrics", summary="Prequential metrics", response_model=dict[str, Any])
async def model_metrics(host: ReadModel) -> FastJSON:
    """Test-then-train scores of every labelled event: log loss, Brier, accuracy, expected
    calibration error and reliability-diagram bins, over all events (`all`) and over the most
    recent window (`recent`). `unscored` counts events learned before any label was seen. A model
    created with `costs` also has `improved_squared_error` (Fan et al. 2005, Eq. 3), `decision_cost`
    (the mean cost of the decisions of least expected cost) and `costed` (the events they cover)."""
    return FastJSON(host.metrics())


@router.get("/metrics/history", summary="Metrics history", response_model=dict[str, Any])
async def model_metrics_history(
    host: ReadModel,
    after: Annotated[int, Query(ge=0, description="Only points and drift events with a larger `seq`.")] = 0,
) -> Response:
    """The windowed prequential metrics over time and the model's drift events:
    `{"points": [{"seq", "time", "events_per_s", "n", "log_loss", "brier", "accuracy", "ece",
    "reliability"}], "drifts": [{"seq", "event"}]}`. A point is taken every `history_every`
    events (and on slow streams at the first event `history_seconds` after the last one);
    the newest `history_points` points and drift events are kept, with the snapshots."""
    return Response(host.history(after), media_type="application/json")


@router.get("/tree", summary="The tree as data", response_model=dict[str, Any])
async def model_tree(
    host: ReadModel,
    member: Annotated[
        int | None, Query(ge=0, description='A forest\'s tree (from 0): that tree alone, as `{"member", ...}`.')
    ] = None,
) -> FastJSON:
    """The model's tree as plain data (the library's ``tree_``: a forest's is
    `{"members": [...]}`), or one tree of a forest (`member`). An answer of more than
    `max_answer_values` values (a value per class and six more per node) is refused: 422 at
    `["query", "member"]`, for a forest saying to ask for one tree at a time."""
    return FastJSON(host.tree(member))


@router.post("/explain", summary="Explain a prediction", response_model=dict[str, Any])
async def model_explain(body: ExplainBody, host: ReadModel) -> FastJSON:
    """The path the instance takes through the tree and how each node shapes its probabilities."""
    check_features(body.features, ("body", "features"), host.limits)
    return FastJSON(host.explain(body.features))
