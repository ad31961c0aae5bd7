"""``GET /metrics``: the service's Prometheus metrics in the text exposition format."""

from __future__ import annotations

from fastapi import APIRouter, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from app.deps import ReadAccess, RegistryDep, TelemetryDep

router = APIRouter(tags=["metrics"])


@router.get("/metrics", dependencies=[ReadAccess], summary="Prometheus metrics",
            response_class=Response, responses={200: {"content": {CONTENT_TYPE_LATEST: {}}}})
async def prometheus_metrics(telemetry: TelemetryDep, _: RegistryDep) -> Response:
    """Requests and latencies by route, events learned, commit sizes and model sizes."""
    return Response(generate_latest(telemetry.registry), media_type=CONTENT_TYPE_LATEST)
