"""``streamtree learn`` against a real service: every format (and stdin) logs each row once,
in order, blank cells left out; an interrupted run (a failed network, Ctrl-C) resumed learns
nothing twice; a refused row stops the run keeping the rows before it."""

from __future__ import annotations

import io
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pandas as pd
import pytest

from streamtree.bulk import learn
from streamtree.bulk.problems import BulkError
from streamtree.client import Client
from streamtree.client.errors import AFTER_NOT_LEARNED
from tests.bulk.conftest import (
    EXE,
    TOKEN,
    Service,
    cli,
    env,
    expected_events,
    fresh_name,
    logged,
    table,
    write,
)


def run(service: Service, path: Path | str, name: str, *more: str, transport: Any = None) -> None:
    """``streamtree learn`` in this process (the model created with the default config)."""
    argv = [str(path), "--model", name, "--label", "y", "--id-column", "rid", "--url", service.url]
    argv += ["--token", TOKEN, "--no-progress", "--create", str(Path(__file__).parent / "default.json"), *more]
    learn.run(argv, transport=transport)


@pytest.mark.parametrize("suffix", ["csv", "csv.gz", "tsv", "parquet", "jsonl", "jsonl.gz"])
def test_each_format_logs_every_row_once_in_order(
    service: Service, client: Client, tmp_path: Path, suffix: str, capsys: pytest.CaptureFixture[str]
) -> None:
    frame = table(130, seed=1)
    path = write(frame, tmp_path / f"rows.{suffix}")
    name = fresh_name()
    run(service, path, name, "--batch-size", "50")
    got = logged(client, name)
    assert got == expected_events(frame)
    assert any("b" not in e["features"] for e in got) and any("s" not in e["features"] for e in got)  # blank cells
    assert all("rid" not in e["features"] and "y" not in e["features"] for e in got)
    assert "learned 130 events into" in capsys.readouterr().out


def test_stdin_and_the_console_script(service: Service, client: Client, tmp_path: Path) -> None:
    frame = table(70, seed=2)
    name = fresh_name()
    client.model(name).create()
    done = cli(
        service,
        "learn",
        "-",
        "--format",
        "csv",
        "--model",
        name,
        "--label",
        "y",
        "--id-column",
        "rid",
        "--batch-size",
        "30",
        stdin=frame.to_csv(index=False).encode(),
    )
    assert done.returncode == 0, done.stderr.decode()
    assert logged(client, name) == expected_events(frame)
    assert "learned 70 events" in done.stdout.decode() and "70 new" in done.stdout.decode()


def test_a_row_of_blank_cells_is_an_event_without_features(service: Service, client: Client, tmp_path: Path) -> None:
    path = tmp_path / "blank.csv"
    path.write_text("a,s,y\n1.5,x,yes\n,,no\n2,,yes\n")
    name = fresh_name()
    learn.run(
        [
            str(path),
            "--model",
            name,
            "--label",
            "y",
            "--url",
            service.url,
            "--token",
            TOKEN,
            "--no-progress",
            "--create",
            str(Path(__file__).parent / "default.json"),
        ]
    )
    assert logged(client, name) == [
        {"features": {"a": 1.5, "s": "x"}, "label": "yes"},
        {"features": {}, "label": "no"},
        {"features": {"a": 2.0}, "label": "yes"},
    ]
    # only a blank cell (or NaN) is missing: "NA", "None", "null" are values (labels too)
    path.write_text("s,y\nNA,NA\nNone,no\nnull,yes\nNaN,no\n")
    name = fresh_name()
    learn.run(
        [str(path), "--model", name, "--label", "y", "--url", service.url, "--token", TOKEN, "--no-progress"]
        + ["--create", str(Path(__file__).parent / "default.json")]
    )
    assert [(e["features"].get("s"), e["label"]) for e in logged(client, name)] == [
        ("NA", "NA"),
        ("None", "no"),
        ("null", "yes"),
        (None, "no"),
    ]


