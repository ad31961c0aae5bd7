"""What ``streamtree learn`` and ``streamtree predict`` share: their common options, a parser
whose errors are one line, the progress bar, and the pipeline that reads the next chunk while
the previous request is in flight."""

from __future__ import annotations

import argparse
import contextlib
import os
import queue
import signal
import sys
import threading
from collections.abc import Callable, Generator, Iterator
from typing import Any, NoReturn, TypeVar

from tqdm import tqdm

from streamtree.bulk.problems import BulkError
from streamtree.bulk.rows import check_columns
from streamtree.bulk.sources import FORMATS, Source, open_source
from streamtree.client import Client, RemoteModel

__all__ = ["DEFAULT_URL", "Interrupts", "Parser", "Progress", "add_common", "pipelined", "positive"]

T = TypeVar("T")

#: The service's URL when neither ``--url`` nor ``STREAMTREE_URL`` says.
DEFAULT_URL = "http://127.0.0.1:8000"


class Parser(argparse.ArgumentParser):
    """An argument parser whose errors are a :class:`BulkError` (one line, exit status 1)."""

    def error(self, message: str) -> NoReturn:
        raise BulkError(f"{message} (see {self.prog} --help)")


#: Most rows a chunk may hold (the service takes 10,000 by default, max_batch): a chunk is read
#: whole before it is sent.
MAX_BATCH_SIZE = 100_000
#: Most learn requests on their way at once: each holds its chunk.
MAX_IN_FLIGHT = 16


def positive(text: str) -> int:
    """An integer option from 1."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"an integer >= 1, got {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"an integer >= 1, got {text!r}")
    return n


def at_most(limit: int) -> Callable[[str], int]:
    """An integer option from 1 to ``limit``: more only holds more of the file in memory (a
    chunk, or chunks in flight) before the service refuses it or gains nothing from it."""

    def checked(text: str) -> int:
        n = positive(text)
        if n > limit:
            raise argparse.ArgumentTypeError(f"an integer from 1 to {limit:,}, got {text!r}")
        return n

    return checked


def count(text: str) -> int:
    """An integer option from 0."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"an integer >= 0, got {text!r}") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"an integer >= 0, got {text!r}")
    return n


