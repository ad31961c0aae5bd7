"""``POST /predict_proba`` and ``POST /models/{name}/predict_proba``."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from ..deps import ReadDefaultModel, ReadModel, has_key
from ..errors import PENDING_FULL, PENDING_TAKEN, FastJSON
from ..hosting import ModelHost
from ..json_route import JSONRoute
from ..pending import IdTaken, NoRoom
from ..schemas import PredictBody, PredictResult
from ..validation import check_features, check_id, check_instances

router = APIRouter(tags=["predict"], route_class=JSONRoute)

_DOC = """Class probabilities for one instance (`features`, optional `id` to label it later)
or a batch (`instances`). Keys are labels (booleans as `"true"`/`"false"`); before any label
has been learned the answer is `{}` for each instance.

An instance of a batch is a features object, or `{"features": {...}, "id": ...}` to label it
later by its id; the two forms mix in one batch. An instance is read as the second form when
its `features` is an object (a feature value never is) or its keys are exactly `features`
and `id`; it then has no other key, and its `id` is a string, an integer or null (no id).

An `id` is written once: predicting again with an id that is pending is a 409 naming the id's
field (`["body", "id"]`, `["body", "instances", 3, "id"]`), and a batch names each id at most
once (422 at the second). Each model keeps at most `pending_max` ids (and `pending_max_bytes`
of their features) for `pending_ttl_seconds`; with no room left the answer is 429 naming the
first id that does not fit. Ids sent without an API key never push out ids sent with one. A
batch's ids are kept all or none: when one is refused, none is kept.

Every answer carries the `seq` of the model's last event applied on this instance when it
predicted. With `min_seq` (for instance the `seq` a learn answered), the prediction waits
until this instance has applied that event, at most `min_seq_timeout_seconds` (503 past
it): read-your-writes on any instance of a deployment."""

#: The answers naming a refused id, for the OpenAPI schema.
ID_RESPONSES: dict[int | str, dict[str, Any]] = {
    409: {"description": f"{PENDING_TAKEN} `detail` is a list of `{{type, loc, msg}}`; `loc` names the id."},
    429: {"description": f"{PENDING_FULL} `detail` is a list of `{{type, loc, msg}}`; `loc` names the id."},
}


def id_refused(exc: IdTaken | NoRoom, batch: bool) -> FastJSON:
    """409 (the id is pending) or 429 (no room for it), naming the id's field as a 422 names
    a field: ``{"detail": [{"type", "loc", "msg"}]}``."""
    loc = ["body", "instances", exc.index, "id"] if batch else ["body", "id"]
    status, kind, msg = (
        (409, "id_pending", PENDING_TAKEN) if isinstance(exc, IdTaken) else (429, "pending_full", PENDING_FULL)
    )
    return FastJSON({"detail": [{"type": kind, "loc": loc, "msg": msg}]}, status_code=status)


async def predict(host: ModelHost, body: PredictBody, request: Request) -> FastJSON:
    """Check the request's limits, wait for ``min_seq``, then predict (one model state, and
    the seq it is at, answers every instance: a large batch is paced under the model's
    apply lock, :meth:`app.hosting.ModelHost.predict_many_paced`)."""
    limits = host.limits
    if body.instances is not None:
        xs, keys = check_instances(body.instances, ("body", "instances"), limits)
    else:
        assert body.features is not None
        check_features(body.features, ("body", "features"), limits)
        if body.id is not None:
            check_id(body.id, ("body", "id"), limits)
    if body.min_seq is not None:
        await host.wait_applied(body.min_seq, request.app.state.settings.min_seq_timeout_seconds)
    if body.instances is not None:
        try:
            rows, seq = await host.predict_many_paced(xs, keys, has_key(request))
        except (IdTaken, NoRoom) as exc:
            return id_refused(exc, batch=True)
        return FastJSON({"probabilities": rows, "seq": seq})
    assert body.features is not None
    if body.id is None:
        return FastJSON({"probabilities": host.predict_one(body.features), "seq": host.seq})
    try:
        return FastJSON({"probabilities": host.predict_one(body.features, body.id, has_key(request)), "seq": host.seq})
    except (IdTaken, NoRoom) as exc:
        return id_refused(exc, batch=False)


@router.post(
    "/predict_proba",
    response_model=PredictResult,
    responses=ID_RESPONSES,
    summary="Predict probabilities (default model)",
    description=_DOC,
)
async def predict_default(body: PredictBody, host: ReadDefaultModel, request: Request) -> FastJSON:
    return await predict(host, body, request)


@router.post(
    "/models/{name}/predict_proba",
    response_model=PredictResult,
    responses=ID_RESPONSES,
    summary="Predict probabilities",
    description=_DOC,
)
async def predict_named(body: PredictBody, host: ReadModel, request: Request) -> FastJSON:
    return await predict(host, body, request)
