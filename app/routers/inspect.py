"""``/models/{name}/metrics``, ``/tree`` and ``/explain``: looking inside a model."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from app.deps import ReadModel
from app.errors import FastJSON
from app.json_route import JSONRoute
from app.schemas import ExplainBody
from app.validation import check_features

router = APIRouter(prefix="/models/{name}", tags=["inspect"], route_class=JSONRoute)


@router.get("/metrics", summary="Prequential metrics", response_model=dict[str, Any])
async def model_metrics(host: ReadModel) -> FastJSON:
    """Test-then-train scores of every labelled event: log loss, Brier, accuracy, expected
    calibration error and reliability-diagram bins, over all events (`all`) and over the most
    recent window (`recent`). `unscored` counts events learned before any label was seen."""
    return FastJSON(host.metrics())


@router.get("/tree", summary="The tree as data", response_model=dict[str, Any])
async def model_tree(host: ReadModel) -> FastJSON:
    """The model's tree as plain data (the library's ``tree_``)."""
    return FastJSON(host.tree())


@router.post("/explain", summary="Explain a prediction", response_model=dict[str, Any])
async def model_explain(body: ExplainBody, host: ReadModel) -> FastJSON:
    """The path the instance takes through the tree and how each node shapes its probabilities."""
    check_features(body.features, ("body", "features"), host.limits)
    return FastJSON(host.explain(body.features))
