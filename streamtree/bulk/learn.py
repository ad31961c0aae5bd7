"""``streamtree learn FILE --model NAME --label COLUMN``: learn a file's rows into a model.

The file is read a chunk of ``--batch-size`` rows at a time (:mod:`streamtree.bulk.sources`),
each chunk made into events (:mod:`streamtree.bulk.rows`) and posted as one batch, in order,
with an ``Idempotency-Key`` that is a digest of the model, the chunk's index and its events.
The next chunk is read while the previous one is in flight (one request at a time, so the
log keeps the file's order; at most three chunks in memory: in flight, ready, being read).

Resuming: after an interruption (Ctrl-C, a failed network, a restarted service), the same
command sends the file again; the chunks the service logged are answered from its record of
their keys (kept ``idempotency_window_seconds``, 24 h by default) and learned nothing twice.
The last line counts the events learned, the new ones and the ones learned already (an answer
whose ``seq`` is not above the model's ``seq`` at the start was recorded by an earlier run).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from streamtree.bulk.problems import BulkError, explain
from streamtree.bulk.rows import chunk_key, encode_learn
from streamtree.bulk.running import Interrupts, Parser, Progress, add_common, pipelined, run_command, source_and_model
from streamtree.bulk.sources import Chunk, Source
from streamtree.client import RemoteModel
from streamtree.client.errors import ConnectionFailed, InvalidRequest, ServiceError

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

    def fail(self, e: ServiceError | ConnectionFailed, chunk: Chunk | None = None) -> BulkError:
        """The line for a client's exception (naming the row when the service names an event)."""
        row_of = (lambda i: f"row {chunk.row(i):,}") if chunk is not None else None
        return explain(e, self.url, self.model.name, row_of)

    def chunks(self) -> Iterator[tuple[Chunk, list[dict[str, Any]], str]]:
        """Each chunk, its events and its key."""
        for index, chunk in enumerate(self.source.chunks()):
            events, blob = encode_learn(chunk, self.args.label, self.args.id_column)
            yield chunk, events, chunk_key(self.model.name, index, blob)

    def run(self, config: dict[str, Any] | None) -> None:
        """Create the model if asked, send every chunk, print the summary line."""
        try:
            if config is not None:
                try:
                    self.model.create(config)
                except InvalidRequest as e:
                    raise BulkError(f"--create: the service refused the config: {e.line()}") from None
            start_seq = int(self.model.info()["seq"])
        except (ServiceError, ConnectionFailed) as e:
            raise self.fail(e) from None
        progress = Progress(self.source, not self.args.no_progress, "events")
        started = time.perf_counter()
        try:
            for chunk, events, key in self.interrupts.until_requested(pipelined(self.chunks())):
                try:
                    answer = self.model.learn_batch(events, key)
                except (ServiceError, ConnectionFailed) as e:
                    raise self.fail(e, chunk) from None
                n = int(answer["learned"])
                self.learned += n
                if int(answer["seq"]) > start_seq:
                    self.new += n
                progress.update(len(chunk))
        except BulkError as e:
            progress.close()
            if self.learned:
                raise BulkError(
                    f"{e}; {self.learned:,} events are learned (run the same command again to resume)"
                ) from None
            raise
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
