"""``streamtree learn FILE --model NAME --label COLUMN``: learn a file's rows into a model.

The file is read a chunk of ``--batch-size`` rows at a time (:mod:`streamtree.bulk.sources`),
each chunk made into events (:mod:`streamtree.bulk.rows`) and posted as one batch with an
``Idempotency-Key`` that is a digest of the model, the file's first chunk and the chunk's
index. Up to
``--in-flight`` requests (2 by default) are on their way at once, each naming the one before
it in ``Idempotency-After``, so the service learns them in the file's order however they
arrive, while the next one's transfer and parsing overlap the previous one's learning and
commit. The next chunk is read meanwhile: at most ``--in-flight`` + 2 chunks are in memory
(in flight, ready, being read).

Resuming: after an interruption (Ctrl-C, a failed network, a restarted service), the same
command sends the file again; the chunks the service logged are answered from its record of
their keys (kept ``idempotency_window_seconds``, 24 h by default) and learned nothing twice.
A chunk whose rows changed since the earlier run comes with another body under its old key:
the service refuses it, and the run stops there saying the file changed, rather than learn
the rows of that chunk a second time.
The last line counts the events learned, the new ones and the ones learned already (an answer
whose ``seq`` is not above the model's ``seq`` at the start was recorded by an earlier run).
"""

from __future__ import annotations

import json
import sys
import time
from collections import deque
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from streamtree.bulk.problems import BulkError, explain
from streamtree.bulk.rows import chunk_key, encode_learn
from streamtree.bulk.running import (
    MAX_IN_FLIGHT,
    Interrupts,
    Parser,
    Progress,
    add_common,
    at_most,
    pipelined,
    run_command,
    source_and_model,
)
from streamtree.bulk.sources import Chunk, Source
from streamtree.client import RemoteModel
from streamtree.client.errors import (
    AFTER_NOT_LEARNED,
    KEY_REUSED,
    Conflict,
    ConnectionFailed,
    InvalidRequest,
    ServiceError,
)

__all__ = ["main", "parser", "run"]


def parser() -> Parser:
    """The command's options."""
    p = Parser(
        prog="streamtree learn",
        description="Learn the rows of a CSV, TSV, Parquet or JSON-lines file (or stdin) into a model of "
        "a streamtree service, in batches, resumably: running it again after an interruption "
        "learns nothing twice.",
    )
    add_common(p)
    p.add_argument("--label", required=True, metavar="COLUMN", help="the column of the labels")
    p.add_argument(
        "--in-flight",
        type=at_most(MAX_IN_FLIGHT),
        default=2,
        metavar="N",
        help="requests on their way at once, learned in the file's order all the same (default 2; "
        "1 for a service older than Idempotency-After)",
    )
    p.add_argument(
        "--create",
        metavar="CONFIG.json",
        help="create the model first with this config (a JSON object of model parameters; {} for the defaults)",
    )
    return p


def read_config(path: str) -> dict[str, Any]:
    """The model config of ``--create``: a JSON object in a file."""
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise BulkError(f"--create: cannot read {path}: {e.strerror or e}") from None
    try:
        config = json.loads(text)
    except json.JSONDecodeError as e:
        raise BulkError(f"--create: {path} is not JSON: {e}") from None
    if not isinstance(config, dict):
        raise BulkError(f"--create: {path} holds a JSON {type(config).__name__}, not an object of model parameters")
    return config


def main(argv: Sequence[str]) -> None:
    """Run ``streamtree learn`` with ``argv`` (the arguments after the command's name)."""
    run_command("learn", lambda: run(argv))


def run(argv: Sequence[str], transport: Any = None) -> None:
    """:func:`main` without the exit: a user's error is a :class:`BulkError`. ``transport``
    (an ``httpx.BaseTransport``) sends the requests instead of the network."""
    args = parser().parse_args(list(argv))
    config = read_config(args.create) if args.create is not None else None
    with Interrupts("learn") as interrupts, source_and_model(args, transport) as (source, model):
        Learning(args, source, model, interrupts).run(config)


class FileChanged(BulkError):
    """A chunk differs from the one an earlier run learned in its place: a re-run cannot resume."""


