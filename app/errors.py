"""The service's fixed error sentences and the handlers that turn domain errors into responses."""

from __future__ import annotations

from typing import Any

import orjson
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.responses import Response

from app.hosting import LearnFailure, NotAvailable, Recovering, StorageFailure
from app.registry import ConfigConflict, TooManyModels
from app.validation import validation_error_handler

__all__ = [
    "CONFIG_CONFLICT",
    "FastJSON",
    "INVALID_KEY",
    "LEARN_FAILURE",
    "MISSING_KEY",
    "MODEL_NOT_FOUND",
    "NOT_READY",
    "RECOVERING",
    "STORAGE_FAILURE",
    "TOO_MANY_MODELS",
    "install_handlers",
]

MODEL_NOT_FOUND = "Model not found."
CONFIG_CONFLICT = "A model with this name exists with a different config."
TOO_MANY_MODELS = "The model limit is reached."
MISSING_KEY = "Missing bearer token."
INVALID_KEY = "Invalid API key."
NOT_READY = "Service is starting."
RECOVERING = "Model is recovering; retry shortly."
STORAGE_FAILURE = "Events could not be stored; none were learned."
LEARN_FAILURE = "Internal error while learning; none of the events was learned."


class FastJSON(Response):
    """A JSON response encoded with orjson (exact float round trip, fast)."""

    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content)


def _detail(status: int, detail: str) -> FastJSON:
    return FastJSON({"detail": detail}, status_code=status)


# each domain exception below the routers, and the fixed HTTP error it becomes
_FIXED: dict[type[Exception], tuple[int, str]] = {
    NotAvailable: (404, MODEL_NOT_FOUND),
    Recovering: (503, RECOVERING),
    StorageFailure: (503, STORAGE_FAILURE),
    LearnFailure: (500, LEARN_FAILURE),
    ConfigConflict: (409, CONFIG_CONFLICT),
    TooManyModels: (409, TOO_MANY_MODELS),
}


def install_handlers(app: FastAPI) -> None:
    """Map the domain exceptions raised below the routers to fixed HTTP errors."""

    async def fixed(_: Request, exc: Exception) -> Response:
        # the nearest class in _FIXED, as Starlette chose this handler (subclasses included)
        status, detail = next(_FIXED[c] for c in type(exc).__mro__ if c in _FIXED)
        return _detail(status, detail)

    app.add_exception_handler(RequestValidationError, validation_error_handler)
    for exception in _FIXED:
        app.add_exception_handler(exception, fixed)
