"""``/models``: create, list, read and delete models."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, HTTPException, Response

from ..deps import NamePath, ReadModel, ReadRegistry, WriteRegistry
from ..errors import MODEL_NOT_FOUND
from ..hosting import ModelHost
from ..json_route import JSONRoute
from ..model_limits import check_model_sizes, check_tree_count
from ..schemas import ModelInfo, ModelList

router = APIRouter(prefix="/models", tags=["models"], route_class=JSONRoute)

CONFIG_EXAMPLE: dict[str, Any] = {}

ConfigBody = Annotated[
    dict[str, Any],
    Body(
        description='`ProbabilityTree` parameters, or `{"estimator": "forest", "n_trees", "method", '
        '"seed", "tree"}` for a `ProbabilityForest` (`tree`: its members\' parameters); omitted '
        "ones take the library's defaults. Optionally `costs`, a cost matrix (decision to "
        "{label: cost}): the prequential metrics then also hold the improved squared error and the cost "
        "of the decisions of least expected cost. Unknown or invalid parameters get 422 naming the "
        "parameter.",
        examples=[CONFIG_EXAMPLE, {"estimator": "forest", "n_trees": 10, "method": "bt+"}],
    ),
]


def info(host: ModelHost) -> ModelInfo:
    """A model's name, complete config, summary and last sequence number."""
    return ModelInfo(name=host.name, config=host.config, summary=host.summary(), seq=host.seq)


def listed(host: ModelHost) -> ModelInfo:
    """:func:`info`, or for a model that cannot be served now, ``{"unavailable": why}`` as its summary."""
    if not host.recovering:
        return info(host)
    why = host.unavailable or "it is being rebuilt from the store"
    return ModelInfo(name=host.name, config=host.config, summary={"unavailable": why}, seq=host.seq)


@router.get("", response_model=ModelList, summary="List models")
async def list_models(registry: ReadRegistry) -> ModelList:
    """Every model with its config and summary (a model that cannot be served now is listed
    with ``{"unavailable": why}`` as its summary: the others are not held up by it)."""
    return ModelList(models=[listed(h) for h in registry.all()])


@router.put(
    "/{name}",
    response_model=ModelInfo,
    status_code=201,
    summary="Create a model",
    responses={
        200: {"description": "It exists with this config."},
        409: {"description": "It exists with another config."},
    },
)
async def put_model(name: NamePath, config: ConfigBody, registry: WriteRegistry, response: Response) -> ModelInfo:
    """Create model ``name`` with ``config`` (201); the same config again is a no-op (200).
    A config over the service's size bounds (``n_trees`` and others, the library's defaults
    included) is refused with 422 naming the parameter, the bound and the value."""
    check_tree_count(config, registry.settings)  # before the library builds the trees
    check_model_sizes(registry.build_config(config)[0], registry.settings)
    host, created = await registry.create(name, config)
    if not created:
        response.status_code = 200
    return info(host)


@router.get("/{name}", response_model=ModelInfo, summary="Read a model")
async def get_model(host: ReadModel) -> ModelInfo:
    """The model's complete config (without ``costs``, it rebuilds the model) and summary."""
    return info(host)


@router.delete("/{name}", status_code=204, summary="Delete a model")
async def delete_model(name: NamePath, registry: WriteRegistry) -> Response:
    """Delete the model, its event log and snapshots."""
    if not await registry.delete(name):
        raise HTTPException(status_code=404, detail=MODEL_NOT_FOUND)
    return Response(status_code=204)
