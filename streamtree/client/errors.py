"""The errors a streamtree service answers, as exceptions carrying its JSON.

The service answers every error as JSON: ``{"detail": "sentence"}``, or for a refused input
(422) ``{"detail": [{"type", "loc", "msg"}, ...]}`` whose ``loc`` names the field from the
body down (``["body", "events", 3, "features", "age"]``). :func:`error_for` turns such an
answer into the subclass of :class:`ServiceError` for its status, whose ``str`` is one line:
the status, the field (or the request) and the service's sentence.
"""

from __future__ import annotations

from typing import Any

import httpx
import orjson

__all__ = [
    "AFTER_NOT_LEARNED",
    "KEY_REUSED",
    "Answer",
    "Conflict",
    "ConnectionFailed",
    "InvalidRequest",
    "NotFound",
    "ServiceError",
    "TooManyRequests",
    "Unauthorized",
    "Unavailable",
    "UnexpectedAnswer",
    "answer",
    "error_for",
    "format_loc",
    "shown_url",
]


#: The ``type`` of a 409 refusing a learn whose ``Idempotency-After`` request was not learned.
AFTER_NOT_LEARNED = "after_not_learned"
#: The ``type`` of a 422 refusing a learn whose ``Idempotency-Key`` was used with another body.
KEY_REUSED = "idempotency_key_reused"


def format_loc(loc: tuple[Any, ...] | list[Any]) -> str:
    """A ``loc`` as one path: ``["body", "events", 3, "age"]`` is ``body.events[3].age``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


class ServiceError(Exception):
    """An error answer of the service.

    Attributes
    ----------
    status
        The HTTP status.
    body
        The answer's parsed JSON (or its text when it was not JSON).
    loc
        The field at fault of the first error (``("body", "features", "age")``), or None when
        the answer names none.
    message
        The service's sentence for the first error.
    request
        ``"METHOD /path"`` of the request answered.
    row, learned, seq, unsent
        Set by the methods that send ``X`` in several requests (``learn_many``,
        ``predict_proba_many``, ``decide_many``...): the row of ``X`` the refusal names; for
        ``learn_many``, the events the requests before this one learned, the last ``seq``,
        and the events not acknowledged as ``UnsentBatch`` es (key, events, posted). None
        otherwise.
    """

    row: int | None = None
    learned: int | None = None
    seq: int | None = None
    unsent: list[Any] | None = None

    def __init__(self, status: int, body: Any, request: str = "") -> None:
        self.status = status
        self.body = body
        self.request = request
        detail = body.get("detail") if isinstance(body, dict) else body
        self.errors: list[dict[str, Any]] = (
            [e for e in detail if isinstance(e, dict)] if isinstance(detail, list) else []
        )
        if self.errors:
            first = self.errors[0]
            self.loc: tuple[Any, ...] | None = tuple(first.get("loc") or ()) or None
            self.message = str(first.get("msg", ""))
        else:
            self.loc = None
            self.message = str(detail if detail is not None else "")[:500]
        super().__init__(self.line())

    def line(self) -> str:
        """One line: status, the field at fault (or the request), the service's sentence."""
        where = format_loc(self.loc) if self.loc else self.request
        more = f" (and {len(self.errors) - 1} more)" if len(self.errors) > 1 else ""
        return f"{self.status} {where}: {self.message}{more}" if where else f"{self.status}: {self.message}{more}"


class InvalidRequest(ServiceError):
    """400 or 422: the service refused the request's input; ``loc`` names the field."""


class Unauthorized(ServiceError):
    """401 (no API key sent) or 403 (a key the service does not know)."""


class NotFound(ServiceError):
    """404: no model of that name (or no such route)."""


class Conflict(ServiceError):
    """409: a model exists with another config, an id is pending already, or no label has been learned yet."""


class TooManyRequests(ServiceError):
    """429, still answered after the client's retries (pending ids full, exports busy)."""


class Unavailable(ServiceError):
    """502, 503 or 504, still answered after the client's retries."""


class UnexpectedAnswer(ServiceError):
    """A 2xx answer that is not what a streamtree service answers (not a JSON object, or
    without a field the client reads): the URL is likely not a streamtree service's."""


class Answer(dict[str, Any]):
    """A JSON object the service answered; a field it lacks is an :class:`UnexpectedAnswer`
    naming it, not a ``KeyError``."""

    status = 200
    request = ""

    def __missing__(self, key: str) -> Any:
        raise UnexpectedAnswer(
            self.status, f"the answer has no {key!r}: is this a streamtree service's URL?", self.request
        )


def answer(r: httpx.Response) -> Answer:
    """The JSON object of a 2xx answer; :class:`UnexpectedAnswer` for anything else (a web
    page, another JSON value, an empty answer)."""
    status, content, request = r.status_code, r.content, f"{r.request.method} {r.url.path}"
    try:
        body: Any = orjson.loads(content) if content else None
    except orjson.JSONDecodeError:
        body = content
    if not isinstance(body, dict):
        shown = " ".join(content[:120].decode(errors="replace").split()) or "an empty answer"
        raise UnexpectedAnswer(
            status, f"the answer is not a JSON object (is this a streamtree service's URL?): {shown}", request
        )
    out = Answer(body)
    out.status, out.request = status, request
    return out


def shown_url(url: str) -> str:
    """``url`` as a message shows it: a user name and password in it (secrets) as ``***``.

    >>> shown_url("http://admin:hunter2@example.com:8000/x")
    'http://***@example.com:8000/x'
    """
    scheme, sep, rest = url.partition("://")
    authority, slash, path = rest.partition("/")
    if "@" in authority:
        authority = "***@" + authority.rsplit("@", 1)[1]
    return f"{scheme}{sep}{authority}{slash}{path}"


class ConnectionFailed(Exception):
    """No answer from the service after the client's retries (refused, reset or timed out);
    the message names the URL. ``row``, ``learned``, ``seq`` and ``unsent`` are as
    :class:`ServiceError`'s: the request may have been learned, so send ``unsent`` again
    under its keys."""

    row: int | None = None
    learned: int | None = None
    seq: int | None = None
    unsent: list[Any] | None = None

    def __init__(self, url: str, request: str, attempts: int, cause: BaseException) -> None:
        self.url = url
        self.request = request
        self.attempts = attempts
        super().__init__(
            f"no answer from {shown_url(url)} to {request} after {attempts} attempt{'s' * (attempts != 1)}: "
            f"{type(cause).__name__}: {cause}"
        )


_BY_STATUS: dict[int, type[ServiceError]] = {
    400: InvalidRequest,
    422: InvalidRequest,
    401: Unauthorized,
    403: Unauthorized,
    404: NotFound,
    409: Conflict,
    429: TooManyRequests,
    502: Unavailable,
    503: Unavailable,
    504: Unavailable,
}


def error_for(status: int, content: bytes, request: str = "") -> ServiceError:
    """The exception for an error answer: its status's subclass, with the body parsed."""
    try:
        body: Any = orjson.loads(content) if content else None
    except orjson.JSONDecodeError:
        body = content.decode(errors="replace")
    return _BY_STATUS.get(status, ServiceError)(status, body, request)
