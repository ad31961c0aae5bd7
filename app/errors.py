"""The service's fixed error sentences and the handlers that turn its exceptions into responses.

Below the routers the service raises only its own exceptions (:mod:`app.exceptions`); this
module is where they become HTTP responses.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import orjson
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.responses import Response

from .exceptions import (
    ConfigConflict,
    Conflict,
    DamagedRecord,
    InvalidInput,
    LearnFailure,
    LogUnavailable,
    ModelUnavailable,
    NoLabels,
    NotAvailable,
    NotWriter,
    PendingFull,
    PendingIdTaken,
    Recovering,
    SeqNotReached,
    StorageFailure,
    StoreUnavailable,
    TooManyHeld,
    TooManyModels,
)

__all__ = [
    "CONFIG_CONFLICT",
    "FastJSON",
    "INVALID_KEY",
    "LEARN_FAILURE",
    "INTERNAL_ERROR",
    "LOG_UNAVAILABLE",
    "MISSING_KEY",
    "MODEL_NOT_FOUND",
    "NO_LABELS",
    "NOT_READY",
    "NOT_WRITER",
    "NOT_WRITER_HEADER",
    "PENDING_FULL",
    "PENDING_TAKEN",
    "RECOVERING",
    "STORAGE_FAILURE",
    "STORE_UNAVAILABLE",
    "TOO_MANY_MODELS",
    "install_handlers",
    "validation_response",
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
LOG_UNAVAILABLE = "The event log could not be read; retry shortly."
STORE_UNAVAILABLE = "The store failed; the model was not created or deleted: retry shortly."
INTERNAL_ERROR = "Internal server error."
PENDING_TAKEN = "This id is pending already; predict with a new id."
PENDING_FULL = "No room for another pending id; label or let expire earlier ones."
NO_LABELS = "The model has learned no label yet; there are no probabilities to decide from."
#: On a 503: this instance is not the writer and learned nothing (a replica that forwarded the
#: request may send it to the writer again).
NOT_WRITER_HEADER = "x-streamtree-not-writer"
NOT_WRITER = "This instance is not the writer and no writer took the request; nothing was learned: retry shortly."


class FastJSON(Response):
    """A JSON response encoded with orjson (exact float round trip, fast). Keys that are not
    strings are written as JSON keys the way labels are (``true``/``false``, integers in
    decimal: :func:`app.schemas.label_key`): an explanation's counts are keyed by the labels
    themselves, and a model's labels may be booleans or integers."""

    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content, option=orjson.OPT_NON_STR_KEYS)


def _detail(status: int, detail: str) -> FastJSON:
    return FastJSON({"detail": detail}, status_code=status)


def validation_response(errors: Iterable[Mapping[str, Any]]) -> Response:
    """422 listing ``{"type", "loc", "msg"}`` per error; the offending input is not echoed
    (it may be NaN, which JSON cannot carry, or megabytes long)."""
    detail = [
        {"type": e.get("type", "value_error"), "loc": list(e.get("loc", ())), "msg": e.get("msg", "")} for e in errors
    ]
    return FastJSON({"detail": detail}, status_code=422)


# each exception the core raises, and the fixed HTTP error it becomes
_FIXED: dict[type[Exception], tuple[int, str]] = {
    NotAvailable: (404, MODEL_NOT_FOUND),
    Recovering: (503, RECOVERING),
    StorageFailure: (503, STORAGE_FAILURE),
    LogUnavailable: (503, LOG_UNAVAILABLE),
    StoreUnavailable: (503, STORE_UNAVAILABLE),
    LearnFailure: (500, LEARN_FAILURE),
    ConfigConflict: (409, CONFIG_CONFLICT),
    TooManyModels: (409, TOO_MANY_MODELS),
    PendingIdTaken: (409, PENDING_TAKEN),
    PendingFull: (429, PENDING_FULL),
    NoLabels: (409, NO_LABELS),
}


def install_handlers(app: FastAPI) -> None:
    """Map the exceptions raised below the routers to HTTP errors."""

    async def fixed(_: Request, exc: Exception) -> Response:
        # the nearest class in _FIXED, as Starlette chose this handler (subclasses included)
        status, detail = next(_FIXED[c] for c in type(exc).__mro__ if c in _FIXED)
        return _detail(status, detail)

    async def invalid(_: Request, exc: Exception) -> Response:
        assert isinstance(exc, (InvalidInput, RequestValidationError))
        return validation_response(exc.errors())

    async def not_reached(_: Request, exc: Exception) -> Response:
        return _detail(503, str(exc))  # names the model and both seqs, no input echoed

    async def conflict(_: Request, exc: Exception) -> Response:
        assert isinstance(exc, Conflict)
        return FastJSON({"detail": exc.detail, **exc.extra}, status_code=409)

    async def too_many_held(_: Request, exc: Exception) -> Response:
        response = _detail(429, str(exc))  # names the limit and what to do
        response.headers["Retry-After"] = "1"
        return response

    async def not_writer(_: Request, exc: Exception) -> Response:
        response = _detail(503, NOT_WRITER)
        response.headers[NOT_WRITER_HEADER] = "1"
        return response

    async def internal(_: Request, exc: Exception) -> Response:
        # a defect (logged with its traceback by the server): JSON like every other answer, so
        # a client and a replica forwarding it read a 500, not an unreadable body
        return _detail(500, INTERNAL_ERROR)

    app.add_exception_handler(Exception, internal)
    app.add_exception_handler(SeqNotReached, not_reached)
    app.add_exception_handler(ModelUnavailable, not_reached)  # 503 naming the model and why it is out
    app.add_exception_handler(DamagedRecord, not_reached)  # 503 naming the record's seq
    app.add_exception_handler(NotWriter, not_writer)
    app.add_exception_handler(TooManyHeld, too_many_held)
    app.add_exception_handler(Conflict, conflict)  # 409 saying why, with the fields that tell it
    app.add_exception_handler(RequestValidationError, invalid)
    app.add_exception_handler(InvalidInput, invalid)
    for exception in _FIXED:
        app.add_exception_handler(exception, fixed)
