"""The sign-in throttle: a token bucket per client, exponential back-off, a bounded table."""

from __future__ import annotations

from app.dashboard.throttle import LoginThrottle, client_key


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_a_burst_then_waits_that_double_each_time_the_bucket_runs_empty() -> None:
    clock = Clock()
    throttle = LoginThrottle(burst=10, refill_s=10.0, max_wait_s=900.0, clock=clock)
    for _ in range(10):
        assert throttle.wait("a") == 0
        throttle.failed("a")
    waits = []
    for _ in range(9):
        wait = throttle.wait("a")
        waits.append(wait)
        clock.t += wait
        assert throttle.wait("a") == 0
        throttle.failed("a")  # one attempt at the end of each wait
    assert waits == [10, 20, 40, 80, 160, 320, 640, 900, 900]
    assert throttle.wait("b") == 0  # per client


def test_a_client_that_stops_guessing_gets_its_burst_back_and_a_right_key_clears_it() -> None:
    clock = Clock()
    throttle = LoginThrottle(burst=3, refill_s=10.0, clock=clock)
    for _ in range(3):
        throttle.failed("a")
    clock.t += throttle.wait("a")
    throttle.failed("a")
    assert throttle.wait("a") == 20  # the second time empty
    clock.t += 20 + 3 * 10  # full again: the doubling is forgotten
    for _ in range(3):
        assert throttle.wait("a") == 0
        throttle.failed("a")
    assert throttle.wait("a") == 10
    throttle.succeeded("a")
    assert throttle.wait("a") == 0 and len(throttle) == 0


def test_the_table_is_bounded() -> None:
    throttle = LoginThrottle(max_clients=100, clock=Clock())
    for i in range(10_000):
        throttle.failed(f"10.0.{i // 256}.{i % 256}")
    assert len(throttle) == 100
    assert throttle.wait("10.0.39.15") == 0  # seen least recently: forgotten
    throttle.failed("x")
    assert len(throttle) == 100


def test_ipv6_clients_share_their_64() -> None:
    assert client_key("2001:db8:1:2:aaaa::1") == client_key("2001:db8:1:2:bbbb::9") == "2001:db8:1:2::/64"
    assert client_key("2001:db8:1:3::1") != client_key("2001:db8:1:2::1")
    assert client_key("::ffff:192.0.2.1") == "192.0.2.1"
    assert client_key(None) == "" and client_key("testclient") == "testclient"
