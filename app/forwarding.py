"""A replica forwards writes to the writer: pure ASGI middleware, one HTTP hop.

The writes are learns (``POST /learn``, ``POST /models/{name}/learn``), creating and deleting
models (``PUT``/``DELETE /models/{name}``) and predictions or decisions that carry an ``id``
(the pending features of a delayed label live on the writer, so the label finds them
whichever instance receives it). On the writer, and for every other request, this middleware
only checks the role. A write names a model as the routes take it (other names are answered
here, 422, as the writer would). A forwarded request keeps its method, its path as the client
wrote it (percent-encoded), query, body and the headers that matter (``Content-Type``,
``Authorization``, ``Idempotency-Key``, ``Idempotency-After``); the writer's answer is returned
as it is (with its ``Content-Type``, ``Retry-After`` and ``WWW-Authenticate``), so the writer
checks the body and the key; a model's creation or deletion is answered once this replica's
own list of models shows it. What a streamtree writer never answers (a status outside
200-599, a body that is not JSON: another service at the writer's ``advertise_url``) is a
502. Small learns forwarded at the same time are merged into one request
(:mod:`app.coalescing`).

Through a failover the replica waits for a writer to forward to (``forward_wait_seconds``):
while no instance holds the lease, while the writer cannot be reached (the request was not
sent), or while the instance it reached says it is not the writer any more (nothing was
learned). A request sent whose answer never came (the writer died mid-request, or it lost
the lease while the request was in flight, as a stopped writer does) is not sent again,
since it may have been learned: the client gets a 503 saying so and may retry with the same
``Idempotency-Key``.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable

import orjson
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .cluster import Cluster
from .coalescing import LOCAL, Coalescer, mergeable_events
from .errors import NOT_WRITER, NOT_WRITER_HEADER
from .http_client import Answer, HTTPPool, NoAnswer, NotSent
from .json_route import parse_json
from .schemas import MODEL_NAME

__all__ = ["FORWARDED", "Forwarder", "ForwardingMiddleware"]

log = logging.getLogger("streamtree.app")

#: Marks a request a replica forwarded: the receiver does not forward it again.
FORWARDED = "x-streamtree-forwarded"

NO_WRITER = "No writer could be reached (a failover takes a few seconds); nothing was learned: retry shortly."
LOST_ANSWER = "The writer did not answer (it may have failed mid-request), so "
BAD_ANSWER = (
    "The writer's address answered something no streamtree writer answers ({}; check the writer's advertise_url), so "
)

# Paths of writes with a model name the routes take (others are answered here: 404 or 422)
_LEARN = re.compile(rf"^/(?:models/{MODEL_NAME}/)?learn$")
_MODEL = re.compile(rf"^/models/{MODEL_NAME}$")
_WITH_ID = re.compile(rf"^/(?:models/{MODEL_NAME}/)?(?:predict_proba|decide)$")
_KEPT = (b"content-type", b"authorization", b"idempotency-key", b"idempotency-after")
#: The writer's answer headers a replica passes on (besides its length).
_PASSED = (b"content-type", b"retry-after", b"www-authenticate")
_RETRY_EVERY = 0.05
#: How often a forwarded request in flight checks that its writer still holds the lease.
_WATCH_EVERY = 0.1


def _is_write(method: str, path: str) -> bool | None:
    """True: always a write; None: a write if its body has an ``id``; False: a read."""
    if method == "POST" and _LEARN.match(path):
        return True
    if method in ("PUT", "DELETE") and _MODEL.match(path):
        return True
    if method == "POST" and _WITH_ID.match(path):
        return None
    return False


def _has_id(body: bytes) -> bool:
    """Whether a JSON body is an object with a non-null ``id``, or whose ``instances`` hold
    one (``{"features": {...}, "id": ...}``, :func:`app.validation.check_instances`), read by
    the routes' own parser (:func:`app.json_route.parse_json`), so a replica keeps only what
    the writer would not take; a malformed body is the app's to refuse."""
    # The key id is written `"id"`, or with an escape (`"\u0069d"`): a body holding neither
    # has none, and is not parsed here.
    if b'"id"' not in body and b"\\" not in body:
        return False
    try:
        parsed = parse_json(body)
    except ValueError:
        return False
    if not isinstance(parsed, dict):
        return False
    if parsed.get("id") is not None:
        return True
    instances = parsed.get("instances")
    return type(instances) is list and any(type(x) is dict and x.get("id") is not None for x in instances)


async def _read_body(receive: Receive) -> bytes:
    chunks = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            break
    return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that gives the body read already, then defers to the real one."""
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed


async def _sync_models(cluster: Cluster, path: str) -> None:
    """Read the store's models on this replica before it answers a forwarded creation or
    deletion, so that the client's next request here finds the model as the writer left it
    (else the follower's next notice, up to a second later: a read right after the 201 was a
    404). A store that fails here only delays that: the writer's answer stands."""
    try:
        await cluster.follower.sync_models()
    except Exception:
        log.warning("%s: this replica could not read the models after the writer's answer", path, exc_info=True)


async def _respond(send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]]) -> None:
    if not any(k == b"content-type" for k, _ in headers):
        headers = [(b"content-type", b"application/json"), *headers]
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [*headers, (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})


def _detail(message: str) -> bytes:
    return orjson.dumps({"detail": message})


def _unsure(method: str, path: str) -> str:
    """What the client of a request the writer may or may not have carried out can do."""
    if _LEARN.match(path):
        return "the request may or may not have been learned: retry it with the same Idempotency-Key."
    if _MODEL.match(path):
        return f"the {method} may or may not have been done: sending it again is safe."
    return "the writer may have kept the request's id: predict again with a new id."