class FailAfter(httpx.BaseTransport):
    """Sends requests to the service until ``n`` learn requests have been sent; the answer of
    the ``n``-th is lost (the service did learn it) and every request sent after it fails to
    connect.

    Learn requests are numbered as they are sent, under a lock: with two in flight, the
    service may answer them in either order, and numbering them by their answers made the
    one whose answer is lost now the third, now the fourth."""

    def __init__(self, n: int) -> None:
        self.inner = httpx.HTTPTransport()
        self.n = n
        self.sent = 0
        self.lock = threading.Lock()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        learn = request.url.path.endswith("/learn")
        with self.lock:
            if self.sent >= self.n:
                raise httpx.ConnectError("the network is down (test)", request=request)
            self.sent += learn
            number = self.sent if learn else 0
        response = self.inner.handle_request(request)
        if number == self.n:
            response.read()
            response.close()
            raise httpx.ReadError("the answer was lost (test)", request=request)
        return response

    def close(self) -> None:
        self.inner.close()


@pytest.mark.parametrize("in_flight", ["1", "2"])
def test_a_run_cut_by_the_network_resumes_learning_nothing_twice(
    service: Service, client: Client, tmp_path: Path, capsys: pytest.CaptureFixture[str], in_flight: str
) -> None:
    frame = table(400, seed=3)
    path = write(frame, tmp_path / "rows.csv")
    name = fresh_name()
    with pytest.raises(BulkError) as cut:
        run(
            service,
            path,
            name,
            "--batch-size",
            "50",
            "--retries",
            "0",
            "--in-flight",
            in_flight,
            transport=FailAfter(4),
        )
    line = str(cut.value)
    assert (
        "no answer from the service at" in line
        and "; 150 events are learned (run the same command again to resume)" in line
    ), line
    got = logged(client, name)
    # the 4th chunk was learned, its answer lost; the 5th, sent after it, never reached the service
    assert got == expected_events(frame)[:200]
    run(service, path, name, "--batch-size", "50")
    assert logged(client, name) == expected_events(frame)
    assert f"({400 - len(got)} new, {len(got)} already learned)" in capsys.readouterr().out


class Recording(httpx.BaseTransport):
    """Sends every request to the service, recording the learn requests' idempotency headers;
    answers the learn requests numbered in ``refuse`` (from 1) with the 409 of a request whose
    predecessor had not arrived, without sending them."""

    def __init__(self, refuse: tuple[int, ...] = ()) -> None:
        self.inner = httpx.HTTPTransport()
        self.refuse = refuse
        self.sent: list[tuple[str, str | None]] = []
        self.lock = threading.Lock()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/learn"):
            with self.lock:
                self.sent.append((request.headers["idempotency-key"], request.headers.get("idempotency-after")))
                n = len(self.sent)
            if n in self.refuse:
                body = {"detail": "The request named by Idempotency-After was not learned", "type": AFTER_NOT_LEARNED}
                return httpx.Response(409, json=body, request=request)
        return self.inner.handle_request(request)

    def close(self) -> None:
        self.inner.close()


def test_each_chunk_names_the_one_before_it_and_a_refused_one_is_sent_again(
    service: Service, client: Client, tmp_path: Path
) -> None:
    frame = table(250, seed=6)
    path = write(frame, tmp_path / "rows.csv")
    name = fresh_name()
    recording = Recording(refuse=(2,))
    run(service, path, name, "--batch-size", "50", transport=recording)
    assert logged(client, name) == expected_events(frame)
    keys = [key for key, _ in recording.sent]
    # six requests for five chunks: the 2nd chunk was refused (as if it overtook the 1st) and sent again
    assert len(recording.sent) == 6 and keys.count(keys[1]) == 2 and len(set(keys)) == 5
    chunks = list(dict.fromkeys(keys))
    assert dict(recording.sent) == {chunks[0]: None} | {chunks[i]: chunks[i - 1] for i in range(1, 5)}
    again = Recording()  # a re-run: its first chunk follows nothing
    run(service, path, name, "--batch-size", "50", transport=again)
    assert again.sent == [(k, None if i == 0 else chunks[i - 1]) for i, k in enumerate(chunks)]
    assert logged(client, name) == expected_events(frame)


