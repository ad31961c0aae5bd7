"""The service's commands of the ``streamtree`` console script (:mod:`streamtree.cli` hands
them here): ``streamtree serve --data-dir DIR --host H --port P``, and ``streamtree demo`` (a
drifting stream for the dashboard, :mod:`app.demo_stream`)."""

from __future__ import annotations

import argparse
import contextlib
import copy
import signal
import socket
import sys
from collections.abc import Sequence
from types import FrameType
from typing import Any

from pydantic import ValidationError

__all__ = ["main", "serve"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="streamtree", description="streamtree service.")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser(
        "serve",
        help="Run the HTTP service (one worker that owns the models).",
        description="Every option also reads STREAMTREE_<OPTION> from the environment; flags win.",
    )
    serve.add_argument("--data-dir", help="Directory of the SQLite event log and snapshots (default ./data).")
    serve.add_argument(
        "--database-url",
        metavar="URL",
        help="Keep the event log and snapshots in this database instead: "
        "postgresql://user:password@host:port/dbname (or sqlite:///path).",
    )
    serve.add_argument("--host", help="Address to bind (default 127.0.0.1).")
    serve.add_argument("--port", type=int, help="Port to bind (default 8000).")
    serve.add_argument(
        "--log-level",
        choices=["critical", "error", "warning", "info", "debug"],
        help="Lowest level of the lines logged to stderr (default info).",
    )
    # parsed by app.demo_stream (listed here for --help)
    sub.add_parser(
        "demo",
        help="Post a drifting stream to a running service, to watch on /dashboard (streamtree demo --help).",
        add_help=False,
    )
    return parser


def _exit_cleanly(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(0)


def main(argv: Sequence[str] | None = None) -> None:
    """Parse the command line and run the service until SIGINT/SIGTERM (which snapshot)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["demo"]:
        from .demo_stream import main as demo

        demo(argv[1:])
        return
    args = _parser().parse_args(argv)
    overrides: dict[str, Any] = {k: v for k, v in vars(args).items() if k != "command" and v is not None}

    from .settings import Settings

    try:
        settings = Settings(**overrides)
    except ValidationError as exc:
        # each setting and why, without the value given (a database URL's password, an API key)
        raise SystemExit(f"streamtree serve: invalid settings: {settings_problems(exc)}") from None

    problem = _cannot_listen(settings.host, settings.port)
    if problem is not None:  # before the store and the kernels: uvicorn's message named no setting
        raise SystemExit(f"streamtree serve: cannot listen on host {settings.host!r}, port {settings.port}: {problem}")

    from .main import create_app
    from .node import open_owned_store
    from .storage import StorageError

    # opened before the server starts: an error is then one line, not uvicorn's traceback of
    # a failed lifespan (and a second server on the same database stops before compiling)
    try:
        store = open_owned_store(settings)
    except StorageError as exc:
        reason = " ".join(str(exc).split())  # one line (libpq's messages carry a hint on a second)
        raise SystemExit(f"streamtree serve: cannot open the store at {settings.store_shown()}: {reason}") from None
    serve(create_app(settings, store=store), settings)


def settings_problems(exc: ValidationError) -> str:
    """Each bad setting and why, on one line (``port: ...; max_batch: ...``): a check of two
    settings together names them in its sentence."""
    problems = []
    for e in exc.errors(include_input=False):
        name = ".".join(map(str, e["loc"]))
        reason = e["msg"].removeprefix("Value error, ")
        problems.append(f"{name}: {reason}" if name else reason)
    return "; ".join(problems)


def _cannot_listen(host: str, port: int) -> str | None:
    """Why a server could not listen on ``host:port`` (a name that does not resolve, an address
    not on this machine, a port in use), or None: a socket is bound to each of its addresses as
    asyncio's ``create_server`` (under uvicorn) binds them, then closed."""
    try:
        infos = set(socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE))
        with contextlib.ExitStack() as probes:
            for family, kind, proto, _, address in infos:
                probe = probes.enter_context(socket.socket(family, kind, proto))
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if family == socket.AF_INET6:
                    probe.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                probe.bind(address)
    except OSError as exc:  # socket.gaierror included
        return exc.strerror or str(exc)
    return None


def serve(app: Any, settings: Any) -> None:
    """Run ``app`` under uvicorn as ``streamtree serve`` does, until SIGINT/SIGTERM.

    Parameters
    ----------
    app
        The ASGI application (:func:`app.main.create_app`).
    settings
        Its :class:`app.settings.Settings` (address and log level).
    """
    import uvicorn

    from .http_protocol import limited_protocol

    try:
        import uvloop  # noqa: F401

        loop = "uvloop"
    except ImportError:  # pragma: no cover - uvloop is a dependency off Windows
        loop = "asyncio"
    # uvicorn shuts down gracefully on SIGTERM (lifespan: queued writes finished, snapshots
    # written), restores the previous handler and re-raises the signal; this handler turns
    # that into exit status 0, as a clean stop should be.
    signal.signal(signal.SIGTERM, _exit_cleanly)
    uvicorn.run(
        app,
        log_config=log_config(settings.log_level),
        # proxies' X-Forwarded-* only from the addresses the operator names (uvicorn's default
        # believes 127.0.0.1: any local client could then pick its address, or claim https)
        proxy_headers=bool(settings.forwarded_allow_ips),
        forwarded_allow_ips=settings.forwarded_allow_ips or None,
        host=settings.host,
        port=settings.port,
        workers=1,  # one process owns each model's state: more workers would split it
        loop=loop,
        # httptools, with bounded request heads and JSON answers to malformed requests
        http=limited_protocol(
            settings.max_header_bytes,
            settings.max_head_bytes,
            settings.max_headers,
            settings.request_read_seconds,
            settings.max_connections,
            settings.send_stall_seconds,
        ),
        log_level=settings.log_level,
        access_log=False,
        server_header=False,  # per-request logging costs more than the request; see /metrics
        timeout_graceful_shutdown=30,
    )


def log_config(level: str) -> dict[str, Any]:
    """uvicorn's logging config with the service's logger (``streamtree``: start-up, failover,
    rebuilds) on uvicorn's stderr handler and format, at ``level``; without it the service's
    INFO lines had no handler and were lost."""
    from uvicorn.config import LOGGING_CONFIG

    config = copy.deepcopy(LOGGING_CONFIG)
    config["loggers"]["streamtree"] = {"handlers": ["default"], "level": level.upper(), "propagate": False}
    return config


if __name__ == "__main__":  # pragma: no cover
    main(sys.argv[1:])
