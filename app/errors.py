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


def install_handlers(app: FastAPI) -> None:
    """Map the domain exceptions raised below the routers to fixed HTTP errors."""

    async def not_available(_: Request, __: Exception) -> Response:
        return _detail(404, MODEL_NOT_FOUND)

    async def recovering(_: Request, __: Exception) -> Response:
        return _detail(503, RECOVERING)

    async def storage_failure(_: Request, __: Exception) -> Response:
        return _detail(503, STORAGE_FAILURE)

    async def learn_failure(_: Request, __: Exception) -> Response:
        return _detail(500, LEARN_FAILURE)

    async def conflict(_: Request, __: Exception) -> Response:
        return _detail(409, CONFIG_CONFLICT)

    async def too_many(_: Request, __: Exception) -> Response:
        return _detail(409, TOO_MANY_MODELS)

    app.add_exception_handler(RequestValidationError, validation_error_handler)
    app.add_exception_handler(NotAvailable, not_available)
    app.add_exception_handler(Recovering, recovering)
    app.add_exception_handler(StorageFailure, storage_failure)
    app.add_exception_handler(LearnFailure, learn_failure)
    app.add_exception_handler(ConfigConflict, conflict)
    app.add_exception_handler(TooManyModels, too_many)