def add_common(p: argparse.ArgumentParser) -> None:
    """The options both commands take: the file, the model, the service, the chunking."""
    p.add_argument(
        "file", metavar="FILE", help="CSV, TSV, Parquet or JSON-lines file (.gz for CSV and JSON lines); - for stdin"
    )
    p.add_argument("--model", required=True, metavar="NAME", help="the service's model")
    p.add_argument(
        "--url",
        default=os.environ.get("STREAMTREE_URL") or DEFAULT_URL,
        help=f"the service's URL (default: $STREAMTREE_URL or {DEFAULT_URL})",
    )
    p.add_argument(
        "--token", default=os.environ.get("STREAMTREE_TOKEN") or None, help="API key (default: $STREAMTREE_TOKEN)"
    )
    p.add_argument("--format", choices=FORMATS, help="the file's format (default: from its suffix; needed for -)")
    p.add_argument(
        "--batch-size",
        type=at_most(MAX_BATCH_SIZE),
        default=10_000,
        metavar="N",
        help="rows per request (default 10000)",
    )
    p.add_argument("--id-column", metavar="COL", help="a column that names the row, not a feature")
    p.add_argument(
        "--retries",
        type=count,
        default=5,
        metavar="N",
        help="times a request is sent again after a connection error or a 503 (default 5)",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar (it is shown when stderr is a terminal)")


class Progress:
    """A progress bar of rows on stderr (events/s and, when the total is known or estimated, ETA),
    shown when stderr is a terminal (a log file gets the last line only).

    Parquet's row count is exact; for CSV and JSON lines the total is the rows so far divided
    by the share of the file's bytes read, updated at each chunk.
    """

    def __init__(self, source: Source, enabled: bool, unit: str) -> None:
        self.source = source
        self.bar: Any = tqdm(
            total=source.total_rows,
            unit=f" {unit}",
            unit_scale=True,
            disable=None if enabled else True,  # None: shown only when stderr is a terminal
            file=sys.stderr,
            dynamic_ncols=True,
            smoothing=0.1,
            mininterval=0.5,
        )
        self.rows = 0

    def update(self, n: int) -> None:
        """``n`` more rows done."""
        self.rows += n
        if self.source.total_rows is None:
            share = self.source.fraction_read()
            if share:
                self.bar.total = max(self.rows, round(self.rows / share))
        self.bar.update(n)

    def close(self) -> None:
        """End the bar (the total made exact)."""
        if self.source.total_rows is None and self.bar.total is not None:
            self.bar.total = self.rows
            self.bar.refresh()
        self.bar.close()


_END = object()
#: Readers left blocked (on a pipe with no new line) when their run stopped: see run_command.
_ABANDONED: list[threading.Thread] = []


def pipelined(
    items: Iterator[T], depth: int = 1, stop_when: Callable[[], bool] = lambda: False
) -> Generator[T, None, None]:
    """``items`` made in a background thread, at most ``depth`` waiting beside the one in use.

    With ``depth=1`` the next chunk is read and encoded while the previous request is in
    flight: one chunk in flight, one ready, and the thread holding at most one more (the one
    it is reading, or one made and waiting for room), so memory stays bounded however large
    the file. An exception of ``items`` is raised here, after the items before it; a
    consumer that stops early stops the thread. While it waits for the next item it ends
    once ``stop_when()`` (a Ctrl-C): a pipe left open with no new rows would otherwise hold
    the run until its next line.
    """
    ready: queue.Queue[Any] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def put(item: Any) -> bool:
        while not stop.is_set():
            try:
                ready.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def make() -> None:
        try:
            for item in items:
                if not put(item):
                    return
        except BaseException as e:  # handed to the consumer, raised in its thread
            put(_Failure(e))
            return
        put(_END)

    thread = threading.Thread(target=make, name="streamtree-bulk-reader", daemon=True)
    thread.start()
    stopped = False
    try:
        while True:
            try:
                item = ready.get(timeout=0.1)
            except queue.Empty:
                if stop_when():
                    stopped = True
                    return
                continue
            if item is _END:
                return
            if isinstance(item, _Failure):
                raise item.error
            yield item
    finally:
        stop.set()
        # a reader blocked on an open pipe cannot be stopped: it is a daemon, gone with the process
        thread.join(timeout=0.1 if stopped else 5)
        if thread.is_alive():
            _ABANDONED.append(thread)


class Interrupts:
    """Ctrl-C for a bulk command: the first one stops the run between two chunks, the second
    ends the process at once.

    Raising ``KeyboardInterrupt`` wherever the main thread happens to be (inside httpx's
    connection pool, a queue's lock) can leave a lock held that the way out then waits on
    forever, and it loses the answer to the request in flight (learned, but not counted).
    So while this is entered (in the main thread), SIGINT only sets :attr:`requested`; the
    loop checks it after each answer and stops there, with every answer counted. A second
    Ctrl-C, for a service that does not answer, writes one line and exits with status 130
    without running any clean-up. Outside the main thread (where Python cannot take
    signals) this does nothing. Enter it before the first request, so that no request is
    ever interrupted half-way by the first Ctrl-C.
    """

    def __init__(self, command: str) -> None:
        self.command = command
        self.requested = False
        self.stopped_early = False  # set by until_requested when it left items unread
        self._previous: Any = None

    def __enter__(self) -> Interrupts:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
            self._previous = None

    def until_requested(self, items: Iterator[T]) -> Iterator[T]:
        """``items`` until a Ctrl-C: checked before each next one, so after the caller has
        handled the one before (its answer counted); :attr:`stopped_early` says whether some
        were left (none is read once a Ctrl-C came first)."""
        if self.requested:
            self.stopped_early = True
            return
        for item in items:
            yield item
            if self.requested:
                self.stopped_early = True
                return
        self.stopped_early = self.requested  # items that stopped waiting for a Ctrl-C (pipelined)

    def _handle(self, signum: int, frame: Any) -> None:
        # os.write, not sys.stderr: the handler may run inside a write to sys.stderr
        if self.requested:
            os.write(2, f"\nstreamtree {self.command}: stopped at once (a second Ctrl-C)\n".encode())
            os._exit(130)
        self.requested = True
        os.write(
            2,
            f"\nstreamtree {self.command}: stopping after the batch in flight (Ctrl-C again to stop at once)\n".encode(),
        )


class _Failure:
    """An exception of the producing thread, on its way to the consumer."""

    def __init__(self, error: BaseException) -> None:
        self.error = error


def run_command(command: str, body: Callable[[], None]) -> None:
    """Run ``body``; a :class:`BulkError` ends the command with its line (exit status 1), a
    closed standard output (``| head``) quietly.

    A run stopped (Ctrl-C) while its reader waits on a pipe with no new line leaves that
    reader blocked in ``stdin``'s lock, where the interpreter's shutdown would abort on it
    ("Fatal Python error: could not acquire lock"): the command then ends with ``os._exit``
    once its output is flushed.
    """
    code: int | str | None = None
    try:
        body()
    except BulkError as e:
        code = f"streamtree {command}: {e}"
    except BrokenPipeError:  # the output's reader stopped (``| head``): end quietly, as Unix tools do
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        code = 1
    except SystemExit as e:
        code = e.code
    if any(t.is_alive() for t in _ABANDONED):
        if isinstance(code, str):
            sys.stderr.write(code + "\n")
            code = 1
        with contextlib.suppress(OSError, ValueError):
            sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code or 0)
    if code is not None:
        raise SystemExit(code)


@contextlib.contextmanager
def source_and_model(args: argparse.Namespace, transport: Any = None) -> Iterator[tuple[Source, RemoteModel]]:
    """The command's open file (its columns checked against ``--label`` and ``--id-column``)
    and its model on the service, each bad option a :class:`BulkError` naming it; the file is
    closed and the client's connections let go on the way out."""
    if args.id_column is not None and args.id_column == args.label:
        raise BulkError(f"--id-column and --label name the same column {args.label!r}")
    source = open_source(args.file, args.format, args.batch_size, (args.id_column,) if args.id_column else ())
    try:
        check_columns(source.columns, source.name, args.label, args.id_column)
        try:
            client = Client(args.url, token=args.token, retries=args.retries, transport=transport)
        except ValueError as e:
            raise BulkError(f"--url or --token: {e}") from None
        with client:
            try:
                model = client.model(args.model)
            except ValueError as e:
                raise BulkError(f"--model: {e}") from None
            yield source, model
    finally:
        source.close()