def _readable(answer: Answer) -> str | None:
    """Why ``answer`` is not one a streamtree writer gives, or None."""
    if not 200 <= answer.status <= 599:
        return f"status {answer.status}"
    kind = answer.header(b"content-type")
    if answer.body and (kind is None or not kind.startswith(b"application/json")):
        return f"status {answer.status}, {(kind or b'no content type').decode('latin-1')[:60]}"
    return None


class Forwarder:
    """What a replica forwards writes with (keep-alive connections to the writer, :mod:`app.http_client`).

    Parameters
    ----------
    wait_s
        How long to look for a writer, and the forwarded request's own time limit.
    """

    def __init__(self, wait_s: float) -> None:
        self.wait_s = wait_s
        self.pool = HTTPPool(wait_s)

    def close(self) -> None:
        """Close the idle connections."""
        self.pool.close()

    async def forward(
        self, cluster: Cluster, method: str, path: str, target: str, headers: list[tuple[str, str]], body: bytes
    ) -> tuple[int, bytes, list[tuple[bytes, bytes]]] | None:
        """Send the request to the writer; its ``(status, body, headers)``, or None if this
        instance became the writer meanwhile (then it handles the request itself). ``path``
        (decoded) says what the client of a request that may or may not have been carried out
        can do; ``target`` is what is sent."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.wait_s
        while True:
            if cluster.is_writer:
                return None
            url = cluster.writer_url()
            if url is not None:
                try:
                    r = await self._send(cluster, url, method, target, headers, body)
                except NotSent:
                    pass  # try again, maybe another writer
                except ValueError as exc:  # not sendable as HTTP/1.1 (nothing was sent)
                    return 400, _detail(f"The request cannot be forwarded to the writer: {exc}."), []
                except NoAnswer:
                    return 503, _detail(LOST_ANSWER + _unsure(method, path)), []
                else:
                    bad = _readable(r)
                    if bad is not None:
                        return 502, _detail(BAD_ANSWER.format(bad) + _unsure(method, path)), []
                    if not (r.status == 503 and r.header(NOT_WRITER_HEADER.encode())):
                        return r.status, r.body, [(k, v) for k, v in r.headers if k in _PASSED]
            if loop.time() >= deadline:
                return 503, _detail(NO_WRITER), [(b"retry-after", b"1")]
            await asyncio.sleep(_RETRY_EVERY)

    async def _send(
        self, cluster: Cluster, url: str, method: str, target: str, headers: list[tuple[str, str]], body: bytes
    ) -> Answer:
        """Send to the writer at ``url``; give up waiting (:class:`NoAnswer`) once it is not the
        writer any more (its lease expired or passed: a stopped writer's requests hang)."""
        task = asyncio.ensure_future(self.pool.request(url, method, target, [*headers, (FORWARDED, "1")], body))
        while True:
            done, _ = await asyncio.wait({task}, timeout=_WATCH_EVERY)
            if done:
                return task.result()
            if cluster.is_writer or cluster.writer_url() != url:
                task.cancel()
                raise NoAnswer(f"{url} lost the writer's lease while the request was in flight")


class ForwardingMiddleware:
    """Forward writes that reach a replica to the writer (see the module's docstring).

    Parameters
    ----------
    app
        The wrapped application.
    forwarder
        The client to forward with.
    cluster_of
        The instance's :class:`~app.cluster.Cluster` once the service is started (None before).
    """

    def __init__(self, app: ASGIApp, forwarder: Forwarder, cluster_of: Callable[[], Cluster | None]) -> None:
        self.app = app
        self.forwarder = forwarder
        self.cluster_of = cluster_of
        self.coalescer = Coalescer()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        cluster = self.cluster_of() if scope["type"] == "http" else None
        if cluster is None or cluster.is_writer:
            await self.app(scope, receive, send)
            return
        method, path = scope["method"], scope["path"]
        write = _is_write(method, path)
        if write is False:
            await self.app(scope, receive, send)
            return
        body = await _read_body(receive)
        if write is None and not _has_id(body):
            await self.app(scope, _replay(body, receive), send)
            return
        headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in scope["headers"] if k in _KEPT]
        if any(k == FORWARDED.encode() for k, _ in scope["headers"]):  # sent here as to the writer: it is not
            await _respond(send, 503, _detail(NOT_WRITER), [(NOT_WRITER_HEADER.encode(), b"1")])
            return
        # as the client wrote it (percent-encoded): the decoded path could hold a '?', '#' or a line end
        query = scope.get("query_string", b"").decode("latin-1")
        target = scope.get("raw_path", path.encode()).decode("latin-1") + (f"?{query}" if query else "")
        events = (
            mergeable_events(body)
            if method == "POST" and _LEARN.match(path) and not any(k == "idempotency-key" for k, _ in headers)
            else None
        )
        if events is not None:  # merged with the learns forwarded meanwhile (app.coalescing)
            answer = await self.coalescer.learn(
                (target, *sorted(headers)),
                events,
                body,
                lambda merged: self.forwarder.forward(cluster, method, path, target, headers, merged),
            )
        else:
            answer = await self.forwarder.forward(cluster, method, path, target, headers, body)
        if answer is LOCAL:  # this instance is the writer now
            await self.app(scope, _replay(body, receive), send)
            return
        if method in ("PUT", "DELETE") and 200 <= answer[0] < 300:
            await _sync_models(cluster, path)
        await _respond(send, *answer)
