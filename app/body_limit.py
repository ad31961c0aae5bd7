"""Refuse request bodies over the size limit with 413 before they are parsed, and requests
past the bytes of bodies the server may hold at once with 503; a client that leaves in the
middle of its body is let go without a traceback."""

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

#: Seconds a request refused for the bodies held is asked to wait (``Retry-After``).
HELD_RETRY_AFTER = 1


class BodyTooLarge(HTTPException):
    """Raised from ``receive`` when a body without (or with a lying) Content-Length grows too large."""

    def __init__(self) -> None:
        super().__init__(status_code=413, detail=TOO_LARGE)


class HeldFull(HTTPException):
    """Raised from ``receive`` when a body without a Content-Length takes the bytes held past the budget."""

    def __init__(self, max_held: int) -> None:
        super().__init__(
            status_code=503,
            detail=f"The server holds {max_held:,} bytes of request bodies already (max_held_body_bytes), "
            "the most it takes at once; retry shortly.",
            headers={"Retry-After": str(HELD_RETRY_AFTER)},
        )


class BodyLimitMiddleware:
    """Pure ASGI middleware enforcing ``max_bytes`` on request bodies.

    A declared ``Content-Length`` over the limit is answered at once, without reading the
    body. A chunked body is counted as it arrives and cut off with 413 as soon as it exceeds
    the limit: inside a route FastAPI answers the ``HTTPException`` raised from ``receive``,
    and where a layer between here and the routes reads the body itself (a replica forwarding
    a write, :mod:`app.forwarding`) the exception comes back here and gets the same 413 JSON,
    so every role answers an oversized body alike.

    The bodies of the requests in the server (read, parsed, or waiting for the writer: each is
    counted until its answer is sent) take at most ``max_held`` bytes together. A request
    with a Content-Length is counted at that length before its body is read; a chunked one
    as it arrives. One that would take the sum past ``max_held`` gets 503 with
    ``Retry-After`` (a chunked one, cut off as its body grows), and nothing of it is learned:
    parsed, a body takes several times its size, so a crowd of large learns queued for a busy
    writer took the machine's memory, none refused.
    """

    def __init__(
        self,
        app: ASGIApp,
        max_bytes: int,
        max_held: int | None = None,
        refused: Callable[[Scope], None] = lambda scope: None,
    ) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.max_held = max_bytes if max_held is None else max_held
        self.held = 0  # bytes of bodies counted by the requests in the server
        self.refused = refused  # told of a body refused unread (its route never runs)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = 0
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
        counted = max(declared, 0)  # this request's bytes in self.held
        if counted and self.held + counted > self.max_held:
            # not self.refused: a 503 is retried, so requests following this one's key wait on
            await self._held_full(scope, receive, send)
            return
        self.held += counted
        received = 0

        async def receive_limited() -> Message:
            nonlocal received, counted
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise BodyTooLarge()
                if received > counted:  # a chunked body, counted as it arrives
                    if self.held + received - counted > self.max_held:
                        raise HeldFull(self.max_held)
                    self.held += received - counted
                    counted = received
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
        except (BodyTooLarge, HeldFull) as exc:
            if started:  # too late for another answer: the server closes the connection
                raise
            if isinstance(exc, HeldFull):
                await self._held_full(scope, receive, send)
            else:
                await JSONResponse({"detail": TOO_LARGE}, status_code=413)(scope, receive, send)
        finally:
            self.held -= counted

    async def _held_full(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer :class:`HeldFull` here, as FastAPI answers it raised inside a route."""
        log.debug("%s %s refused (503): max_held_body_bytes reached", scope["method"], scope["path"])
        refusal = HeldFull(self.max_held)
        response = JSONResponse({"detail": refusal.detail}, status_code=refusal.status_code, headers=refusal.headers)
        await response(scope, receive, send)
