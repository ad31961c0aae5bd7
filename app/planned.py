"""A route's parameters resolved by a plan made once, instead of FastAPI's solving on every request.

FastAPI resolves a route's dependencies, path and header parameters and body on every request
by walking the route's dependency tree generically: on a single prediction that walk cost
about a third of the service's time per request, more than the model
(``docs/decisions/request-path.md``). For a route whose parameters are all of a few plain
kinds, :func:`plan_of` builds, once, the list of what to read and call: the ``Request``,
path and header parameters (validated by their own FastAPI fields), the JSON body (validated
by its field), and ``async`` dependencies of the same kinds, resolved depth first, each before
the function that takes it, as FastAPI does.

A plan only takes requests it is sure to answer as FastAPI would: a JSON body (content type
``application/json``) of an object, no dependency overrides, and every parameter valid. For
anything else, and for every parameter or body that does not validate, it hands the request
to FastAPI's own handler (:class:`Fallback`), which then answers it in FastAPI's words: the
errors a client sees are FastAPI's. A route a plan cannot describe (query or cookie
parameters, generator or synchronous dependencies, an endpoint that does not return a
``Response``, which FastAPI would serialize) keeps FastAPI's handler.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from fastapi.dependencies.models import Dependant
from starlette.requests import Request
from starlette.responses import Response

__all__ = ["Fallback", "Plan", "plan_of"]


class Fallback(Exception):
    """The request is not one the plan answers: FastAPI's handler takes it."""


@dataclass
class Plan:
    """How to call one function of a route's dependency tree (the endpoint at the top)."""

    call: Callable[..., Awaitable[Any]]
    request: str | None = None  # the parameter that takes the Request
    paths: list[tuple[str, Any]] = field(default_factory=list)  # (parameter, FastAPI field)
    headers: list[tuple[str, Any]] = field(default_factory=list)
    body: tuple[str, Any] | None = None
    deps: list[tuple[str, Plan]] = field(default_factory=list)

    async def run(self, request: Request, body: Any) -> Any:
        """Call the function with its parameters read from ``request`` and ``body``.

        Raises
        ------
        Fallback
            A parameter or the body does not validate (before the function is called).
        """
        kwargs: dict[str, Any] = {}
        for name, sub in self.deps:
            kwargs[name] = await sub.run(request, body)
        if self.request is not None:
            kwargs[self.request] = request
        for name, f in self.paths:
            kwargs[name] = _valid(f, request.path_params.get(f.alias), ("path", f.alias))
        for name, f in self.headers:
            raw = request.headers.get(f.alias)
            if raw is None:
                if f.field_info.is_required():
                    raise Fallback
                kwargs[name] = f.field_info.get_default(call_default_factory=True)
            else:
                kwargs[name] = _valid(f, raw, ("header", f.alias))
        if self.body is not None:
            name, f = self.body
            kwargs[name] = _valid(f, body, ("body",))
        return await self.call(**kwargs)


def _valid(f: Any, value: Any, loc: tuple[str, ...]) -> Any:
    if value is None:
        raise Fallback
    out, errors = f.validate(value, {}, loc=loc)
    if errors:
        raise Fallback
    return out


def plan_of(dependant: Dependant) -> Plan | None:
    """The plan of a route (its ``dependant``), or None if it has a parameter of another kind."""
    plan = _plan(dependant, set(), top=True)
    if plan is None or not _returns_response(dependant.call):
        return None
    return plan


def _plan(d: Dependant, seen: set[Any], top: bool = False) -> Plan | None:
    call = d.call
    if call is None or not inspect.iscoroutinefunction(call) or call in seen:
        return None  # a synchronous or generator dependency, or one used twice (FastAPI caches it)
    seen.add(call)
    others = (
        d.query_params,
        d.cookie_params,
        d.websocket_param_name,
        d.http_connection_param_name,
        d.response_param_name,
        d.background_tasks_param_name,
        d.security_scopes_param_name,
        d.own_oauth_scopes,
    )
    if any(others) or (d.body_params and not top) or len(d.body_params) > 1:
        return None
    if any(not _plain_header(f) for f in d.header_params):
        return None
    plan = Plan(call, d.request_param_name)
    plan.paths = [(f.name, f) for f in d.path_params]
    plan.headers = [(f.name, f) for f in d.header_params]
    if d.body_params:
        plan.body = (d.body_params[0].name, d.body_params[0])
    for sub in d.dependencies:
        sub_plan = _plan(sub, seen)
        if sub_plan is None or sub.name is None:
            return None
        plan.deps.append((sub.name, sub_plan))
    return plan


def _plain_header(f: Any) -> bool:
    """A header parameter with its own alias, read as FastAPI reads a single string (not a list)."""
    return f.field_info.alias is not None and f.field_info.annotation in (str, str | None)


def _returns_response(call: Any) -> bool:
    """Whether the endpoint is annotated to return a Response (which FastAPI sends as it is)."""
    try:
        annotation = inspect.signature(call, eval_str=True).return_annotation
    except (NameError, TypeError, ValueError):
        return False
    return isinstance(annotation, type) and issubclass(annotation, Response)
