"""Refuse request bodies over the size limit with 413 before they are parsed; a client that
leaves in the middle of its body is let go without a traceback."""

from __future__ import annotations

import logging
from collections.abc import Callable

from fastapi import HTTPException
from starlette.requests import ClientDisconnect
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["BodyLimitMiddleware", "TOO_LARGE"]

log = logging.getLogger("streamtree.app")

TOO_LARGE = "Request body is too large."


class BodyTooLarge(HTTPException):
    """Raised from ``receive`` when a body without (or with a lying) Content-Length grows too large."""

    def __init__(self) -> None:
        super().__init__(status_code=413, detail=TOO_LARGE)


class BodyLimitMiddleware:
    """Pure ASGI middleware enforcing ``max_bytes`` on request bodies.

    A declared ``Content-Length`` over the limit is answered at once, without reading the
    body. A chunked body is counted as it arrives and cut off with 413 as soon as it exceeds
    the limit: inside a route FastAPI answers the ``HTTPException`` raised from ``receive``,
    and where a layer between here and the routes reads the body itself (a replica forwarding
    a write, :mod:`app.forwarding`) the exception comes back here and gets the same 413 JSON,
    so every role answers an oversized body alike.
    """

    def __init__(self, app: ASGIApp, max_bytes: int, refused: Callable[[Scope], None] = lambda scope: None) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.refused = refused  # told of a body refused unread (its route never runs)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope["headers"]:
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = -1
                if declared > self.max_bytes:
                    self.refused(scope)
                    await JSONResponse({"detail": TOO_LARGE}, status_code=413)(scope, receive, send)
                    return
                break
        received = 0

        async def receive_limited() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise BodyTooLarge()
            return message

        started = False

        async def send_watched(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive_limited, send_watched)
        except ClientDisconnect:
            # the client closed its connection before its body was in: nobody to answer, and no
            # error of ours (as a traceback, a loop of such clients filled the log, 4 KiB each)
            log.debug("%s %s: the client left before sending its whole body", scope["method"], scope["path"])
        except BodyTooLarge:
            if started:  # too late for another answer: the server closes the connection
                raise
            await JSONResponse({"detail": TOO_LARGE}, status_code=413)(scope, receive, send)
