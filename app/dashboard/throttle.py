"""Per-client throttling of the dashboard's sign-in: a token bucket per client, with
exponential back-off once it is empty.

Each client has a bucket of ``burst`` attempts that refills by one every ``refill_s``
seconds. A wrong key takes one attempt. A wrong key that empties the bucket makes the client
wait before its next attempt, and each time the bucket runs empty again the wait doubles:
``refill_s``, ``2 refill_s``, ``4 refill_s``, ... at most ``max_wait_s``. The count of
doublings is forgotten once the bucket is full again, and a right key clears the client's
record. While a client must wait, each sign-in it sends is answered 429 with ``Retry-After``,
whether its key is right or not, so the answer tells nothing about the key. With the defaults
a client that sends its wrong keys at once gets 10, then one after 10 s, 20 s, 40 s, ... (at
most one every 15 minutes); one that paces itself gets one every ``refill_s`` (10 s): 300
guesses take about 50 minutes instead of seconds, and a key (at least 16 characters) is not
guessed at that rate.

A client is its address, an IPv6 client its /64 network (what one host is usually given
whole). Behind a reverse proxy every client has the proxy's address and shares one bucket
(wrong keys from anyone then delay everyone's sign-in, never the API, whose keys are not
throttled), unless the proxy's address is in the ``forwarded_allow_ips`` setting: then its
``X-Forwarded-For`` names the client, which no other client can do. The table of clients is
bounded (``max_clients``); when it is full the client seen least recently is forgotten.
"""

from __future__ import annotations

import ipaddress
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["LoginThrottle", "client_key"]


def client_key(host: str | None) -> str:
    """The bucket a client address belongs to: an IPv4 address itself, an IPv6 address its /64.

    >>> client_key("192.0.2.7"), client_key("2001:db8::1"), client_key("2001:db8::2:0:0:1")
    ('192.0.2.7', '2001:db8::/64', '2001:db8::/64')
    """
    if not host:
        return ""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:  # not an address (a test client's name, a Unix socket)
        return host
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.ip_network(f"{address}/64", strict=False))
    return str(address)


@dataclass
class _Bucket:
    tokens: float
    updated: float
    strikes: int = 0  # how many times the bucket ran empty since it was last full
    until: float = 0.0  # no attempt before this time


class LoginThrottle:
    """Sign-in attempts per client (module docstring).

    Parameters
    ----------
    burst
        Wrong keys a client may send at once.
    refill_s
        Seconds per attempt regained; also the first wait once the bucket is empty.
    max_wait_s
        Longest wait.
    max_clients
        Most clients remembered.
    clock
        Seconds, monotonic.
    """

    def __init__(
        self,
        burst: int = 10,
        refill_s: float = 10.0,
        max_wait_s: float = 900.0,
        max_clients: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.burst, self.refill_s, self.max_wait_s = burst, refill_s, max_wait_s
        self.max_clients = max_clients
        self.clock = clock
        self._buckets: OrderedDict[str, _Bucket] = OrderedDict()

    def __len__(self) -> int:
        return len(self._buckets)

    def wait(self, client: str) -> float:
        """Seconds ``client`` must wait before it may try a key (0: it may now)."""
        bucket = self._buckets.get(client)
        return 0.0 if bucket is None else max(0.0, bucket.until - self.clock())

    def failed(self, client: str) -> None:
        """Count a wrong key from ``client`` (module docstring)."""
        now = self.clock()
        bucket = self._buckets.get(client)
        if bucket is None:
            bucket = self._buckets[client] = _Bucket(float(self.burst), now)
            while len(self._buckets) > self.max_clients:
                self._buckets.popitem(last=False)
        else:
            self._buckets.move_to_end(client)
            regained = max(0.0, now - bucket.updated) / self.refill_s
            bucket.tokens = min(float(self.burst), bucket.tokens + regained)
            if bucket.tokens >= self.burst:
                bucket.strikes = 0
        bucket.tokens -= 1
        bucket.updated = now
        if bucket.tokens < 1:  # empty: wait, doubling each time it runs empty again
            wait = min(self.max_wait_s, self.refill_s * 2.0 ** min(bucket.strikes, 60))
            bucket.strikes += 1
            bucket.until = now + wait
            # nothing is regained while it waits but the one attempt at the end of the wait
            bucket.tokens, bucket.updated = 1.0, bucket.until

    def succeeded(self, client: str) -> None:
        """Forget ``client``'s wrong keys: it showed a right one."""
        self._buckets.pop(client, None)
