"""/dashboard: the page and its assets, their security headers, and signing in when reads need a key."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from app.dashboard.assets import ASSETS
from app.dashboard.session import COOKIE, session_value, valid_session

KEY = "dashboard-key-0123456789"


def test_the_page_and_its_assets(client) -> None:  # type: ignore[no-untyped-def]
    r = client.get("/dashboard")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    csp = r.headers["content-security-policy"]
    assert "default-src 'none'" in csp and "connect-src 'self'" in csp and "script-src 'self'" in csp
    assert r.headers["x-content-type-options"] == "nosniff"
    for ref in re.findall(r'(?:src|href)="/dashboard/assets/([^"]+)"', r.text):
        a = client.get(f"/dashboard/assets/{ref}")
        assert a.status_code == 200 and a.headers["content-type"] == ASSETS[ref], ref
    assert 'aria-label="Reliability diagram' in r.text and "log loss" in r.text


@pytest.mark.parametrize("name", ["nope.js", "index.html", "vendor/uplot/README.md", "%2e%2e/x", "vendor/../x"])
def test_unlisted_assets_are_404(client, name: str) -> None:  # type: ignore[no-untyped-def]
    r = client.get(f"/dashboard/assets/{name}")
    assert r.status_code == 404 and r.json()["detail"] in ("Asset not found.", "Not Found")


def test_without_keys_signing_in_just_goes_to_the_page(client) -> None:  # type: ignore[no-untyped-def]
    r = client.post("/dashboard/login", data={"token": "anything-at-all"}, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/dashboard" and "set-cookie" not in r.headers


@pytest.fixture
def protected(running) -> Iterator[TestClient]:  # type: ignore[no-untyped-def]
    with running(api_keys=[KEY], protect_reads=True) as client:
        yield client


def test_a_protected_page_asks_for_the_key(protected) -> None:  # type: ignore[no-untyped-def]
    r = protected.get("/dashboard")
    assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
    assert '<form method="post" action="/dashboard/login">' in r.text and "Missing bearer token." in r.text
    assert protected.get("/dashboard/assets/dashboard.js").status_code == 401
    # what the sign-in form itself loads: it was refused, and the form showed unstyled
    assert protected.get("/dashboard/assets/dashboard.css").status_code == 200
    assert protected.get("/dashboard/assets/favicon.svg").status_code == 200
    assert protected.get("/models/default/metrics/history").status_code == 401
    r = protected.get("/dashboard", headers={"Authorization": "Bearer wrong-key-0123456789"})
    assert r.status_code == 403 and "Invalid API key." in r.text
    assert protected.get("/dashboard", headers={"Authorization": f"Bearer {KEY}"}).status_code == 200


def test_signing_in_gives_a_read_only_cookie(protected) -> None:  # type: ignore[no-untyped-def]
    r = protected.post("/dashboard/login", data={"token": KEY}, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/dashboard"
    cookie = r.headers["set-cookie"]
    value = cookie.partition(";")[0].removeprefix(f"{COOKIE}=")
    assert valid_session(value, [KEY]) and KEY not in cookie
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    protected.cookies.set(COOKIE, value)
    assert protected.get("/dashboard").status_code == 200
    assert protected.get("/dashboard/assets/dashboard.js").status_code == 200
    for path in (
        "/models",
        "/models/default",
        "/models/default/metrics",
        "/models/default/metrics/history",
        "/metrics",
    ):
        assert protected.get(path).status_code == 200, path
    # reads by POST, and every write, still need the bearer key
    assert protected.post("/predict_proba", json={"features": {"a": 1}}).status_code == 401
    assert protected.post("/learn", json={"features": {"a": 1}, "label": "x"}).status_code == 401
    assert protected.put("/models/m", json={}).status_code == 401
    protected.cookies.set(COOKIE, session_value("some-other-key-0123456789", int(time.time())))
    assert protected.get("/models").status_code == 401


def test_signing_out_drops_the_cookie(protected) -> None:  # type: ignore[no-untyped-def]
    # there was no way to sign out: on a shared machine the session outlived its user
    r = protected.get("/dashboard", headers={"Authorization": f"Bearer {KEY}"})
    assert r.status_code == 200 and "/dashboard/logout" not in r.text  # no cookie: nothing to sign out of
    protected.post("/dashboard/login", data={"token": KEY})
    r = protected.get("/dashboard")
    assert r.status_code == 200 and '<form method="post" action="/dashboard/logout"' in r.text
    r = protected.post("/dashboard/logout", follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/dashboard"
    assert r.headers["set-cookie"].startswith(f"{COOKIE}=; Max-Age=0; Path=/")
    assert COOKIE not in protected.cookies
    assert protected.get("/dashboard").status_code == 401
    assert protected.get("/models").status_code == 401


def test_a_wrong_key_is_refused_with_the_form_again(protected) -> None:  # type: ignore[no-untyped-def]
    r = protected.post("/dashboard/login", data={"token": "wrong-key-0123456789"}, follow_redirects=False)
    assert r.status_code == 403 and "Invalid API key." in r.text and "set-cookie" not in r.headers


@pytest.mark.parametrize(
    "body, content_type, loc",
    [
        ("", "application/x-www-form-urlencoded", ["body", "token"]),
        ("token=", "application/x-www-form-urlencoded", ["body", "token"]),
        ("other=1", "application/x-www-form-urlencoded", ["body", "token"]),
        ('{"token": "x"}', "application/json", ["body"]),
        ("token=%ff%fe", "application/x-www-form-urlencoded", ["body", "token"]),
    ],
)
def test_a_bad_sign_in_form_is_a_422_naming_the_field(
    protected,
    body: str,
    content_type: str,  # type: ignore[no-untyped-def]
    loc: list[str],
) -> None:
    r = protected.post("/dashboard/login", content=body, headers={"Content-Type": content_type})
    assert r.status_code in (403, 422), r.text
    if r.status_code == 422:
        assert r.json()["detail"][0]["loc"] == loc


def test_wrong_keys_are_throttled_per_client(protected) -> None:  # type: ignore[no-untyped-def]
    """300 wrong keys at once: the first 10 are answered 403, then 429 with Retry-After and the
    form saying how long to wait (it was JSON a browser showed raw), the right key too (the
    answer tells nothing about the key); another client is not held up."""
    statuses = [
        protected.post("/dashboard/login", data={"token": f"wrong-key-{i:010d}"}, follow_redirects=False).status_code
        for i in range(300)
    ]
    assert statuses[:10] == [403] * 10 and set(statuses[10:]) == {429}
    r = protected.post("/dashboard/login", data={"token": KEY}, follow_redirects=False)
    assert r.status_code == 429 and r.headers["content-type"].startswith("text/html")
    assert 1 <= int(r.headers["retry-after"]) <= 10 and "set-cookie" not in r.headers
    assert f"Too many wrong keys from this address: try again in {r.headers['retry-after']} s." in r.text
    assert '<form method="post" action="/dashboard/login">' in r.text
    # the wait over, one more attempt: the right key signs in and clears the record
    throttle = protected.app.state.login_throttle
    clock = throttle.clock
    throttle.clock = lambda: clock() + 10.5
    try:
        r = protected.post("/dashboard/login", data={"token": KEY}, follow_redirects=False)
        assert r.status_code == 303 and COOKIE in r.headers["set-cookie"]
        assert len(throttle) == 0
    finally:
        throttle.clock = clock
    # another client (only the address counts)
    other = TestClient(protected.app, client=("192.0.2.8", 5000))
    r = other.post("/dashboard/login", data={"token": "wrong-key-0123456789"}, follow_redirects=False)
    assert r.status_code == 403