def test_ctrl_c_then_a_rerun_learns_each_row_once(service: Service, client: Client, tmp_path: Path) -> None:
    frame = table(30_000, seed=4)
    path = write(frame, tmp_path / "big.csv")
    name = fresh_name()
    model = client.model(name)
    model.create()
    args = ["learn", str(path), "--model", name, "--label", "y", "--id-column", "rid", "--batch-size", "100"]
    proc = subprocess.Popen([str(EXE), *args], env=env(service), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while model.info()["seq"] == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    cut_at = model.info()["seq"]
    assert proc.returncode == 130, err.decode()
    assert 0 < cut_at < len(frame), "the run ended before it was interrupted: make the file larger"
    # the first Ctrl-C lets the batch in flight finish, so its answer is counted too
    assert f"interrupted; {cut_at:,} events are learned (run the same command again to resume)" in err.decode()
    done = cli(service, *args, "--no-progress")
    assert done.returncode == 0, done.stderr.decode()
    assert f"({len(frame) - cut_at:,} new, {cut_at:,} already learned)" in done.stdout.decode()
    assert logged(client, name) == expected_events(frame)


def test_a_ctrl_c_while_waiting_on_an_open_pipe_stops_at_once(service: Service, client: Client) -> None:
    # nothing was in flight, and the run waited for the pipe's next line (10 s and more); the
    # second Ctrl-C then ended it without saying what was learned, or aborted the interpreter
    name = fresh_name()
    model = client.model(name)
    model.create()
    args = ["learn", "-", "--format", "jsonl", "--model", name, "--label", "y", "--batch-size", "2", "--no-progress"]
    proc = subprocess.Popen([str(EXE), *args], env=env(service), stdin=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdin is not None
    proc.stdin.write(b'{"a": 1, "y": "p"}\n{"a": 2, "y": "q"}\n')
    proc.stdin.flush()  # the pipe stays open, with no new line
    deadline = time.monotonic() + 60
    while model.info()["seq"] < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    started = time.monotonic()
    _, err = proc.communicate(timeout=30)
    assert time.monotonic() - started < 5, "the first Ctrl-C waited for a new line"
    assert proc.returncode == 130, err.decode()
    assert "interrupted; 2 events are learned (run the same command again to resume)" in err.decode()
    assert "Fatal Python error" not in err.decode()
    proc.stdin.close()


def test_a_second_ctrl_c_stops_at_once_when_the_service_does_not_answer(service: Service, tmp_path: Path) -> None:
    path = write(table(10, seed=4), tmp_path / "rows.csv")
    with socket.create_server(("127.0.0.1", 0)) as silent:  # accepts, never answers
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        args = ["learn", str(path), "--model", "m", "--label", "y", "--url", url, "--retries", "0"]
        proc = subprocess.Popen([str(EXE), *args], env=env(service), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        silent.settimeout(60)
        conn, _ = silent.accept()  # the command's first request: its Ctrl-C handling is in place
        with conn:
            proc.send_signal(signal.SIGINT)
            time.sleep(0.2)
            assert proc.poll() is None, "the first Ctrl-C waits for the answer in flight"
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130
    assert "stopping after the batch in flight (Ctrl-C again to stop at once)" in err.decode()
    assert "streamtree learn: stopped at once (a second Ctrl-C)" in err.decode()
    assert "Traceback" not in err.decode()


def test_a_refused_row_keeps_the_rows_before_it_and_the_fixed_file_resumes(
    service: Service, client: Client, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    frame = table(200, seed=5)
    broken = frame.copy()
    broken.loc[129, "y"] = None  # row 130
    path = write(broken, tmp_path / "rows.csv")
    name = fresh_name()
    with pytest.raises(BulkError) as refused:
        run(service, path, name, "--batch-size", "50")
    line = str(refused.value)
    assert line.startswith("row 130: no label in column 'y'") and "; 100 events are learned" in line
    assert logged(client, name) == expected_events(frame)[:100]
    write(frame, path)
    run(service, path, name, "--batch-size", "50")
    assert logged(client, name) == expected_events(frame)
    assert "(100 new, 100 already learned)" in capsys.readouterr().out


def test_the_same_file_twice_learns_it_once(service: Service, client: Client, tmp_path: Path) -> None:
    frame = table(90, seed=6)
    path = write(frame, tmp_path / "rows.parquet")
    name = fresh_name()
    run(service, path, name, "--batch-size", "40")
    run(service, path, name, "--batch-size", "40")
    assert logged(client, name) == expected_events(frame)


def test_a_changed_file_is_refused_where_it_changed_and_learns_no_row_twice(
    service: Service, client: Client, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A chunk's key is its place in a file that begins with the same chunk, not its rows: a
    chunk whose rows changed since an earlier run is refused (its rows were learned once), and
    rows added after the last full chunk are learned in new chunks."""
    frame = table(130, seed=7)
    path = write(frame.iloc[:100], tmp_path / "rows.csv")
    name = fresh_name()
    run(service, path, name, "--batch-size", "40")  # chunks of 40, 40 and 20 rows
    write(frame, path)  # 30 rows appended: the third chunk now has 40
    with pytest.raises(BulkError) as refused:
        run(service, path, name, "--batch-size", "40")
    line = str(refused.value)
    assert line.startswith("rows 81-120 differ from the rows an earlier run learned in their place") and (
        line.endswith("learn a file of the new rows alone; 80 events are learned")
    )
    assert logged(client, name) == expected_events(frame.iloc[:100])

    write(frame.iloc[:120], path)  # a file of three full chunks ...
    other = fresh_name()
    run(service, path, other, "--batch-size", "40")
    write(frame, path)  # ... grown by 10 rows: a fourth chunk, learned alone
    capsys.readouterr()
    run(service, path, other, "--batch-size", "40")
    assert logged(client, other) == expected_events(frame)
    assert "(10 new, 120 already learned)" in capsys.readouterr().out

    edited = frame.copy()
    edited.loc[50, "a"] = 1234.5  # row 51, in the second chunk
    write(edited, path)
    with pytest.raises(BulkError, match="^rows 41-80 differ from the rows"):
        run(service, path, other, "--batch-size", "40")
    assert logged(client, other) == expected_events(frame)


def test_a_header_only_file_learns_nothing(service: Service, client: Client, tmp_path: Path) -> None:
    path = tmp_path / "empty.csv"
    pd.DataFrame(columns=["a", "y"]).to_csv(path, index=False)
    name = fresh_name()
    learn.run(
        [
            str(path),
            "--model",
            name,
            "--label",
            "y",
            "--url",
            service.url,
            "--token",
            TOKEN,
            "--no-progress",
            "--create",
            str(Path(__file__).parent / "default.json"),
        ]
    )
    assert logged(client, name) == []


@pytest.mark.parametrize("suffix", ["parquet", "jsonl.gz", "csv.gz"])
def test_stdin_in_any_format(
    service: Service, client: Client, tmp_path: Path, suffix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Parquet from a pipe is spooled to a temporary file; gzip is told by its first bytes."""
    frame = table(80, seed=7)
    data = write(frame, tmp_path / f"rows.{suffix}").read_bytes()
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(data)))
    name = fresh_name()
    run(service, "-", name, "--format", suffix.split(".")[0], "--batch-size", "30")
    assert logged(client, name) == expected_events(frame)
