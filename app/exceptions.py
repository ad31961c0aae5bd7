"""The service's own exceptions: what the core (hosting, registry) raises, whatever the transport.

The HTTP layer (:mod:`app.errors`) maps each to a response; no FastAPI or Starlette type is
raised below the routers, and no storage driver's type above :mod:`app.storage`.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "ConfigConflict",
    "Conflict",
    "DamagedRecord",
    "InvalidInput",
    "LearnFailure",
    "Loc",
    "LogUnavailable",
    "ModelUnavailable",
    "NoLabels",
    "NotAvailable",
    "NotWriter",
    "PendingFull",
    "PendingIdTaken",
    "Recovering",
    "SeqNotReached",
    "ServiceError",
    "SourceGone",
    "StorageFailure",
    "TooManyHeld",
    "TooManyModels",
]

#: Where in a request a field is, from the body down: ``("body", "events", 3, "features", "colour")``.
Loc = tuple[str | int, ...]


class ServiceError(Exception):
    """Base class of the exceptions the service raises on purpose."""


class NotAvailable(ServiceError):
    """The model was deleted or the service is shutting down."""


class SourceGone(NotAvailable):
    """A fork's source is not a hosted model (any more)."""


class Recovering(ServiceError):
    """The model is being rebuilt from its durable state after a failure."""


class ModelUnavailable(Recovering):
    """The model could not be rebuilt from the store (its log cannot be read or replayed).

    The service serves its other models meanwhile and tries the rebuild again now and then
    (:mod:`app.recovery`); the message says why, in the service's own words (no driver text).

    Parameters
    ----------
    model
        The model's name.
    reason
        Why it could not be rebuilt.
    """

    def __init__(self, model: str, reason: str) -> None:
        super().__init__(
            f"Model {model!r} is unavailable: {reason}. The other models are served; this one is "
            f"rebuilt from its log again from time to time (see the service's log)"
        )
        self.model, self.reason = model, reason


class NotWriter(ServiceError):
    """This instance is not the writer (any more) and no writer took the request; nothing was learned."""


class SeqNotReached(ServiceError):
    """A read asked for a ``min_seq`` this instance did not apply within the bound.

    Parameters
    ----------
    model
        The model's name.
    applied
        The seq the instance has applied.
    wanted
        The ``min_seq`` asked for.
    timeout
        How long it waited, in seconds.
    """

    def __init__(self, model: str, applied: int, wanted: int, timeout: float) -> None:
        super().__init__(
            f"This instance has applied model {model!r} up to seq {applied}, not min_seq {wanted}, "
            f"within {timeout:g} s; retry later, or without min_seq"
        )
        self.model, self.applied, self.wanted, self.timeout = model, applied, wanted, timeout


class StorageFailure(ServiceError):
    """The event log could not be written; the request's events were not learned."""


class StoreUnavailable(ServiceError):
    """The store failed while a model was created or deleted; that change was not made."""


class LogUnavailable(ServiceError):
    """The event log could not be read (the store failed); nothing changed."""


class DamagedRecord(LogUnavailable):
    """A record of the event log is not an event the service logged (damaged on disk, or
    edited by hand): a 503 naming its seq."""

    def __init__(self, name: str, seq: int, why: str) -> None:
        self.seq = seq
        #: Why, as a clause (in a replay's reason: "its event log cannot be replayed (...)").
        self.reason = (
            f"event {seq} of model {name!r}'s log cannot be read: it is not an event the service "
            f"logged ({why}); the events before it can be exported (GET /models/{name}/events, up to seq {seq - 1})"
        )
        super().__init__(self.reason[0].upper() + self.reason[1:] + ".")


class LearnFailure(ServiceError):
    """The library failed unexpectedly on the request; none of its events was learned."""


class ConfigConflict(ServiceError):
    """A model of that name exists with a different config."""


class Conflict(ServiceError):
    """A request that conflicts with the model's state, saying why (409 with ``detail`` and ``extra``).

    Parameters
    ----------
    detail
        The sentence the client reads (no input echoed but names).
    extra
        More fields of the answer, e.g. ``differences`` of a config (JSON values).
    """

    def __init__(self, detail: str, **extra: Any) -> None:
        super().__init__(detail)
        self.detail, self.extra = detail, extra


class TooManyModels(ServiceError):
    """The ``max_models`` limit is reached."""


class TooManyHeld(ServiceError):
    """A learn would be held for the request it follows (``Idempotency-After``) while the
    writer holds its most such requests already."""

    def __init__(self, limit: int) -> None:
        super().__init__(
            f"{limit:,} learn requests already wait for the requests they follow (Idempotency-After); "
            "send those first, then this one again"
        )


class PendingIdTaken(ServiceError):
    """A prediction names an id that is pending already (ids are written once)."""


class PendingFull(ServiceError):
    """No room for another pending id that this caller may make."""


class NoLabels(ServiceError):
    """A decision was asked of a model that has learned no label yet (it has no probabilities)."""


class InvalidInput(ServiceError):
    """A field of the request is refused; nothing of the request was done.

    Parameters
    ----------
    loc
        Where the field is (:data:`Loc`).
    msg
        A fixed sentence saying what is expected (the offending value is never echoed).
    kind
        A machine-readable error type, e.g. ``"finite_number"``.
    """

    def __init__(self, loc: Loc, msg: str, kind: str = "value_error") -> None:
        super().__init__(msg)
        self.loc, self.msg, self.kind = loc, msg, kind

    def errors(self) -> list[dict[str, Any]]:
        """The error as FastAPI lists validation errors: ``[{"type", "loc", "msg"}]``."""
        return [{"type": self.kind, "loc": self.loc, "msg": self.msg}]
