"""Dependencies of the routers, as ``Annotated`` aliases (swap them with ``dependency_overrides``)."""

from __future__ import annotations

import hmac
from typing import Annotated

from fastapi import Depends, HTTPException, Path, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from app.errors import INVALID_KEY, MISSING_KEY, MODEL_NOT_FOUND, NOT_READY
from app.hosting import ModelHost
from app.registry import DEFAULT_MODEL, Registry
from app.settings import Settings
from app.telemetry import Telemetry

__all__ = [
    "DefaultModelDep",
    "ModelDep",
    "ReadAccess",
    "RegistryDep",
    "SettingsDep",
    "TelemetryDep",
    "WriteAccess",
    "require_read",
    "require_write",
]


def get_settings(request: Request) -> Settings:
    """The app's settings."""
    settings: Settings = request.app.state.settings
    return settings


def get_telemetry(request: Request) -> Telemetry:
    """The app's Prometheus metrics."""
    telemetry: Telemetry = request.app.state.telemetry
    return telemetry


def get_registry(request: Request) -> Registry:
    """The loaded models; 503 until the lifespan handler has loaded them."""
    registry: Registry | None = getattr(request.app.state, "registry", None)
    if registry is None or not registry.ready:
        raise HTTPException(status_code=503, detail=NOT_READY)
    return registry


SettingsDep = Annotated[Settings, Depends(get_settings)]
TelemetryDep = Annotated[Telemetry, Depends(get_telemetry)]
RegistryDep = Annotated[Registry, Depends(get_registry)]
NamePath = Annotated[str, Path(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$", description="Model name.")]

_bearer = HTTPBearer(auto_error=False, description="An API key from STREAMTREE_API_KEYS.")
Credentials = Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]


def _check_key(settings: Settings, credentials: HTTPAuthorizationCredentials | None) -> None:
    if credentials is None:
        raise HTTPException(status_code=401, detail=MISSING_KEY, headers={"WWW-Authenticate": "Bearer"})
    given = credentials.credentials.encode()
    if not any(hmac.compare_digest(given, key.encode()) for key in settings.api_keys):
        raise HTTPException(status_code=403, detail=INVALID_KEY)


def require_write(settings: SettingsDep, credentials: Credentials) -> None:
    """With API keys configured, a write needs ``Authorization: Bearer <key>`` (401/403)."""
    if settings.api_keys:
        _check_key(settings, credentials)


def require_read(settings: SettingsDep, credentials: Credentials) -> None:
    """With API keys configured and ``protect_reads`` on, a read needs a key too."""
    if settings.api_keys and settings.protect_reads:
        _check_key(settings, credentials)


WriteAccess = Depends(require_write)
ReadAccess = Depends(require_read)


def get_model(name: NamePath, registry: RegistryDep) -> ModelHost:
    """The model named in the path; 404 if there is none."""
    host = registry.get(name)
    if host is None:
        raise HTTPException(status_code=404, detail=MODEL_NOT_FOUND)
    return host


def get_default_model(registry: RegistryDep) -> ModelHost:
    """The model named ``default``; 404 if it was deleted."""
    host = registry.get(DEFAULT_MODEL)
    if host is None:
        raise HTTPException(status_code=404, detail=MODEL_NOT_FOUND)
    return host


ModelDep = Annotated[ModelHost, Depends(get_model)]
DefaultModelDep = Annotated[ModelHost, Depends(get_default_model)]
