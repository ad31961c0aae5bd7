"""A writer process that stops itself (SIGSTOP) in the middle of one of its store's operations.

Run by ``tests/app/storage/test_stopped_writer.py`` as ``python -m tests.app.storage.stopped_writer
URL LEASE_S``. It opens the real store and its coordinator on database ``URL`` (model ``m``
created), then reads commands from stdin, one a line: ``<op> <k> <when> <trial>``. For each, it
takes the lease (waiting for it), then runs ``op`` with the real store code and stops its
whole process at the ``k``-th round trip to the server of that operation (``psycopg``'s
``Connection.wait``): ``when`` is ``before`` (the previous answer read, the next request not
sent: idle inside a transaction) or ``inside`` (the request sent, its answer not read: the
statement running or done on the server). Once resumed (SIGCONT) it prints one JSON line:
``{"stopped": bool, "outcome": "ok" | <exception class>, "seq": <first seq written>}``;
``stopped`` false means the operation has fewer than ``k + 1`` round trips.

Operations: ``append1`` (one event: one statement), ``append_keys`` (events with an
idempotency key: a transaction), ``append_batch`` (100 events: one record),
``create``, ``delete``, ``snapshot`` (three pieces), and the lease's own statements: ``renew``
(the renewal, by the coordinator's thread) and ``acquire`` (taking it, once the test's
instance released it).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Generator
from typing import Any

import psycopg

from app.storage import IdempotentAnswer, Snapshot, StorageError
from app.storage.postgres import PostgresStore


class Trap:
    """Stops the process at the ``k``-th ``Connection.wait`` made by thread ``thread`` while
    ``condition()`` holds, once armed."""

    def __init__(self) -> None:
        self.armed = False
        self.k = 0
        self.when = "before"
        self.thread = "MainThread"
        self.condition: Callable[[], bool] = lambda: True
        self.count = 0
        self.stopped = False
        original = psycopg.Connection.wait
        trap = self

        def wait(conn: Any, gen: Any, *args: Any, **kwargs: Any) -> Any:
            if trap.armed and threading.current_thread().name == trap.thread and trap.condition():
                if trap.count == trap.k:
                    trap.armed = False
                    if trap.when == "before":
                        trap.halt()
                    else:
                        gen = trap.after_first_step(gen)
                trap.count += 1
            return original(conn, gen, *args, **kwargs)

        psycopg.Connection.wait = wait  # type: ignore[method-assign]

    def arm(self, k: int, when: str, thread: str = "MainThread", condition: Callable[[], bool] = lambda: True) -> None:
        self.k, self.when, self.thread, self.count, self.stopped = k, when, thread, 0, False
        self.condition = condition
        self.armed = True

    def halt(self) -> None:
        self.stopped = True
        os.kill(os.getpid(), signal.SIGSTOP)

    def after_first_step(self, gen: Generator[Any, Any, Any]) -> Generator[Any, Any, Any]:
        """``gen``, halting the process once its first step ran (the request is sent)."""
        try:
            value = gen.send(None)
        except StopIteration as done:
            self.halt()
            return done.value
        self.halt()
        while True:
            try:
                sent = yield value
            except GeneratorExit:
                gen.close()
                raise
            except BaseException as exc:
                try:
                    value = gen.throw(exc)
                except StopIteration as done:
                    return done.value
                continue
            try:
                value = gen.send(sent)
            except StopIteration as done:
                return done.value


def retry(call: Callable[[], Any], attempts: int = 5) -> Any:
    """``call()``, again after a storage error (its pooled sessions may have been ended)."""
    for i in range(attempts):
        try:
            return call()
        except StorageError:
            if i == attempts - 1:
                raise
            time.sleep(0.05)


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="stopped writer %(threadName)s: %(message)s")
    url, lease_s = sys.argv[1], float(sys.argv[2])
    trap = Trap()
    store = PostgresStore(url, piece_bytes=4)
    store.create_model("m", "{}")
    coordinator = store.coordinator("stopped", "http://stopped", lease_s, 0.05)
    coordinator.start(lambda lease: None, lambda model, seq: None)  # renews, and takes it back when released
    # ready once it holds the lease: the test's replica, started next, would otherwise find
    # it free and take it (a loaded machine can delay this process's first poll)
    deadline = time.monotonic() + 30
    while (lease := coordinator.holder()) is None or lease.holder != "stopped":
        assert time.monotonic() < deadline, "the writer did not take the free lease"
        time.sleep(0.02)
    token = 0
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        op, k, when, trial = line.split()
        deadline = time.monotonic() + 30  # hold the lease: after a stop, a newer one (that one was taken over)
        newer_than = token if trap.stopped else 0
        while (lease := coordinator.holder()) is None or lease.holder != "stopped" or lease.token <= newer_than:
            assert time.monotonic() < deadline, "the test's instance did not release the lease"
            time.sleep(0.02)
        token = lease.token
        trap.stopped = False
        seq = retry(lambda: next(m.last_seq for m in store.models() if m.name == "m")) + 1
        outcome = "ok"
        try:
            if op == "delete":
                retry(lambda trial=trial: store.create_model(f"d{trial}", "{}"))
            if op == "renew" and int(k) == 0:  # its next renewal: one statement
                trap.arm(0, when, "streamtree-lease", lambda: coordinator.holder() is not None)
            elif op == "acquire":  # given up, taken back by its next attempt: its statements
                trap.arm(int(k), when, "streamtree-lease", lambda: coordinator.holder() is None)
                coordinator.release()
            if op in ("renew", "acquire"):
                deadline = time.monotonic() + 5
                while trap.armed and time.monotonic() < deadline:  # the lease thread's next round
                    time.sleep(0.01)
            else:
                trap.arm(int(k), when)
                if op == "append1":
                    store.append("m", seq, [f"e{seq}"])
                elif op == "append_keys":
                    store.append(
                        "m", seq, [f"e{seq}", f"e{seq + 1}"], [IdempotentAnswer(f"key{trial}", "h", 2, seq + 1)]
                    )
                elif op == "append_batch":
                    store.append("m", seq, [f"e{seq + i}" for i in range(100)])
                elif op == "create":
                    store.create_model(f"c{trial}", "{}")
                elif op == "delete":
                    store.delete_model(f"d{trial}")
                elif op == "snapshot":
                    store.save_snapshot("m", Snapshot(int(trial), b"0123456789", "{}"), keep=2)
                else:
                    raise ValueError(f"unknown op {op!r}")
        except Exception as exc:  # reported: the test checks it against what the database holds
            outcome = type(exc).__name__
        finally:
            trap.armed = False
        print(json.dumps({"stopped": trap.stopped, "outcome": outcome, "seq": seq}), flush=True)


if __name__ == "__main__":
    main()
