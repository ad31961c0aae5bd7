"""Fixtures of the client tests: one real service (``streamtree serve`` in a subprocess, on a
free loopback port, a temporary data directory, an API key) for the whole package, a client
of it, a fresh model per test, and transports that lose answers or put a refusal first."""

from __future__ import annotations

import itertools
import signal
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from streamtree.client import Client, RemoteModel
from tests.app.test_process import free_port, start

#: The service's API key: writes need it, reads are open.
TOKEN = "client-test-key-0123456789"

_names = itertools.count()


@dataclass(frozen=True)
class Service:
    """A running service: its URL and port."""

    url: str
    port: int


def serve(data_dir: Path, **settings: str) -> tuple[subprocess.Popen[bytes], Service]:
    """Start a service on a free port; ``(process, service)`` once it is healthy."""
    port = free_port()
    return start(data_dir, port, **settings), Service(f"http://127.0.0.1:{port}", port)


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="session")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """One service (with an API key) for every client test: each test has its own models."""
    proc, running = serve(tmp_path_factory.mktemp("client") / "data", api_keys=TOKEN)
    yield running
    stop(proc)


def fresh_name() -> str:
    """A model name no other test uses."""
    return f"m{next(_names)}"


@pytest.fixture
def client(service: Service) -> Iterator[Client]:
    """A client of the service with the key, quick retries."""
    with Client(service.url, token=TOKEN, retries=3, backoff=0.01) as c:
        yield c


@pytest.fixture
def model(client: Client) -> RemoteModel:
    """A new model with the default config."""
    m = client.model(fresh_name())
    m.create()
    return m


class LoseAnswers(httpx.BaseTransport):
    """Sends every request to the service; the first ``n`` answers to ``method`` are lost
    after the service processed the request (the client sees ``error`` instead). Records
    ``(method, path, Idempotency-Key, status)`` of what the service answered."""

    def __init__(self, method: str = "POST", n: int = 1, error: type[httpx.TransportError] = httpx.ReadError) -> None:
        self.inner = httpx.HTTPTransport()
        self.method, self.n, self.error = method, n, error
        self.seen: list[tuple[str, str, str | None, int]] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self.inner.handle_request(request)
        response.read()
        self.seen.append(
            (request.method, request.url.path, request.headers.get("idempotency-key"), response.status_code)
        )
        if request.method == self.method and self.n > 0:
            self.n -= 1
            response.close()
            raise self.error("the answer was lost (test)", request=request)
        return response

    def close(self) -> None:
        self.inner.close()


class AnswerFirst(httpx.BaseTransport):
    """Answers the first ``n`` requests itself with ``status`` (and ``headers``), without
    sending them; sends the others to the service. Counts the requests."""

    def __init__(self, status: int, n: int, headers: dict[str, str] | None = None) -> None:
        self.inner = httpx.HTTPTransport()
        self.status, self.n, self.headers = status, n, headers or {}
        self.requests = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.requests += 1
        if self.n > 0:
            self.n -= 1
            return httpx.Response(self.status, headers=self.headers, json={"detail": "not now (test)"})
        return self.inner.handle_request(request)

    def close(self) -> None:
        self.inner.close()


def client_with(service: Service, transport: httpx.BaseTransport, **kwargs: float) -> Client:
    """A client of ``service`` sending through ``transport``."""
    options: dict[str, float] = {"retries": 3, "backoff": 0.01} | kwargs
    return Client(service.url, token=TOKEN, transport=transport, **options)  # type: ignore[arg-type]


Factory = Callable[..., Client]
