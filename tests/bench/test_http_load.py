"""``bench.http_load``'s CPU accounting: a process's CPU seconds, read from /proc."""

from __future__ import annotations

import os
import time

from bench.http_load import cpu_seconds


def test_cpu_seconds_count_this_process_work() -> None:
    before = cpu_seconds(os.getpid())
    start = time.process_time()
    while time.process_time() - start < 0.2:  # busy for 0.2 s of CPU
        pass
    spent = cpu_seconds(os.getpid()) - before
    assert 0.1 <= spent <= 5.0
