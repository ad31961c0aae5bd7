"""The soak's non-ordinary clients: exporters (patient and stalled) and hostile HTTP.

Each is a thread that runs until a deadline and records what it was answered, so the soak
(:mod:`bench.soak`) can count 5xx and non-JSON answers among them as among the ordinary mix:

* :class:`Exporter`: reads the model's event log a page at a time from seq 0, again and again,
  reading every answer in full, a page every ``pause`` seconds (a well-behaved exporter);
* :class:`StalledExporter`: asks for an export and never reads the answer, holds the
  connection for a while, closes it and starts again (a client that takes the answer's memory
  hostage unless the server streams with back-pressure);
* :class:`HostileHTTP`: oversized and too many headers, an unfinished huge header, a malformed
  request line, a chunked body past the size limit, a body before the key, wrong dashboard
  tokens.
"""

from __future__ import annotations

import http.client
import json
import random
import socket
import threading
import time
from collections import Counter
from typing import Any

__all__ = ["Exporter", "HostileHTTP", "StalledExporter"]


def _status_line(raw: bytes) -> tuple[int, str]:
    """The status and content type of a raw HTTP answer (0 and '' when there is none)."""
    head = raw.split(b"\r\n\r\n", 1)[0].decode("latin-1")
    lines = head.split("\r\n")
    try:
        status = int(lines[0].split()[1])
    except (IndexError, ValueError):
        return 0, ""
    ctype = next((ln.split(":", 1)[1].strip() for ln in lines[1:] if ln.lower().startswith("content-type:")), "")
    return status, ctype


class _Recorder(threading.Thread):
    """A thread that counts answers by (kind, status) and keeps examples of bad ones."""

    def __init__(self, port: int, until: float, seed: int) -> None:
        super().__init__(daemon=True)
        self.port, self.until = port, until
        self.rng = random.Random(seed)
        self.statuses: Counter[tuple[str, int]] = Counter()
        self.server_errors: list[str] = []
        self.not_json: list[str] = []
        self.latencies: dict[str, list[float]] = {}

    def record(self, kind: str, status: int, ctype: str, seconds: float, json_expected: bool = True) -> None:
        self.statuses[(kind, status)] += 1
        self.latencies.setdefault(kind, []).append(seconds)
        if status >= 500:
            self.server_errors.append(f"{kind}: {status}")
        elif status and json_expected and not ctype.startswith("application/json"):
            self.not_json.append(f"{kind}: {status} {ctype}")


class Exporter(_Recorder):
    """Pages through ``/models/{model}/events`` from the start, reading every answer."""

    def __init__(self, port: int, until: float, seed: int, model: str, page: int = 5_000, pause: float = 0.5) -> None:
        super().__init__(port, until, seed)
        self.model, self.page, self.pause = model, page, pause
        self.events_read = 0

    def run(self) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        after = 0
        while time.monotonic() < self.until:
            start = time.perf_counter()
            try:
                conn.request("GET", f"/models/{self.model}/events?after={after}&limit={self.page}")
                r = conn.getresponse()
                data = r.read()
            except (OSError, http.client.HTTPException) as exc:
                self.server_errors.append(f"export: {exc!r}")
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
                continue
            self.record("export", r.status, r.getheader("content-type", ""), time.perf_counter() - start)
            if r.status == 200:
                events = json.loads(data)["events"]
                self.events_read += len(events)
                after = events[-1]["seq"] if events else 0  # from the start again at the end
                time.sleep(self.pause)  # a backup job, not a flood: the stalled exporters are the hostile ones
            else:  # refused (too many exports at once): back off as told
                time.sleep(float(r.getheader("retry-after", "1") or 1))
        conn.close()


class StalledExporter(_Recorder):
    """Asks for a large export and never reads it; closes after ``hold`` seconds and asks again."""

    def __init__(self, port: int, until: float, seed: int, model: str, hold: float = 20.0) -> None:
        super().__init__(port, until, seed)
        self.model, self.hold = model, hold
        self.opened = 0

    def run(self) -> None:
        while time.monotonic() < self.until:
            try:
                s = socket.create_connection(("127.0.0.1", self.port), timeout=10)
            except OSError as exc:
                self.server_errors.append(f"stalled export connect: {exc!r}")
                time.sleep(1)
                continue
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # a reader that takes almost nothing
            s.sendall(
                f"GET /models/{self.model}/events?after=0&limit=10000 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode()
            )
            self.opened += 1
            time.sleep(min(self.hold, max(0.0, self.until - time.monotonic())))
            s.close()


