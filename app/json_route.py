"""Request bodies parsed by pydantic-core's JSON parser instead of the standard library's.

FastAPI parses a JSON body with :func:`json.loads` before validating it; for a batch of a
thousand events that costs more than the validation. :class:`JSONRoute` parses it with
``pydantic_core.from_json`` (the parser pydantic itself uses), faster (by how much:
``docs/decisions/request-path.md``), with what the standard library accepts beyond the JSON standard kept: integers of any size
stay exact and ``NaN`` or ``Infinity`` literals are read as floats, so the checks that follow
refuse them naming the field, as before.

It is also where strings are checked for valid Unicode, once for every JSON body: the parser
refuses a lone UTF-16 surrogate (``"\\ud800"``, which no UTF-8 text can hold and which the
event log could not store), and the body is then read again with the standard library, which
keeps it, only to find and name the field holding it; the answer is a 422 in the validation
format (``type: "string_unicode"``). Bodies without one pay nothing for the check.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine
from typing import Any

import pydantic_core
from fastapi import HTTPException
from fastapi.routing import APIRoute
from starlette.requests import Request
from starlette.responses import Response

from .deps import access_of, check_access
from .planned import Fallback, Plan, plan_of
from .validation import field_error

__all__ = ["JSONRoute", "SURROGATE", "media_type", "parse_json", "surrogate_path"]

SURROGATE = "Strings must be valid Unicode (no lone UTF-16 surrogates)"

Path = tuple[str | int, ...]


def _has_surrogate(s: str) -> bool:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def surrogate_path(value: Any, path: Path = ()) -> Path | None:
    """Where in a parsed JSON value the first string (key or value) with a lone surrogate is.

    Examples
    --------
    >>> surrogate_path({"events": [{"features": {"a": 1}}, {"label": "\\ud800"}]})
    ('events', 1, 'label')
    >>> surrogate_path({"ok": ["fine", 1.5, None]}) is None
    True
    """
    if isinstance(value, str):
        return path if _has_surrogate(value) else None
    if isinstance(value, dict):
        for k, v in value.items():
            if _has_surrogate(k):
                return (*path, k.encode("utf-8", "replace").decode()[:32])
            found = surrogate_path(v, (*path, k))
            if found is not None:
                return found
    elif isinstance(value, list):
        for i, v in enumerate(value):
            found = surrogate_path(v, (*path, i))
            if found is not None:
                return found
    return None


def _invalid_unicode(body: bytes) -> HTTPException | None:
    """A 422 naming the field with a lone surrogate, if that is why the parser refused ``body``."""
    try:
        value = json.loads(body)
    except (ValueError, RecursionError):  # not JSON for the standard library either
        return None
    try:
        path = surrogate_path(value)
    except RecursionError:  # nested deeper than this check walks: name the body
        path = ()
    if path is None:
        return None
    # FastAPI re-raises an HTTPException from body parsing; its handler answers {"detail": [...]},
    # the shape of every other validation error
    return HTTPException(status_code=422, detail=[{"type": "string_unicode", "loc": ["body", *path], "msg": SURROGATE}])


def _decode_error(exc: ValueError, body: bytes) -> json.JSONDecodeError:
    """The parser's error as the standard library's, which FastAPI turns into a 422 at its position."""
    msg, _, where = str(exc).rpartition(" at line ")
    try:
        line, column = (int(v) for v in where.split(" column "))
    except ValueError:
        line, column, msg = 1, 1, str(exc)
    start = 0
    for _ in range(line - 1):
        start = body.index(b"\n", start) + 1
    pos = len(body) if msg.startswith("EOF") else start + column - 1  # columns count from 1, except at the end
    return json.JSONDecodeError(msg, body.decode("utf-8", "replace"), pos)


def parse_json(body: bytes) -> Any:
    """A JSON body as every route reads it: the one parser of the service's request bodies.

    A replica deciding whether a request is a write it must forward (:mod:`app.forwarding`)
    reads the body with this too, so it finds exactly what the writer's route will find
    (an ``"\\u0069d"`` key is ``id`` to both).

    Raises
    ------
    ValueError
        The body is not JSON (or holds a lone surrogate).
    """
    return pydantic_core.from_json(body)


class _JSONRequest(Request):
    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            body = await self.body()
            try:
                self._json = parse_json(body)
            except ValueError as exc:
                invalid = _invalid_unicode(body) if b"\\u" in body else None
                if invalid is not None:
                    raise invalid from None
                raise _decode_error(exc, body) from None
        return self._json


class JSONRoute(APIRoute):
    """A FastAPI route whose JSON body is parsed by pydantic-core (pass as ``route_class``).

    FastAPI reads and parses a body before it runs the route's dependencies, so a malformed
    body would be answered 422 before the key is asked for: a route with a body that checks
    access (:func:`app.deps.access_of`) checks it first, and a caller without a key gets
    401 (403 with a wrong one) whatever it sent.
    """

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        write = access_of(self.dependant) if self.body_field is not None else None
        plan = plan_of(self.dependant) if self.body_field is not None else None
        has_body = self.body_field is not None

        async def parse_with_pydantic_core(request: Request) -> Response:
            if write is not None:
                check_access(request, write)
            json_request = _JSONRequest(request.scope, request.receive)
            if has_body and not _is_json(request.headers.get("content-type")) and await json_request.body():
                # refused as before (a page of another site can post a form or text/plain, not
                # JSON), but saying why: it was "Input should be a valid dictionary"
                given = request.headers.get("content-type")
                raise field_error(
                    ("body",),
                    f"Expected a JSON body (Content-Type: application/json); got "
                    f"{'no Content-Type' if given is None else repr(given[:100])}",
                    "content_type",
                )
            if plan is not None and not request.app.dependency_overrides:
                try:
                    return await _planned(plan, json_request)
                except Fallback:  # FastAPI's handler answers it (reading the body kept by the request)
                    pass
            return await handler(json_request)

        return parse_with_pydantic_core


def media_type(content_type: str | None) -> str:
    """The media type of a ``Content-Type`` header, lower case, its parameters left out
    (``""`` for none): ``"Application/JSON; charset=utf-8"`` is ``"application/json"``."""
    return (content_type or "").partition(";")[0].strip().lower()


def _is_json(content_type: str | None) -> bool:
    """Whether a ``Content-Type`` names JSON, as FastAPI tells it (``application/json`` or
    ``application/<anything>+json``, parameters aside)."""
    main, _, sub = media_type(content_type).partition("/")
    return main == "application" and (sub == "json" or sub.endswith("+json"))


async def _planned(plan: Plan, request: _JSONRequest) -> Response:
    """The route's answer through its plan (:mod:`app.planned`), for a JSON object body."""
    if media_type(request.headers.get("content-type")) != "application/json":
        raise Fallback
    if not await request.body():
        raise Fallback
    try:
        body = await request.json()
    except (ValueError, HTTPException):  # FastAPI's handler parses it again and answers the error
        raise Fallback from None
    if type(body) is not dict:
        raise Fallback
    response = await plan.run(request, body)
    assert isinstance(response, Response)  # plan_of keeps only endpoints that return one
    return response