class Learning:
    """One run: the chunks sent in order, what the service answered, the progress shown."""

    def __init__(self, args: Any, source: Source, model: RemoteModel, interrupts: Interrupts) -> None:
        self.args = args
        self.interrupts = interrupts
        self.source = source
        self.model = model
        self.url = model.client.url
        self.learned = 0
        self.new = 0
        self.start_seq = 0  # the model's seq when the run started: answers at or below it were learned before
        self.overlap = False  # requests overlap once a chunk is learned anew

    def fail(self, e: ServiceError | ConnectionFailed, chunk: Chunk | None = None) -> BulkError:
        """The line for a client's exception (naming the row when the service names an event)."""
        if chunk is not None and isinstance(e, InvalidRequest) and e.errors:
            if e.errors[0].get("type") == KEY_REUSED:
                return FileChanged(
                    f"rows {chunk.row(0):,}-{chunk.row(len(chunk) - 1):,} differ from the rows an earlier run "
                    f"learned in their place in this file (within the service's idempotency window): the file "
                    "changed since (rows edited, removed or inserted before them, or added to its last chunk); "
                    "they are not learned again. To learn rows added to a file, learn a file of the new rows alone"
                )
        row_of = (lambda i: f"row {chunk.row(i):,}") if chunk is not None else None
        return explain(e, self.url, self.model.name, row_of, rows=None if chunk is None else len(chunk))

    def chunks(self) -> Iterator[tuple[Chunk, bytes, str]]:
        """Each chunk, its events' JSON and its key."""
        first = b""
        for index, chunk in enumerate(self.source.chunks()):
            _, blob = encode_learn(chunk, self.args.label, self.args.id_column)
            if index == 0:
                first = blob
            yield chunk, blob, chunk_key(self.model.name, first, index)

    def answers(self, pool: ThreadPoolExecutor) -> Iterator[tuple[Chunk, dict[str, Any]]]:
        """Each chunk sent and the service's answer, in the file's order, with up to
        ``--in-flight`` requests on their way; at a Ctrl-C no more chunks are sent, and the
        answers of those in flight are still collected.

        Each request names the one sent before it (``after``). One the service refused
        because that one had not reached it in time is sent again once that one's answer came.

        While the chunks are answered as learned by an earlier run (a re-run), one is sent at
        a time: a chunk that changed since is refused (its key is its place), but a request
        naming it in ``after`` would be learned after the old one's record, out of the file's
        order. The requests overlap from the first chunk learned anew.
        """
        flight: deque[tuple[Chunk, bytes, str, str | None, Future[dict[str, Any]]]] = deque()
        previous: str | None = None

        def collect() -> tuple[Chunk, dict[str, Any]]:
            chunk, blob, key, after, future = flight.popleft()
            try:
                try:
                    return chunk, future.result()
                except Conflict as e:
                    if not (isinstance(e.body, dict) and e.body.get("type") == AFTER_NOT_LEARNED):
                        raise
                    return chunk, self.model.learn_batch(blob, key, after)  # the one before is learned now
            except (ServiceError, ConnectionFailed) as e:
                raise self.fail(e, chunk) from None

        made = pipelined(self.chunks(), stop_when=lambda: self.interrupts.requested)
        chunks = self.interrupts.until_requested(made)
        try:
            while True:
                try:
                    chunk, blob, key = next(chunks)
                except StopIteration:
                    break
                except BulkError:  # a bad row: the chunks before it are answered (and counted) first
                    while flight:
                        yield collect()
                    raise
                flight.append((chunk, blob, key, previous, pool.submit(self.model.learn_batch, blob, key, previous)))
                previous = key
                while flight and len(flight) >= (self.args.in_flight if self.overlap else 1):
                    got = collect()
                    self.overlap = self.overlap or int(got[1]["seq"]) > self.start_seq
                    yield got
            while flight:
                yield collect()
        finally:
            # the reading thread stops here, before the caller closes the file it reads: left to
            # the garbage collector, it could still be in pandas' parser when the file closes
            made.close()

    def run(self, config: dict[str, Any] | None) -> None:
        """Create the model if asked, send every chunk, print the summary line."""
        try:
            if config is not None:
                try:
                    self.model.create(config)
                except InvalidRequest as e:
                    raise BulkError(f"--create: the service refused the config: {e.line()}") from None
            self.start_seq = int(self.model.info()["seq"])
        except (ServiceError, ConnectionFailed) as e:
            raise self.fail(e) from None
        progress = Progress(self.source, not self.args.no_progress, "events")
        started = time.perf_counter()
        pool = ThreadPoolExecutor(self.args.in_flight, thread_name_prefix="streamtree-learn")
        try:
            for chunk, answer in self.answers(pool):
                n = int(answer["learned"])
                self.learned += n
                if int(answer["seq"]) > self.start_seq:
                    self.new += n
                progress.update(len(chunk))
        except BulkError as e:
            progress.close()
            if self.learned:
                resume = "" if isinstance(e, FileChanged) else " (run the same command again to resume)"
                # answers received: one lost with the connection may be learned too (the guide says so)
                raise BulkError(f"{e}; {self.learned:,} events are learned{resume}") from None
            raise
        finally:  # every answer collected was awaited; one still on its way is not waited for
            pool.shutdown(wait=False, cancel_futures=True)
        progress.close()
        if self.interrupts.stopped_early:
            sys.stderr.write(
                f"streamtree learn: interrupted; {self.learned:,} events are learned "
                "(run the same command again to resume)\n"
            )
            raise SystemExit(130)
        elapsed = time.perf_counter() - started
        rate = self.learned / elapsed if elapsed > 0 else 0.0
        print(
            f"learned {self.learned:,} events into {self.model.name!r} ({self.new:,} new, "
            f"{self.learned - self.new:,} already learned) in {elapsed:.1f} s: {rate:,.0f} events/s",
            flush=True,
        )
