"""``/docs`` and ``/redoc`` work without internet: their pages load Swagger UI and ReDoc from
the service itself (fastapi-offline's bundled assets), never from a CDN."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient


def test_the_api_pages_load_their_assets_from_the_service(client: TestClient) -> None:
    for page in ("/docs", "/redoc"):
        html = client.get(page)
        assert html.status_code == 200 and html.headers["content-type"].startswith("text/html")
        assets = re.findall(r'(?:src|href)="([^"]+\.(?:js|css))"', html.text)
        assert assets, f"{page} loads no script or style"
        for url in assets:
            assert url.startswith("/"), f"{page} loads {url} from outside the service"
            asset = client.get(url)
            assert asset.status_code == 200 and len(asset.content) > 10_000, url
    assert client.get("/openapi.json").json()["info"]["title"] == "streamtree"
