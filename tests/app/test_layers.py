"""Exception isolation: driver types stay in their engine, HTTP types in the HTTP layer.

The core (hosting, registry, learning, ...) raises the service's own exceptions
(:mod:`app.exceptions`, :mod:`app.storage.base`); SQLite's live only in
``app/storage/sqlite.py``, psycopg's only in ``app/storage/postgres*.py``, and FastAPI's and
Starlette's only in the HTTP layer.
"""

from __future__ import annotations

import ast
import asyncio
import tokenize
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import app
from app.exceptions import ConfigConflict, InvalidInput, NotAvailable, StorageFailure
from app.node import Node
from app.settings import Settings
from app.storage import StorageError
from app.telemetry import Telemetry

ROOT = Path(app.__file__).parent
HTTP_LAYER = {
    "main",
    "deps",
    "errors",
    "body_limit",
    "instrument",
    "json_route",
    "planned",
    "cli",
    "routers",
    "forwarding",
    "http_protocol",
    "export",
}
ENGINES = {"storage.sqlite", "storage.postgres", "storage.postgres_schema", "storage.postgres_lease"}
DRIVERS = {"sqlite3", "psycopg", "psycopg_pool"}
FOREIGN = DRIVERS | {"fastapi", "starlette"}


def modules() -> dict[str, Path]:
    return {
        str(p.relative_to(ROOT).with_suffix("")).replace("/", ".").removesuffix("__init__").rstrip(".") or "app": p
        for p in ROOT.rglob("*.py")
    }


def imported(path: Path) -> set[str]:
    """Top-level packages a module imports."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out.add(node.module.split(".")[0])
    return out


def names(path: Path) -> set[str]:
    """Every identifier in a module's source (comments and strings excluded)."""
    with path.open("rb") as f:
        return {t.string for t in tokenize.tokenize(f.readline) if t.type == tokenize.NAME}


def layer(name: str) -> str:
    if name.split(".")[0] in HTTP_LAYER:
        return "http"
    return "engine" if name in ENGINES else "core"


def test_the_layers_are_where_expected() -> None:
    found = {layer(m) for m in modules()}
    assert found == {"http", "engine", "core"}
    core = {m for m in modules() if layer(m) == "core"}
    assert {
        "node",
        "hosting",
        "group_commit",
        "admission",
        "reads",
        "registry",
        "learning",
        "prequential",
        "scoring",
        "score_tables",
        "storage",
        "storage.base",
    } <= core


@pytest.mark.parametrize("module", sorted(m for m in modules() if layer(m) == "core"))
def test_core_modules_name_no_driver_or_http_type(module: str) -> None:
    path = modules()[module]
    assert not imported(path) & FOREIGN
    assert not names(path) & (
        FOREIGN
        | {
            "HTTPException",
            "RequestValidationError",
            "IntegrityError",
            "OperationalError",
            "UniqueViolation",
            "PoolTimeout",
        }
    )


def test_drivers_are_only_in_their_engines_and_http_types_only_in_the_http_layer() -> None:
    for module, path in modules().items():
        used = imported(path)
        if used & DRIVERS:
            assert layer(module) == "engine", module
        if used & {"fastapi", "starlette"}:
            assert layer(module) == "http", module


class FailingStore:
    """An engine whose every write fails (as the SQLite engine reports a disk error)."""

    def __init__(self, real: Any) -> None:
        self.real = real

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)

    def append(self, *args: Any) -> None:
        raise StorageError("disk I/O error")

    def create_model(self, *args: Any) -> None:
        from app.storage import ModelExists

        raise ModelExists("taken")


def test_the_core_raises_only_its_own_exceptions(tmp_path: Path) -> None:
    async def run() -> None:
        node = Node(Settings(data_dir=tmp_path), Telemetry())
        await node.open()
        registry = node.registry
        host = registry.get("default")
        assert host is not None
        with pytest.raises(InvalidInput) as info:
            await host.learn(
                [
                    SimpleNamespace(features={"a": 1.0}, label="x", id=None),
                    SimpleNamespace(features={"a": 1.0}, label=3, id=None),
                ],
                batch=True,
            )
        assert info.value.errors()[0]["loc"] == ("body", "events", 1, "label")
        with pytest.raises(InvalidInput):
            registry.build_config({"no_such_parameter": 1})
        registry.db.store = FailingStore(registry.db.store)  # type: ignore[assignment]
        with pytest.raises(StorageFailure):
            await host.learn([SimpleNamespace(features={"a": 1.0}, label="x", id=None)], batch=False)
        with pytest.raises(ConfigConflict):  # in the store but not in memory
            await registry.create("other", {})
        registry.db.store = registry.db.store.real  # type: ignore[attr-defined]
        await registry.delete("default")
        with pytest.raises(NotAvailable):
            await host.learn([SimpleNamespace(features={"a": 1.0}, label="x", id=None)], batch=False)
        await node.close()

    asyncio.run(run())


def test_a_first_start_that_fails_before_hosting_default_leaves_it_stored(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # the claim of the first start was committed alone: a start that failed right after it (a
    # lock, a lost connection) left the store claimed and without `default`, for good
    from app.exceptions import StoreUnavailable
    from app.registry import Registry

    async def down(*args: Any) -> None:
        raise StoreUnavailable()

    async def run() -> None:
        with monkeypatch.context() as patched:
            patched.setattr(Registry, "create", down)
            node = Node(Settings(data_dir=tmp_path), Telemetry())
            with pytest.raises(StoreUnavailable):
                await node.open()
            await node.close()
        node = Node(Settings(data_dir=tmp_path), Telemetry())
        await node.open()
        assert [h.name for h in node.registry.all()] == ["default"]
        await node.close()

    asyncio.run(run())
