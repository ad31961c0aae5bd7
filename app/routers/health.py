"""``GET /health``: liveness once the models are loaded, with the instance's role and seqs."""

from __future__ import annotations

from fastapi import APIRouter

from ..deps import NodeDep, RegistryDep
from ..schemas import Health

router = APIRouter(tags=["health"])


@router.get(
    "/health", response_model=Health, response_model_exclude_none=True, summary="Liveness, role and applied seqs"
)
async def health(registry: RegistryDep, node: NodeDep) -> Health:
    """``{"status": "ok", "role": "writer" | "replica", "seq": {model: applied seq}}`` once
    every model is loaded (503 before); ``"unavailable": {model: reason}`` is added while a model
    cannot be restored (it answers 503, the others serve, so the instance is still alive)."""
    return Health(
        status="ok",
        role=node.cluster.role,
        seq={h.name: h.seq for h in registry.all()},
        unavailable=registry.unavailable() or None,
    )
