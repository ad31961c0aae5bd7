"""The dashboard's files: all shipped in the package, licensed, and loading nothing from elsewhere."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path, PurePosixPath

import pytest

from app.dashboard.assets import ASSETS, UPLOT_VERSION, asset, page

STATIC = Path(__file__).parents[3] / "app" / "dashboard" / "static"
OURS = ["index.html", "login.html", "dashboard.js", "dashboard.css", "favicon.svg"]


@pytest.mark.parametrize("name", sorted(ASSETS))
def test_every_listed_asset_is_served_from_the_package(name: str) -> None:
    found = asset(name)
    assert found is not None and found[0] and found[1] == ASSETS[name]


def test_unlisted_files_are_not_assets() -> None:
    assert asset("index.html") is None and asset("../assets.py") is None and asset("vendor/uplot/README.md") is None


def test_the_pages_load_only_listed_assets_of_this_service() -> None:
    for name in ("index.html", "login.html"):
        refs = re.findall(r'(?:src|href)="([^"]+)"', page(name))
        assert refs, name
        for ref in refs:
            assert ref.startswith("/dashboard/"), ref
            if ref.startswith("/dashboard/assets/"):
                assert ref.removeprefix("/dashboard/assets/") in ASSETS, ref


@pytest.mark.parametrize("name", OURS)
def test_our_files_name_no_other_origin(name: str) -> None:
    text = (STATIC / name).read_text()
    urls = set(re.findall(r"[a-z]+://[^\s\"')]+", text)) - {"http://www.w3.org/2000/svg"}  # an XML namespace
    assert not urls, urls


def test_uplot_is_vendored_with_its_licence_and_version() -> None:
    licence = (STATIC / "vendor" / "uplot" / "LICENSE").read_text()
    assert "MIT License" in licence and "Leon Sorokin" in licence
    assert f"uPlot {UPLOT_VERSION}" in (STATIC / "vendor" / "uplot" / "README.md").read_text()
    assert f"v{UPLOT_VERSION}" in (STATIC / "vendor" / "uplot" / "uPlot.iife.min.js").read_text()[:300]


def test_the_package_data_ships_every_file_the_dashboard_serves() -> None:
    pyproject = tomllib.loads((Path(__file__).parents[3] / "pyproject.toml").read_text())
    patterns = pyproject["tool"]["setuptools"]["package-data"]["streamtree_server"]
    for name in [*ASSETS, "index.html", "login.html"]:
        path = PurePosixPath("dashboard/static", name)  # setuptools' "*" stays inside one folder
        assert any(len(path.parts) == len(PurePosixPath(p).parts) and path.match(p) for p in patterns), name
