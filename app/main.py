"""Builds the FastAPI application: settings, lifespan (models loaded and closed), routers."""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from fastapi_offline import FastAPIOffline

import streamtree
from streamtree.kernels import CACHE_DIR

from .body_limit import BodyLimitMiddleware
from .dashboard.throttle import LoginThrottle
from .errors import install_handlers
from .export import ExportSlots
from .forwarding import Forwarder, ForwardingMiddleware
from .instrument import InstrumentMiddleware
from .node import Node
from .routers import dashboard, decide, events, health, inspect, learn, models, predict, prometheus
from .settings import Settings
from .storage import EventStore
from .telemetry import Telemetry

__all__ = ["create_app"]

DESCRIPTION = """Calibrated class probabilities from a single online decision tree, learned
from a live event stream. Every learned event is logged durably before it is acknowledged;
each model lives in memory with a single writer."""


log = logging.getLogger("streamtree.app")


def compile_progress(cached: bool) -> Any:
    """A :func:`streamtree.warm_up` progress callback: on a first start (no cached kernels)
    it says that the kernels compile, about how long it takes, and each step; otherwise nothing."""
    if cached:
        return None
    log.warning(
        "First start with this version: compiling streamtree's kernels into %s; this takes 2 to 3 "
        "minutes on 2 cores (later starts load them in seconds). The port opens when they are ready.",
        CACHE_DIR,
    )

    def progress(done: int, total: int, step: str) -> None:
        if done < total:
            log.warning("compiling kernels: step %d of %d (%s)", done + 1, total, step)
        else:
            log.warning("kernels compiled")

    return progress


def create_app(settings: Settings | None = None, model_cls: Any = None, store: EventStore | None = None) -> FastAPI:
    """Build the service.

    Parameters
    ----------
    settings
        Service settings; read from the environment when omitted.
    model_cls
        Builds models from configs; ``streamtree.estimators.ESTIMATORS`` (a tree or a forest) unless given.
    store
        The store, already opened (:func:`app.node.open_owned_store`); the lifespan opens the
        one the settings name when omitted.

    Returns
    -------
    FastAPI
        The app; its lifespan handler opens the store and restores the models, and on
        shutdown finishes queued writes and snapshots every model.
    """
    settings = settings if settings is not None else Settings()
    telemetry = Telemetry()
    forwarder = Forwarder(settings.forward_wait_seconds)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # compile (or load from the disk cache) every kernel before anything is served: the
        # server answers /health only after this, so the first real event pays no compile
        await asyncio.to_thread(streamtree.warm_up, compile_progress(streamtree.kernels_cached()))
        node = Node(settings, telemetry, model_cls, store)
        app.state.node = node
        await node.open()
        # Everything loaded so far (modules, restored models and their metrics) lives as long as
        # the process: move it out of the collector's generations, so the full collections
        # that batches of thousands of new dicts trigger do not scan it again each time.
        gc.freeze()
        log.info(
            "streamtree ready: %d model(s) in %s",
            len(node.registry.hosts),
            settings.store_shown(),
        )
        try:
            yield
        finally:
            await node.close()
            forwarder.close()
            gc.unfreeze()  # collectable again (an app built and closed in a longer process, as in tests)

    # FastAPIOffline: FastAPI whose /docs and /redoc load Swagger UI and ReDoc from the
    # service itself, so they work without internet
    app = FastAPIOffline(
        title="streamtree",
        version="0.1.0",
        description=DESCRIPTION,
        lifespan=lifespan,
        # Our metrics are Prometheus (/metrics); FastAPI's OpenTelemetry hooks would only
        # cost a provider lookup on every request.
        telemetry={"tracing": False, "metrics": False, "logs": False},
    )
    app.state.settings = settings
    app.state.telemetry = telemetry
    app.state.login_throttle = LoginThrottle()
    app.state.exports = ExportSlots(settings.max_exports)
    install_handlers(app)
    for module in (predict, learn, decide, models, inspect, events, health, prometheus, dashboard):  # hot routes first
        app.include_router(module.router)

    def cluster() -> Any:
        node = getattr(app.state, "node", None)
        return node.cluster if node is not None and node.ready else None

    app.add_middleware(ForwardingMiddleware, forwarder=forwarder, cluster_of=cluster)  # innermost: bodies are limited
    app.add_middleware(
        BodyLimitMiddleware,
        max_bytes=settings.max_body_bytes,
        max_held=settings.max_held_body_bytes,
        refused=learn.report_refused,
    )
    app.add_middleware(InstrumentMiddleware, telemetry=telemetry)
    return app
