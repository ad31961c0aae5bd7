"""When a request is sent again, and after how long.

A request is retried on a connection error or timeout, and on the answers that say "later":
408, 429, 502, 503 and 504. Other answers (2xx, and 4xx such as 404 or 422) are final. The
wait before retry ``n`` (from 0) is exponential with jitter, ``backoff * 2**n`` times a
uniform factor in [0.5, 1), so that clients refused together do not come back together; an
answer's ``Retry-After`` is a floor under it. A learn carries one ``Idempotency-Key`` over
all its attempts, so a retry of a request the service did learn learns nothing again.
"""

from __future__ import annotations

import email.utils
import random
import time
from collections.abc import Iterator

import httpx

__all__ = [
    "MAX_SECONDS",
    "MAX_WAIT",
    "NOT_SENT",
    "RETRY_STATUSES",
    "Deadline",
    "check_policy",
    "is_seconds",
    "retry_after",
    "wait",
]

#: Statuses answered "not now": the same request may succeed later.
RETRY_STATUSES = frozenset({408, 429, 502, 503, 504})

#: Transport errors raised before the request was sent: the service cannot have processed it.
NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)

#: The longest wait between two attempts (a longer ``Retry-After`` is cut to it).
MAX_WAIT = 60.0


#: The longest timeout or flush interval taken: longer ones overflow the clock's waits.
MAX_SECONDS = 1e6


def is_seconds(v: object) -> bool:
    """Whether ``v`` is a number of seconds a client can wait: finite, > 0, at most :data:`MAX_SECONDS`."""
    return not isinstance(v, bool) and isinstance(v, (int, float)) and 0 < v <= MAX_SECONDS


def check_policy(timeout: float | None, retries: int, backoff: float) -> None:
    """Refuse a timeout, retry count or backoff that cannot be meant."""
    if timeout is not None and not is_seconds(timeout):
        raise ValueError(f"timeout: seconds > 0 and at most {MAX_SECONDS:g} (None for no timeout), got {timeout!r}")
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        raise ValueError(f"retries: an integer >= 0, got {retries!r}")
    if isinstance(backoff, bool) or not isinstance(backoff, (int, float)) or not 0 <= backoff <= MAX_WAIT:
        raise ValueError(f"backoff: seconds in [0, {MAX_WAIT:g}], got {backoff!r}")


def retry_after(value: str | None) -> float | None:
    """Seconds a ``Retry-After`` header asks to wait (delta-seconds or an HTTP date), or None."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def wait(attempt: int, backoff: float, after: str | None = None) -> float:
    """Seconds to wait before retry ``attempt`` (0 for the first retry)."""
    base = backoff * 2.0**attempt
    seconds = base * (0.5 + 0.5 * random.random())
    floor = retry_after(after)
    if floor is not None:
        seconds = max(seconds, floor)
    return min(seconds, MAX_WAIT)


class Deadline(httpx.SyncByteStream):
    """An answer's body that ends in ``httpx.ReadTimeout`` when a read returns after
    ``deadline`` (``time.monotonic()``): the attempt's bound, where httpx bounds each read."""

    def __init__(self, inner: httpx.SyncByteStream, deadline: float, timeout: float, request: httpx.Request) -> None:
        self.inner, self.deadline, self.timeout, self.request = inner, deadline, timeout, request

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self.inner:
            if time.monotonic() > self.deadline:
                raise httpx.ReadTimeout(
                    f"no whole answer within the client's timeout of {self.timeout:g} s", request=self.request
                )
            yield chunk

    def close(self) -> None:
        self.inner.close()
