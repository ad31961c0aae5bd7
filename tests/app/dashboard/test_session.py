"""The dashboard's sign-in cookie: an HMAC of a key, checked in constant time, revocable."""

from __future__ import annotations

from app.dashboard.session import COOKIE, cookie_header, session_value, valid_session

KEY = "k" * 20
OTHER = "o" * 20


def test_the_cookie_stands_for_a_key_without_holding_it() -> None:
    value = session_value(KEY)
    assert KEY not in value and len(value) == 64
    assert value == session_value(KEY) != session_value(OTHER)


def test_only_a_configured_keys_value_is_valid() -> None:
    assert valid_session(session_value(KEY), [OTHER, KEY])
    assert not valid_session(session_value(KEY), [OTHER])  # the key was removed: revoked
    assert not valid_session(KEY, [KEY])  # the key itself is not a session
    assert not valid_session("", [KEY]) and not valid_session(None, [KEY])


def test_the_cookie_is_http_only_and_same_site_strict() -> None:
    header = cookie_header(KEY, secure=False)
    assert header.startswith(f"{COOKIE}={session_value(KEY)}; ")
    assert "HttpOnly" in header and "SameSite=Strict" in header and "Path=/" in header
    assert "Secure" not in header and "Secure" in cookie_header(KEY, secure=True)
