"""Dependencies of the routers, as ``Annotated`` aliases (swap them with ``dependency_overrides``).

Each route takes one dependency that checks access and resolves the model, on top of
:func:`get_registry` (override that one to swap the models in tests), which reads the
instance's :class:`~app.node.Node`. The access check reads
the ``Authorization`` header itself rather than through a security sub-dependency: every
dependency level costs FastAPI more per request than a prediction costs the library.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable
from typing import Annotated, Any

from fastapi import Depends, HTTPException, Path, Request
from fastapi.dependencies.models import Dependant

from .dashboard.session import COOKIE, valid_session
from .errors import INVALID_KEY, MISSING_KEY, MODEL_NOT_FOUND, NOT_READY
from .hosting import ModelHost
from .node import Node
from .registry import DEFAULT_MODEL, Registry
from .schemas import MODEL_NAME
from .settings import Settings

__all__ = [
    "NamePath",
    "NodeDep",
    "ReadDefaultModel",
    "ReadModel",
    "ReadRegistry",
    "RegistryDep",
    "WriteDefaultModel",
    "WriteModel",
    "WriteRegistry",
    "access_of",
    "check_access",
    "has_key",
    "get_node",
    "get_registry",
]

NamePath = Annotated[str, Path(pattern=rf"^{MODEL_NAME}$", description="Model name.")]


def check_access(request: Request, write: bool) -> None:
    """Enforce the API keys: writes need one when keys are set; reads too with ``protect_reads``.

    A ``GET`` read may instead carry the dashboard's sign-in cookie
    (:mod:`app.dashboard.session`); a write always needs the bearer key.

    Raises
    ------
    HTTPException
        401 without a bearer token, 403 with a key that is not configured.
    """
    settings: Settings = request.app.state.settings
    if not settings.api_keys or not (write or settings.protect_reads):
        return
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        if not write and request.method == "GET" and valid_session(request.cookies.get(COOKIE), settings.api_keys):
            return
        raise HTTPException(status_code=401, detail=MISSING_KEY, headers={"WWW-Authenticate": "Bearer"})
    given = token.strip().encode()
    if not any(hmac.compare_digest(given, key.encode()) for key in settings.api_keys):
        raise HTTPException(status_code=403, detail=INVALID_KEY)


def has_key(request: Request) -> bool:
    """Whether the caller counts as trusted: it showed a configured API key, or there are none
    (then every caller is alike). Pending ids of callers without one never push out those of
    callers with one (:class:`app.pending.PendingIds`)."""
    settings: Settings = request.app.state.settings
    if not settings.api_keys:
        return True
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    given = token.strip().encode()
    return scheme.lower() == "bearer" and any(hmac.compare_digest(given, key.encode()) for key in settings.api_keys)


def _ready_node(request: Request) -> Node:
    node: Node | None = getattr(request.app.state, "node", None)
    if node is None or not node.ready:
        raise HTTPException(status_code=503, detail=NOT_READY)
    return node


async def get_node(request: Request) -> Node:
    """The instance (its role, its models); 503 until the lifespan handler has loaded the models."""
    return _ready_node(request)


async def get_registry(request: Request) -> Registry:
    """The loaded models; 503 until the lifespan handler has loaded them."""
    return _ready_node(request).registry


NodeDep = Annotated[Node, Depends(get_node)]
RegistryDep = Annotated[Registry, Depends(get_registry)]


def _lookup(registry: Registry, name: str) -> ModelHost:
    host = registry.get(name)
    if host is None:
        raise HTTPException(status_code=404, detail=MODEL_NOT_FOUND)
    return host


async def registry_for_read(request: Request, registry: RegistryDep) -> Registry:
    """The registry, after the read access check."""
    check_access(request, write=False)
    return registry


async def registry_for_write(request: Request, registry: RegistryDep) -> Registry:
    """The registry, after the write access check."""
    check_access(request, write=True)
    return registry


async def model_for_read(name: NamePath, request: Request, registry: RegistryDep) -> ModelHost:
    """The model named in the path, for a read (404 if there is none)."""
    check_access(request, write=False)
    return _lookup(registry, name)


async def model_for_write(name: NamePath, request: Request, registry: RegistryDep) -> ModelHost:
    """The model named in the path, for a write (404 if there is none)."""
    check_access(request, write=True)
    return _lookup(registry, name)


async def default_for_read(request: Request, registry: RegistryDep) -> ModelHost:
    """The model named ``default``, for a read (404 if it was deleted)."""
    check_access(request, write=False)
    return _lookup(registry, DEFAULT_MODEL)


async def default_for_write(request: Request, registry: RegistryDep) -> ModelHost:
    """The model named ``default``, for a write (404 if it was deleted)."""
    check_access(request, write=True)
    return _lookup(registry, DEFAULT_MODEL)


#: The dependencies above that check access, and whether for a write.
_ACCESS: dict[Callable[..., Any], bool] = {
    registry_for_read: False,
    model_for_read: False,
    default_for_read: False,
    registry_for_write: True,
    model_for_write: True,
    default_for_write: True,
}


def access_of(dependant: Dependant) -> bool | None:
    """Which access check a route's dependencies make: True for a write's, False for a
    read's, None for none. A route whose body is parsed before its dependencies run makes
    that check first (:class:`app.json_route.JSONRoute`): a caller without a key is answered
    401, whatever its body."""
    checks = {_ACCESS[d.call] for d in dependant.dependencies if d.call in _ACCESS}
    return max(checks) if checks else None


ReadRegistry = Annotated[Registry, Depends(registry_for_read)]
WriteRegistry = Annotated[Registry, Depends(registry_for_write)]
ReadModel = Annotated[ModelHost, Depends(model_for_read)]
WriteModel = Annotated[ModelHost, Depends(model_for_write)]
ReadDefaultModel = Annotated[ModelHost, Depends(default_for_read)]
WriteDefaultModel = Annotated[ModelHost, Depends(default_for_write)]
