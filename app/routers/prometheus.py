"""``GET /metrics``: the service's Prometheus metrics in the text exposition format."""

from __future__ import annotations

from fastapi import APIRouter, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from ..deps import ReadRegistry

router = APIRouter(tags=["metrics"])


@router.get(
    "/metrics",
    summary="Prometheus metrics",
    response_class=Response,
    responses={200: {"content": {CONTENT_TYPE_LATEST: {}}}},
)
async def prometheus_metrics(registry: ReadRegistry) -> Response:
    """Requests and latencies by route, events learned, commit sizes and model sizes."""
    return Response(generate_latest(registry.telemetry.registry), media_type=CONTENT_TYPE_LATEST)