class HostileHTTP(_Recorder):
    """Requests no honest client sends, one at a time on fresh connections."""

    def __init__(self, port: int, until: float, seed: int, auth: dict[str, str], model: str, pace: float = 0.2) -> None:
        super().__init__(port, until, seed)
        self.auth, self.model, self.pace = auth, model, pace

    def _raw(self, payload: bytes, read: bool = True, timeout: float = 30) -> tuple[int, str]:
        with socket.create_connection(("127.0.0.1", self.port), timeout=timeout) as s:
            try:
                s.sendall(payload)
            except OSError:  # the server closed on us mid-send: read what it said, if anything
                pass
            if not read:
                return 0, ""
            raw = b""
            try:
                while b"\r\n\r\n" not in raw:
                    chunk = s.recv(65536)
                    if not chunk:
                        break
                    raw += chunk
            except OSError:
                pass
            return _status_line(raw)

    def attempts(self) -> list[tuple[str, bytes, bool]]:
        """(kind, raw request, whether a JSON answer is expected) for each hostile request."""
        body = b'{"features": {"a": 1}, "label": "low"}'
        return [
            (
                "header_8mib",
                b"GET /health HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + b"a" * (8 << 20) + b"\r\n\r\n",
                True,
            ),
            (
                "headers_20000",
                b"GET /health HTTP/1.1\r\nHost: x\r\n" + b"".join(b"X-H%d: v\r\n" % i for i in range(20_000)) + b"\r\n",
                True,
            ),
            ("malformed_line", b"GET /health HTTP/1.1 extra\r\nHost: x\r\n\r\n", True),
            ("malformed_header", b"GET /health HTTP/1.1\r\nHost x\r\n\r\n", True),
            (
                "body_before_key",
                b"POST /learn HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b"Content-Length: 9\r\n\r\n{not json",
                True,
            ),
            (
                "chunked_oversize",
                b"POST /learn HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
                b"Content-Type: application/json\r\nAuthorization: "
                + self.auth["Authorization"].encode()
                + b"\r\n\r\n"
                + b"".join(b"100000\r\n" + b" " * 0x100000 + b"\r\n" for _ in range(6))
                + b"0\r\n\r\n",
                True,
            ),
            (
                "login_wrong",
                b"POST /dashboard/login HTTP/1.1\r\nHost: x\r\nContent-Type: "
                b"application/x-www-form-urlencoded\r\nContent-Length: 15\r\n\r\ntoken=not-a-key",
                False,
            ),
            (
                "learn_ok",
                b"POST /learn HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nAuthorization: "
                + self.auth["Authorization"].encode()
                + b"\r\nContent-Length: %d\r\n\r\n" % len(body)
                + body,
                True,
            ),
        ]

    def unfinished_header(self) -> None:
        """Send 32 MiB of one header and never finish it; the server must not keep it all."""
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=10) as s:
                s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: ")
                sent = 0
                while sent < 32 << 20 and time.monotonic() < self.until:
                    s.sendall(b"b" * (1 << 20))
                    sent += 1 << 20
                time.sleep(1)
        except OSError:  # closed by the server: what it should do
            pass
        self.statuses[("unfinished_header", 0)] += 1

    def run(self) -> None:
        attempts = self.attempts()
        while time.monotonic() < self.until:
            if self.rng.random() < 0.1:
                self.unfinished_header()
                continue
            kind, payload, json_expected = self.rng.choice(attempts)
            start = time.perf_counter()
            try:
                status, ctype = self._raw(payload)
            except OSError as exc:
                self.statuses[(kind, 0)] += 1
                self.latencies.setdefault(kind, []).append(time.perf_counter() - start)
                if kind == "learn_ok":
                    self.server_errors.append(f"{kind}: {exc!r}")
                continue
            self.record(kind, status, ctype, time.perf_counter() - start, json_expected)
            time.sleep(self.pace)


def merge(threads: list[Any]) -> dict[str, Any]:
    """Statuses, errors and latencies of recorder threads, added up."""
    statuses: Counter[tuple[str, int]] = Counter()
    latencies: dict[str, list[float]] = {}
    errors, not_json = [], []
    for t in threads:
        statuses.update(t.statuses)
        for k, v in t.latencies.items():
            latencies.setdefault(k, []).extend(v)
        errors += t.server_errors
        not_json += t.not_json
    return {"statuses": statuses, "latencies": latencies, "server_errors": errors, "not_json": not_json}
