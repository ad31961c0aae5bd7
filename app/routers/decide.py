"""``POST /decide`` and ``POST /models/{name}/decide``: cost-sensitive decisions."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from ..deps import ReadDefaultModel, ReadModel, has_key
from ..errors import NO_LABELS, FastJSON
from ..hosting import ModelHost
from ..json_route import JSONRoute
from ..pending import IdTaken, NoRoom
from ..schemas import DecideBatchResult, DecideBody, DecideResult
from ..validation import check_costs, check_features, check_id, check_instances
from .predict import ID_RESPONSES, id_refused

router = APIRouter(tags=["decide"], route_class=JSONRoute)

_DOC = """The decision of least expected cost for one instance (`features`, optional `id` to
label it later, as for `/predict_proba`) or a batch (`instances`), under `costs`: decision to
`{label: cost}`, what each decision costs when each label turns out true. The expected cost of
a decision is the sum over labels of probability times cost; the answer names the decision of
least expected cost (on a tie, the first of the tied decisions in the order of `costs`), every
decision's expected cost, the probabilities (as `/predict_proba` gives them) and the `seq`
they were computed at.

An instance of a batch is a features object, or `{"features": {...}, "id": ...}` to label
it later by its id, with the rules of `/predict_proba` (409 or 429 naming a refused id; a
batch's ids are kept all or none).

One instance answers `{"decision", "expected_costs", "probabilities"}`; a batch answers the
same keys with one list entry per instance: `{"decisions": [...], "expected_costs": [...],
"probabilities": [...]}`.

Every decision needs a cost for every label the model has seen (labels as the keys of
`probabilities`: booleans as `"true"`/`"false"`, integers in decimal); a cost for a label
the model has not seen is fine. Bad costs get 422 at `["body", "costs", ...]`, naming the
decision (and label) at fault; at most 100 decisions. Before the model has learned any label
the answer is 409."""

_RESPONSES: dict[int | str, dict[str, Any]] = ID_RESPONSES | {
    409: {"description": f"{NO_LABELS} Or: {ID_RESPONSES[409]['description']}"}
}


async def decide(host: ModelHost, body: DecideBody, request: Request) -> FastJSON:
    """Check the request's limits and the costs, then decide."""
    limits = host.limits
    costs = check_costs(body.costs, ("body", "costs"), limits)
    if body.instances is not None:
        xs, keys = check_instances(body.instances, ("body", "instances"), limits)
        try:
            return FastJSON(await host.decide_many_paced(xs, costs, keys, has_key(request)))
        except (IdTaken, NoRoom) as exc:
            return id_refused(exc, batch=True)
    assert body.features is not None
    check_features(body.features, ("body", "features"), limits)
    if body.id is None:
        return FastJSON(host.decide_one(body.features, costs) | {"seq": host.seq})
    check_id(body.id, ("body", "id"), limits)
    try:
        return FastJSON(host.decide_one(body.features, costs, body.id, has_key(request)) | {"seq": host.seq})
    except (IdTaken, NoRoom) as exc:
        return id_refused(exc, batch=False)


@router.post(
    "/decide",
    response_model=DecideResult | DecideBatchResult,
    responses=_RESPONSES,
    summary="Decide at least expected cost (default model)",
    description=_DOC,
)
async def decide_default(body: DecideBody, host: ReadDefaultModel, request: Request) -> FastJSON:
    return await decide(host, body, request)


@router.post(
    "/models/{name}/decide",
    response_model=DecideResult | DecideBatchResult,
    responses=_RESPONSES,
    summary="Decide at least expected cost",
    description=_DOC,
)
async def decide_named(body: DecideBody, host: ReadModel, request: Request) -> FastJSON:
    return await decide(host, body, request)
