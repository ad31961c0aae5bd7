"""``GET /health``: liveness once the models are loaded."""

from __future__ import annotations

from fastapi import APIRouter

from app.deps import RegistryDep
from app.schemas import Health

router = APIRouter(tags=["health"])


@router.get("/health", response_model=Health, summary="Liveness")
async def health(_: RegistryDep) -> Health:
    """``{"status": "ok"}`` once every model is loaded (503 before)."""
    return Health(status="ok")
