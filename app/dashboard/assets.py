"""The dashboard's files, shipped inside the package: no request leaves the service.

Every file the page loads is listed here with its media type; nothing else under
``static/`` is served. uPlot is vendored unchanged from its npm package (see
``static/vendor/uplot/README.md``), with its licence.
"""

from __future__ import annotations

from functools import cache
from importlib import resources

__all__ = ["ASSETS", "UPLOT_VERSION", "asset", "page"]

UPLOT_VERSION = "1.6.32"

#: Served name (under ``/dashboard/assets/``) -> media type.
ASSETS: dict[str, str] = {
    "dashboard.js": "text/javascript; charset=utf-8",
    "dashboard.css": "text/css; charset=utf-8",
    "favicon.svg": "image/svg+xml",
    "vendor/uplot/uPlot.iife.min.js": "text/javascript; charset=utf-8",
    "vendor/uplot/uPlot.min.css": "text/css; charset=utf-8",
    "vendor/uplot/LICENSE": "text/plain; charset=utf-8",
}


@cache
def _read(name: str) -> bytes:
    return resources.files(__package__ or "app.dashboard").joinpath("static", *name.split("/")).read_bytes()


def asset(name: str) -> tuple[bytes, str] | None:
    """The bytes and media type of a listed asset, or ``None`` if ``name`` is not listed."""
    media_type = ASSETS.get(name)
    if media_type is None:
        return None
    return _read(name), media_type


def page(name: str) -> str:
    """An HTML page of the dashboard (``index.html``, ``login.html``) as text."""
    return _read(name).decode()
