"""A Python client for the streamtree service: its models as river classifiers over HTTP.

:class:`Client` (blocking) and :class:`AsyncClient` (asyncio) hold one keep-alive connection
pool to a service; ``client.model(name)`` is a :class:`RemoteModel` (or
:class:`AsyncRemoteModel`) with river's classifier API, batch methods on DataFrames and
arrays, delayed labels, decisions, and a batching :class:`Writer`. Requests are retried on
connection errors, timeouts and "not now" answers (408, 429, 502, 503, 504), a learn with one
``Idempotency-Key`` over its retries, so it is never learned twice. The service's error
answers are raised as the exceptions of :mod:`streamtree.client.errors`.

It needs httpx, numpy and orjson (pandas for DataFrames), and nothing of the service.
"""

from streamtree.client.aio import AsyncClient, AsyncRemoteModel
from streamtree.client.bodies import UnsentBatch
from streamtree.client.errors import (
    Conflict,
    ConnectionFailed,
    InvalidRequest,
    NotFound,
    ServiceError,
    TooManyRequests,
    Unauthorized,
    Unavailable,
    UnexpectedAnswer,
)
from streamtree.client.sync import Client, RemoteModel
from streamtree.client.writer import AsyncWriter, Writer, WriterStopped

__all__ = [
    "AsyncClient",
    "AsyncRemoteModel",
    "AsyncWriter",
    "Client",
    "Conflict",
    "ConnectionFailed",
    "InvalidRequest",
    "NotFound",
    "RemoteModel",
    "ServiceError",
    "TooManyRequests",
    "Unauthorized",
    "Unavailable",
    "UnexpectedAnswer",
    "UnsentBatch",
    "Writer",
    "WriterStopped",
]

try:  # a remote model is a river classifier where river is installed (it is with streamtree)
    from river import base as _river_base
except ImportError:  # pragma: no cover
    pass
else:
    _river_base.Classifier.register(RemoteModel)
