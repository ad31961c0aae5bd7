"""``/models``: create, list, read and delete models."""

from __future__ import annotations

import re
from typing import Annotated, Any

from fastapi import APIRouter, Body, HTTPException, Response

from ..deps import NamePath, ReadModel, ReadRegistry, WriteRegistry
from ..errors import MODEL_NOT_FOUND
from ..exceptions import SourceGone
from ..forks import ForkHost, progress
from ..hosting import ModelHost
from ..json_route import JSONRoute
from ..learning import FORK_FIELD
from ..model_limits import check_model_sizes, check_tree_count
from ..registry import Registry
from ..schemas import ForkedModelInfo, ForkedModelList, ForkProgress
from ..validation import field_error

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")

router = APIRouter(prefix="/models", tags=["models"], route_class=JSONRoute)

CONFIG_EXAMPLE: dict[str, Any] = {}

ConfigBody = Annotated[
    dict[str, Any],
    Body(
        description='`ProbabilityTree` parameters, or `{"estimator": "forest", "n_trees", "method", '
        '"seed", "tree", "weighted", "poisson_rate", "variants"}` for a `ProbabilityForest` (`tree`: its '
        "members' parameters, `variants`: those that differ between members); omitted "
        "ones take the library's defaults. Optionally `costs`, a cost matrix (decision to "
        "{label: cost}): the prequential metrics then also hold the improved squared error and the cost "
        "of the decisions of least expected cost. Unknown or invalid parameters get 422 naming the "
        'parameter. A fork: `{"config": {...}, "from": "source"}`, a model of that config that '
        "learns the source's logged events, from the first, then each new one (docs: service/forks).",
        examples=[
            CONFIG_EXAMPLE,
            {"estimator": "forest", "n_trees": 10, "method": "bt+"},
            {"config": {"estimator": "forest", "n_trees": 10}, "from": "default"},
        ],
    ),
]


def _fork(host: ModelHost, registry: Registry) -> ForkProgress | None:
    if not isinstance(host, ForkHost):
        return None
    return ForkProgress.model_validate(progress(host, registry.get(host.source)))


def info(host: ModelHost, registry: Registry) -> ForkedModelInfo:
    """A model's name, complete config, summary and last sequence number (a fork's progress too)."""
    return ForkedModelInfo(
        name=host.name,
        config=host.config,
        summary=host.summary(),
        seq=host.seq,
        labels=host.labels(),
        fork=_fork(host, registry),
    )


def listed(host: ModelHost, registry: Registry) -> ForkedModelInfo:
    """:func:`info`, or for a model that cannot be served now, ``{"unavailable": why}`` as its summary."""
    if not host.recovering:
        return info(host, registry)
    why = host.unavailable or "it is being rebuilt from the store"
    summary = {"unavailable": why}
    return ForkedModelInfo(
        name=host.name, config=host.config, summary=summary, seq=host.seq, fork=_fork(host, registry)
    )


@router.get("", response_model=ForkedModelList, response_model_exclude_none=True, summary="List models")
async def list_models(registry: ReadRegistry) -> ForkedModelList:
    """Every model with its config and summary (a model that cannot be served now is listed
    with ``{"unavailable": why}`` as its summary: the others are not held up by it), and for a
    fork its progress (``fork``)."""
    return ForkedModelList(models=[listed(h, registry) for h in registry.all()])


def _fork_request(name: str, body: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """``(config, source)`` of a fork request ``{"config": {...}, "from": source}``.

    Raises
    ------
    InvalidInput
        Another field, a ``config`` that is no object, a ``from`` that is no model name or is ``name``.
    """
    extra = sorted(set(body) - {"config", FORK_FIELD})
    if extra:
        raise field_error(
            ("body", extra[0]),
            f'A fork request holds "config" and "{FORK_FIELD}" only; put the model\'s parameters in "config"',
            "config_error",
        )
    config, source = body.get("config", {}), body[FORK_FIELD]
    if not isinstance(config, dict):
        raise field_error(("body", "config"), "Expected an object of the fork's parameters", "dict_type")
    if not isinstance(source, str) or not NAME.fullmatch(source):
        raise field_error(("body", FORK_FIELD), "Expected the name of the model to fork from", "model_name")
    if source == name:
        raise field_error(
            ("body", FORK_FIELD), "A model cannot fork itself; name another model to learn the events of", "fork_self"
        )
    return config, source


@router.put(
    "/{name}",
    response_model=ForkedModelInfo,
    response_model_exclude_none=True,  # ``fork`` for a fork only
    status_code=201,
    summary="Create a model",
    responses={
        200: {"description": "It exists with this config."},
        404: {"description": "A fork's `from` names no model."},
        409: {"description": "It exists with another config (`differences` names each parameter)."},
    },
)
async def put_model(name: NamePath, config: ConfigBody, registry: WriteRegistry, response: Response) -> ForkedModelInfo:
    """Create model ``name`` with ``config`` (201); the same config again is a no-op (200),
    another is 409 naming each parameter that differs. A config over the service's size bounds
    (``n_trees`` and others, the library's defaults included) is refused with 422 naming the
    parameter, the bound and the value. ``{"config": {...}, "from": source}`` creates a fork:
    it learns ``source``'s logged events in the background, then follows it (404 if there is
    no such model); so does the config a fork's ``GET`` shows, its parameters beside ``from``."""
    source = None
    if "config" in config and FORK_FIELD not in config:  # a fork request without its source
        raise field_error(
            ("body", FORK_FIELD),
            f'Field required: a body with "config" creates a fork, and "{FORK_FIELD}" names the model whose '
            "events it learns; a model's own parameters go at the top level of the body",
            "missing",
        )
    if FORK_FIELD in config:
        if "config" not in config:  # the form GET /models/{name} shows a fork's config in: beside "from"
            config = {"config": {k: v for k, v in config.items() if k != FORK_FIELD}, FORK_FIELD: config[FORK_FIELD]}
        config, source = _fork_request(name, config)
        if registry.get(source) is None:
            raise HTTPException(status_code=404, detail=f"Model {source!r} not found (body.{FORK_FIELD}).")
    check_tree_count(config, registry.settings)  # before the library builds the trees
    check_model_sizes(registry.build_config(config)[0], registry.settings)
    try:
        host, created = await registry.create(name, config, source)
    except SourceGone:  # deleted since the check above: the 404 names the source, not the fork
        raise HTTPException(status_code=404, detail=f"Model {source!r} not found (body.{FORK_FIELD}).") from None
    if not created:
        response.status_code = 200
    return info(host, registry)


@router.get("/{name}", response_model=ForkedModelInfo, response_model_exclude_none=True, summary="Read a model")
async def get_model(host: ReadModel, registry: ReadRegistry) -> ForkedModelInfo:
    """The model's complete config (without ``costs``, it rebuilds the model) and summary; a
    fork's progress (``fork``: ``from``, ``seq``, ``source_seq``, ``state``)."""
    return info(host, registry)


@router.delete(
    "/{name}",
    status_code=204,
    summary="Delete a model",
    responses={409: {"description": "Forks follow it (`forks` names them): delete them first."}},
)
async def delete_model(name: NamePath, registry: WriteRegistry) -> Response:
    """Delete the model, its event log and snapshots (409 naming them while forks follow it)."""
    if not await registry.delete(name):
        raise HTTPException(status_code=404, detail=MODEL_NOT_FOUND)
    return Response(status_code=204)
