"""Pure ASGI middleware counting and timing HTTP requests into :class:`app.telemetry.Telemetry`."""

from __future__ import annotations

import time
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .telemetry import Telemetry

__all__ = ["InstrumentMiddleware"]


class InstrumentMiddleware:
    """Pure ASGI middleware counting requests and timing them by route template.

    The route template (``/models/{name}/learn``), not the raw path, labels the series, so a
    client cannot blow up their number; unmatched paths share the label ``unmatched``.
    """

    def __init__(self, app: ASGIApp, telemetry: Telemetry) -> None:
        self.app = app
        self.telemetry = telemetry
        # Labelled children, looked up once (``labels()`` costs more than the increment).
        self._counters: dict[tuple[str, str, int], Any] = {}
        self._timers: dict[tuple[str, str], Any] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 500

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        finally:
            elapsed = time.perf_counter() - start
            route: Any = scope.get("route")
            template = getattr(route, "path", None) or "unmatched"
            method = scope["method"]
            counter = self._counters.get((method, template, status))
            if counter is None:
                counter = self.telemetry.requests.labels(method, template, str(status))
                self._counters[method, template, status] = counter
            timer = self._timers.get((method, template))
            if timer is None:
                timer = self.telemetry.latency.labels(method, template)
                self._timers[method, template] = timer
            counter.inc()
            timer.observe(elapsed)
