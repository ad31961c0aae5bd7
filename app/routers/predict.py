"""``POST /predict_proba`` and ``POST /models/{name}/predict_proba``."""

from __future__ import annotations

from fastapi import APIRouter, Request

from ..deps import ReadDefaultModel, ReadModel, has_key
from ..errors import FastJSON
from ..hosting import ModelHost
from ..json_route import JSONRoute
from ..schemas import PredictBody, PredictResult
from ..validation import check_features, check_id, check_length

router = APIRouter(tags=["predict"], route_class=JSONRoute)

_DOC = """Class probabilities for one instance (`features`, optional `id` to label it later)
or a batch (`instances`). Keys are labels (booleans as `"true"`/`"false"`); before any label
has been learned the answer is `{}` for each instance.

An `id` is written once: predicting again with an id that is pending is a 409. Each model
keeps at most `pending_max` ids (and `pending_max_bytes` of their features) for
`pending_ttl_seconds`; with no room left the answer is 429. Ids sent without an API key never
push out ids sent with one.

Every answer carries the `seq` of the model's last event applied on this instance when it
predicted. With `min_seq` (for instance the `seq` a learn answered), the prediction waits
until this instance has applied that event, at most `min_seq_timeout_seconds` (503 past
it): read-your-writes on any instance of a deployment."""


async def predict(host: ModelHost, body: PredictBody, request: Request) -> FastJSON:
    """Check the request's limits, wait for ``min_seq``, then predict (synchronously: a
    consistent model state, and the seq it is at)."""
    limits = host.limits
    if body.instances is not None:
        check_length(body.instances, ("body", "instances"), limits)
        for i, x in enumerate(body.instances):
            check_features(x, ("body", "instances", i), limits)
    else:
        assert body.features is not None
        check_features(body.features, ("body", "features"), limits)
        if body.id is not None:
            check_id(body.id, ("body", "id"), limits)
    if body.min_seq is not None:
        await host.wait_applied(body.min_seq, request.app.state.settings.min_seq_timeout_seconds)
    if body.instances is not None:
        return FastJSON({"probabilities": host.predict_many(body.instances), "seq": host.seq})
    assert body.features is not None
    if body.id is None:
        return FastJSON({"probabilities": host.predict_one(body.features), "seq": host.seq})
    return FastJSON({"probabilities": host.predict_one(body.features, body.id, has_key(request)), "seq": host.seq})


@router.post(
    "/predict_proba", response_model=PredictResult, summary="Predict probabilities (default model)", description=_DOC
)
async def predict_default(body: PredictBody, host: ReadDefaultModel, request: Request) -> FastJSON:
    return await predict(host, body, request)


@router.post(
    "/models/{name}/predict_proba", response_model=PredictResult, summary="Predict probabilities", description=_DOC
)
async def predict_named(body: PredictBody, host: ReadModel, request: Request) -> FastJSON:
    return await predict(host, body, request)
