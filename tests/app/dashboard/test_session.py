"""The dashboard's sign-in cookie: an HMAC of a key and the time it was issued, checked in
constant time, revocable, valid for SESSION_SECONDS."""

from __future__ import annotations

from app.dashboard.session import COOKIE, SESSION_SECONDS, cookie_header, session_value, sign_out_header, valid_session

KEY = "k" * 20
OTHER = "o" * 20
NOW = 1_800_000_000


def test_the_cookie_stands_for_a_key_without_holding_it() -> None:
    value = session_value(KEY, NOW)
    assert KEY not in value and value.startswith(f"{NOW}.") and len(value.partition(".")[2]) == 64
    assert value == session_value(KEY, NOW) != session_value(OTHER, NOW) != session_value(KEY, NOW + 1)


def test_only_a_configured_keys_value_is_valid() -> None:
    assert valid_session(session_value(KEY, NOW), [OTHER, KEY], now=NOW)
    assert not valid_session(session_value(KEY, NOW), [OTHER], now=NOW)  # the key was removed: revoked
    assert not valid_session(KEY, [KEY], now=NOW)  # the key itself is not a session
    assert not valid_session("", [KEY]) and not valid_session(None, [KEY])
    forged = f"{NOW + 3600}.{session_value(KEY, NOW).partition('.')[2]}"  # a later time on an old HMAC
    assert not valid_session(forged, [KEY], now=NOW + 3600)


def test_a_session_ends_after_its_lifetime() -> None:
    # the value was the same fixed HMAC at every sign-in and never expired: a copy read for ever
    value = session_value(KEY, NOW)
    assert valid_session(value, [KEY], now=NOW + SESSION_SECONDS - 1)
    assert not valid_session(value, [KEY], now=NOW + SESSION_SECONDS)
    assert valid_session(value, [KEY], now=NOW - 0.5)  # signed in by an instance whose clock is ahead
    assert not valid_session(value, [KEY], now=NOW - 61)  # issued further in the future
    assert not valid_session(f"{'9' * 13}.{'0' * 64}", [KEY], now=NOW)


def test_the_cookie_is_http_only_and_same_site_strict() -> None:
    header = cookie_header(KEY, secure=False, now=NOW)
    assert header.startswith(f"{COOKIE}={session_value(KEY, NOW)}; ")
    assert "HttpOnly" in header and "SameSite=Strict" in header and "Path=/" in header
    # a session cookie: the browser drops it when it closes (the server refuses it after SESSION_SECONDS);
    # with Max-Age it outlived the browser, as the sign-in page said it would not
    assert "Max-Age" not in header and "Expires" not in header
    assert "Secure" not in header and "Secure" in cookie_header(KEY, secure=True, now=NOW)


def test_signing_out_drops_the_cookie_with_its_attributes() -> None:
    assert sign_out_header(secure=False) == f"{COOKIE}=; Max-Age=0; Path=/; HttpOnly; SameSite=Strict"
    assert sign_out_header(secure=True).endswith("; Secure")
