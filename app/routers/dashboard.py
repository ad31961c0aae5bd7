"""``/dashboard``: the calibration dashboard, one page served with every asset it loads.

The page (``app/dashboard/static/index.html`` and ``dashboard.js``) polls the JSON API for
the models, their prequential metrics and their metrics history; its content security
policy lets it load and fetch from this service only. When reads need an API key
(``protect_reads``), the page, its assets and its data need one too: a browser signs in
once with the form at ``/dashboard`` and then carries a read-only cookie
(:mod:`app.dashboard.session`). Wrong keys sent to the form are throttled per client
(:mod:`app.dashboard.throttle`).
"""

from __future__ import annotations

import hmac
import html
import math
from collections.abc import Mapping
from urllib.parse import parse_qs

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from ..dashboard.assets import asset, page
from ..dashboard.session import COOKIE, cookie_header, sign_out_header
from ..dashboard.throttle import LoginThrottle, client_key
from ..deps import check_access
from ..errors import INVALID_KEY
from ..json_route import media_type
from ..settings import Settings
from ..validation import field_error

__all__ = ["ASSET_NOT_FOUND", "SECURITY_HEADERS", "TOO_MANY_SIGN_INS", "router"]

ASSET_NOT_FOUND = "Asset not found."
TOO_MANY_SIGN_INS = "Too many wrong keys from this address: try again in {} s."
#: The files the sign-in form itself loads: served without a key (they hold no data).
PUBLIC_ASSETS = frozenset({"dashboard.css", "favicon.svg"})
FORM_TYPE = "application/x-www-form-urlencoded"

#: Sent with every dashboard response: nothing may be loaded from, or sent to, another origin.
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}

#: The page's sign-out button, shown to a browser signed in with the session cookie.
SIGN_OUT_FORM = (
    '<form method="post" action="/dashboard/logout" class="sign-out"><button type="submit">Sign out</button></form>'
)

router = APIRouter(prefix="/dashboard", tags=["dashboard"], include_in_schema=False)


def _login_page(status: int, message: str, extra: Mapping[str, str] | None = None) -> HTMLResponse:
    body = page("login.html").replace("<!--message-->", html.escape(message))
    return HTMLResponse(body, status_code=status, headers=SECURITY_HEADERS | dict(extra or {}))


@router.get("", response_class=HTMLResponse)
async def dashboard(request: Request) -> Response:
    """The dashboard page; the sign-in form instead when reads need a key and none was given."""
    try:
        check_access(request, write=False)
    except HTTPException as exc:
        return _login_page(exc.status_code, str(exc.detail), exc.headers)
    body = page("index.html")
    if COOKIE in request.cookies:  # signed in from this browser: it can sign out
        body = body.replace("<!--sign-out-->", SIGN_OUT_FORM)
    return HTMLResponse(body, headers=SECURITY_HEADERS)


def _wait_page(throttle: LoginThrottle, client: str) -> Response | None:
    """While ``client`` must wait before its next key: 429 with ``Retry-After``, as the form
    saying how long (a browser shows the page, not JSON); None otherwise."""
    if (wait := throttle.wait(client)) <= 0:
        return None
    seconds = str(math.ceil(wait))
    return _login_page(429, TOO_MANY_SIGN_INS.format(seconds), {"Retry-After": seconds})


@router.post("/login")
async def login(request: Request) -> Response:
    """Trade an API key (form field ``token``) for the read-only session cookie, then go to the page.

    Without a form body naming ``token`` the answer is 422 naming it; with an unknown key,
    403 and the form again. A client that sent too many wrong keys is answered 429 with
    ``Retry-After`` until its wait is over, whatever it sends (:mod:`app.dashboard.throttle`).
    """
    settings: Settings = request.app.state.settings
    throttle: LoginThrottle = request.app.state.login_throttle
    client = client_key(request.client.host if request.client else None)
    if (waiting := _wait_page(throttle, client)) is not None:
        return waiting
    if media_type(request.headers.get("content-type")) != FORM_TYPE:
        raise field_error(("body",), f"Expected a form ({FORM_TYPE})", "content_type")
    try:
        fields = parse_qs((await request.body()).decode(), max_num_fields=10)
    except (UnicodeDecodeError, ValueError):
        raise field_error(("body",), "Expected a form body", "form") from None
    token = (fields.get("token") or [""])[0].strip()
    if not token:
        raise field_error(("body", "token"), "Field required", "missing")
    if not settings.api_keys:  # no keys: nothing to sign in to
        return RedirectResponse("/dashboard", status_code=303)
    if (waiting := _wait_page(throttle, client)) is not None:  # again, after the await: guesses sent at once each count
        return waiting
    key = next((k for k in settings.api_keys if hmac.compare_digest(token.encode(), k.encode())), None)
    if key is None:
        throttle.failed(client)
        return _login_page(403, INVALID_KEY)
    throttle.succeeded(client)
    response = RedirectResponse("/dashboard", status_code=303)
    response.headers["Set-Cookie"] = cookie_header(key, secure=request.url.scheme == "https")
    return response


@router.post("/logout")
async def logout(request: Request) -> Response:
    """Drop the browser's session cookie and go back to the page (the sign-in form, when reads
    need a key). Safe without a session: nothing else changes."""
    response = RedirectResponse("/dashboard", status_code=303)
    response.headers["Set-Cookie"] = sign_out_header(secure=request.url.scheme == "https")
    return response


@router.get("/assets/{name:path}")
async def dashboard_asset(name: str, request: Request) -> Response:
    """One of the page's files (listed in :data:`app.dashboard.assets.ASSETS`)."""
    if name not in PUBLIC_ASSETS:
        check_access(request, write=False)
    found = asset(name)
    if found is None:
        raise HTTPException(status_code=404, detail=ASSET_NOT_FOUND)
    content, media_type = found
    return Response(content, media_type=media_type, headers=SECURITY_HEADERS)
