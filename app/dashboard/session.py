"""The dashboard's sign-in cookie, for services whose reads need an API key.

A browser cannot add an ``Authorization`` header to a page it navigates to, so the sign-in
form trades a valid key for a cookie. The cookie holds an HMAC of the key, not the key: it
grants reads only (``GET``), never writes, and removing the key from ``api_keys`` revokes it.
It is ``HttpOnly`` (scripts cannot read it) and ``SameSite=Strict`` (other sites' pages
cannot send it).
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Sequence

__all__ = ["COOKIE", "cookie_header", "session_value", "valid_session"]

COOKIE = "streamtree_session"
_CONTEXT = b"streamtree dashboard session v1"


def session_value(key: str) -> str:
    """The cookie value that stands for API key ``key``: ``HMAC-SHA256(key, context)`` in hex."""
    return hmac.new(key.encode(), _CONTEXT, hashlib.sha256).hexdigest()


def valid_session(value: str | None, keys: Sequence[str]) -> bool:
    """Whether a cookie value stands for one of ``keys`` (compared in constant time)."""
    if not value:
        return False
    given = value.encode()
    return any(hmac.compare_digest(given, session_value(k).encode()) for k in keys)


def cookie_header(key: str, secure: bool) -> str:
    """The ``Set-Cookie`` value for a browser session of ``key`` (ends with the browser)."""
    attributes = "Path=/; HttpOnly; SameSite=Strict" + ("; Secure" if secure else "")
    return f"{COOKIE}={session_value(key)}; {attributes}"
