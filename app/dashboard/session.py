"""The dashboard's sign-in cookie, for services whose reads need an API key.

A browser cannot add an ``Authorization`` header to a page it navigates to, so the sign-in
form trades a valid key for a cookie. The cookie holds the time it was issued and an HMAC of
the key over it, not the key: it grants reads only (``GET``), never writes, for at most
:data:`SESSION_SECONDS` (a copied cookie stops working then), and removing the key from
``api_keys`` revokes it. It is ``HttpOnly`` (scripts cannot read it) and ``SameSite=Strict``
(other sites' pages cannot send it), and ``Secure`` when the page came over https.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Sequence

__all__ = ["COOKIE", "SESSION_SECONDS", "cookie_header", "session_value", "sign_out_header", "valid_session"]

COOKIE = "streamtree_session"
_CONTEXT = b"streamtree dashboard session v2|"
#: How long a sign-in lasts: 12 hours, then the form again.
SESSION_SECONDS = 12 * 3600
#: How far ahead of this instance's clock an issue time may be: another instance behind the
#: same load balancer (whose clock is a little ahead) may have signed the browser in.
CLOCK_SKEW_SECONDS = 60


def session_value(key: str, issued: int) -> str:
    """The cookie value that stands for API key ``key`` signed in at ``issued`` (Unix
    seconds): ``<issued>.<HMAC-SHA256(key, context|issued) in hex>``."""
    return f"{issued}.{hmac.new(key.encode(), _CONTEXT + str(issued).encode(), hashlib.sha256).hexdigest()}"


def valid_session(value: str | None, keys: Sequence[str], now: float | None = None) -> bool:
    """Whether a cookie value stands for one of ``keys``, issued less than
    :data:`SESSION_SECONDS` ago (compared in constant time)."""
    if not value:
        return False
    issued, _, _ = value.partition(".")
    if not (issued.isascii() and issued.isdigit() and len(issued) <= 12):
        return False
    now = time.time() if now is None else now
    if not -CLOCK_SKEW_SECONDS <= now - int(issued) < SESSION_SECONDS:
        return False
    given = value.encode()
    return any(hmac.compare_digest(given, session_value(k, int(issued)).encode()) for k in keys)


def cookie_header(key: str, secure: bool, now: float | None = None) -> str:
    """The ``Set-Cookie`` value for a browser session of ``key``: a session cookie (no
    ``Max-Age``, so the browser drops it when it closes), whose value the server refuses after
    :data:`SESSION_SECONDS`."""
    issued = int(time.time() if now is None else now)
    return f"{COOKIE}={session_value(key, issued)}; {_attributes(secure)}"


def sign_out_header(secure: bool) -> str:
    """The ``Set-Cookie`` value that makes the browser drop the session cookie at once."""
    return f"{COOKIE}=; Max-Age=0; {_attributes(secure)}"


def _attributes(secure: bool) -> str:
    return "Path=/; HttpOnly; SameSite=Strict" + ("; Secure" if secure else "")
