"""``POST /predict_proba`` and ``POST /models/{name}/predict_proba``."""

from __future__ import annotations

from fastapi import APIRouter

from app.deps import ReadDefaultModel, ReadModel
from app.errors import FastJSON
from app.hosting import ModelHost
from app.json_route import JSONRoute
from app.schemas import PredictBody, PredictResult
from app.validation import check_features, check_id, check_length

router = APIRouter(tags=["predict"], route_class=JSONRoute)

_DOC = """Class probabilities for one instance (`features`, optional `id` to label it later)
or a batch (`instances`). Keys are labels (booleans as `"true"`/`"false"`); before any label
has been learned the answer is `{}` for each instance."""


def predict(host: ModelHost, body: PredictBody) -> FastJSON:
    """Check the request's limits and predict (synchronously: a consistent model state)."""
    limits = host.limits
    if body.instances is not None:
        check_length(body.instances, ("body", "instances"), limits)
        for i, x in enumerate(body.instances):
            check_features(x, ("body", "instances", i), limits)
        return FastJSON({"probabilities": host.predict_many(body.instances)})
    assert body.features is not None
    check_features(body.features, ("body", "features"), limits)
    if body.id is not None:
        check_id(body.id, ("body", "id"), limits)
    return FastJSON({"probabilities": host.predict_one(body.features, body.id)})


@router.post("/predict_proba", response_model=PredictResult,
             summary="Predict probabilities (default model)", description=_DOC)
async def predict_default(body: PredictBody, host: ReadDefaultModel) -> FastJSON:
    return predict(host, body)


@router.post("/models/{name}/predict_proba", response_model=PredictResult,
             summary="Predict probabilities", description=_DOC)
async def predict_named(body: PredictBody, host: ReadModel) -> FastJSON:
    return predict(host, body)
