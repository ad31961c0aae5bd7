"""``streamtree predict FILE --model NAME --out FILE``: a model's probabilities for each row of a file.

The file is read a chunk at a time like ``streamtree learn``'s (the next chunk read while
the previous one is in flight), each chunk's rows sent as one batch prediction, and the
answers written in the input's order: one column ``p_<class>`` per class (the class as the
service's JSON names it), after the ``--id-column`` if given. With ``--decide COSTS.json``
(decision to {label: cost}) each row also gets its decision of least expected cost and one
column ``cost_<decision>`` per decision. A ``--label`` column, if the file has one, is
dropped; every other column is a feature. Nothing is learned and no id is kept by the
service.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from streamtree.bulk.problems import BulkError, explain
from streamtree.bulk.rows import encode_predict
from streamtree.bulk.running import Interrupts, Parser, Progress, add_common, pipelined, run_command, source_and_model
from streamtree.bulk.sinks import open_sink
from streamtree.bulk.sources import Chunk, Source
from streamtree.client import RemoteModel
from streamtree.client.errors import ConnectionFailed, ServiceError

__all__ = ["main", "parser", "run"]


def parser() -> Parser:
    """The command's options."""
    p = Parser(
        prog="streamtree predict",
        description="Write a model's class probabilities (and with --decide its decisions) for each row "
        "of a CSV, TSV, Parquet or JSON-lines file (or stdin), in the file's order.",
    )
    add_common(p)
    p.add_argument(
        "--out",
        required=True,
        metavar="FILE",
        help="where to write: .csv, .tsv, .parquet or .jsonl (.gz for CSV and JSON lines); - for CSV on stdout",
    )
    p.add_argument("--label", metavar="COLUMN", help="a label column of the file, dropped (not a feature)")
    p.add_argument(
        "--decide",
        metavar="COSTS.json",
        help="also write each row's decision of least expected cost under these costs "
        '(a JSON object of decision to {label: cost}, e.g. {"block": {"fraud": 0, "ok": 5}, "pass": ...})',
    )
    return p


def read_costs(path: str) -> dict[str, dict[str, float]]:
    """The cost matrix of ``--decide``: a JSON object of decision to {label: cost}."""
    try:
        costs = json.loads(Path(path).read_text())
    except OSError as e:
        raise BulkError(f"--decide: cannot read {path}: {e.strerror or e}") from None
    except json.JSONDecodeError as e:
        raise BulkError(f"--decide: {path} is not JSON: {e}") from None
    if not isinstance(costs, dict) or not costs or not all(isinstance(r, dict) for r in costs.values()):
        raise BulkError(f"--decide: {path} holds no JSON object of decision to {{label: cost}}")
    return costs


def main(argv: Sequence[str]) -> None:
    """Run ``streamtree predict`` with ``argv`` (the arguments after the command's name)."""
    run_command("predict", lambda: run(argv))


def run(argv: Sequence[str], transport: Any = None) -> None:
    """:func:`main` without the exit: a user's error is a :class:`BulkError`."""
    args = parser().parse_args(list(argv))
    costs = read_costs(args.decide) if args.decide is not None else None
    with Interrupts("predict") as interrupts, source_and_model(args, transport) as (source, model):
        Predicting(args, source, model, costs, interrupts).run()


def _kept(sink: Any) -> str:
    """What an unfinished run says of ``--out`` itself: left as it was."""
    return "" if sink.partial is None else f"; {sink.path} is as it was"


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:  # the output does not exist yet
        return False


class Predicting:
    """One run: the chunks sent in order, the answers written in order."""

    def __init__(
        self, args: Any, source: Source, model: RemoteModel, costs: dict[str, Any] | None, interrupts: Interrupts
    ) -> None:
        self.args = args
        self.interrupts = interrupts
        self.source = source
        self.model = model
        self.costs = costs
        self.classes: list[str] | None = None

    def fail(self, e: ServiceError | ConnectionFailed, chunk: Chunk | None = None) -> BulkError:
        row_of = (lambda i: f"row {chunk.row(i):,}") if chunk is not None else None
        rows = None if chunk is None else len(chunk)
        return explain(e, self.model.client.url, self.model.name, row_of, creatable=False, rows=rows)

    def chunks(self) -> Iterator[tuple[Chunk, list[dict[str, Any]], list[Any] | None]]:
        for chunk in self.source.chunks():
            instances, ids = encode_predict(chunk, self.args.label, self.args.id_column)
            yield chunk, instances, ids

    def frame(self, chunk: Chunk, ids: list[Any] | None, answer: dict[str, Any]) -> pd.DataFrame:
        """The output rows of one chunk: id, decision and expected costs, probabilities."""
        probabilities: list[dict[str, float]] = answer["probabilities"]
        if self.classes is None:
            self.classes = list(dict.fromkeys(k for p in probabilities for k in p))
            if probabilities and not self.classes:
                raise BulkError(f"model {self.model.name!r} has learned no label yet: it has no probabilities to give")
        extra = set().union(*map(dict.keys, probabilities)) - set(self.classes)
        if extra:
            raise BulkError(
                f"rows from {chunk.first_row:,}: the model answers classes {sorted(extra)} it did not answer "
                "for the first rows (it learned them during the run); run predict again"
            )
        out = pd.DataFrame.from_records(probabilities, columns=self.classes, index=range(len(probabilities)))
        out = out.fillna(0.0)
        out.columns = [f"p_{c}" for c in self.classes]
        if self.costs is not None:
            decisions = list(self.costs)
            expected = pd.DataFrame.from_records(answer["expected_costs"], columns=decisions)
            expected.columns = [f"cost_{d}" for d in decisions]
            out = pd.concat([pd.DataFrame({"decision": answer["decisions"]}), expected, out], axis=1)
        if ids is not None:
            if self.args.id_column in out.columns:
                raise BulkError(
                    f"--id-column {self.args.id_column!r} is also a column of the answers "
                    f"({', '.join(map(repr, out.columns[:6]))}...): rename it in the file"
                )
            out.insert(0, self.args.id_column, pd.Series(ids, dtype=object))  # as given: 42 is no 42.0
        return out

    def no_rows(self) -> pd.DataFrame:
        """The output of an input without rows: no rows, the columns the model's answers would
        give (its labels as they are now)."""
        labels = self.model.info().get("labels") or []
        answer: dict[str, Any] = {"probabilities": [], "decisions": [], "expected_costs": []}
        self.classes = list(labels)
        frame = self.frame(Chunk(1, records=[]), [] if self.args.id_column else None, answer)
        return frame.astype({c: float for c in frame.columns if c.startswith(("p_", "cost_"))})

    def ask(self, chunk: Chunk, instances: list[dict[str, Any]]) -> dict[str, Any]:
        """The service's answer for one chunk's instances."""
        try:
            if self.costs is not None:
                return self.model.decide_batch(instances, self.costs)
            return {"probabilities": self.model.predict_batch(instances)}
        except (ServiceError, ConnectionFailed) as e:
            raise self.fail(e, chunk) from None
        except (TypeError, ValueError) as e:  # the costs, as the client checks them
            raise BulkError(f"--decide: {e}") from None

    def run(self) -> None:
        """Check the model, predict every chunk, write the answers, say how many on stderr."""
        try:
            self.model.info()
        except (ServiceError, ConnectionFailed) as e:
            raise self.fail(e) from None
        if self.args.out != "-" and self.source.path != "-" and _same_file(self.source.path, self.args.out):
            raise BulkError(f"--out {self.args.out} is the input file: it would be overwritten while it is read")
        sink = open_sink(self.args.out)
        progress = Progress(self.source, not self.args.no_progress, "rows")
        started = time.perf_counter()
        complete = False
        try:
            made = pipelined(self.chunks(), stop_when=lambda: self.interrupts.requested)
            for chunk, instances, ids in self.interrupts.until_requested(made):
                sink.write(self.frame(chunk, ids, self.ask(chunk, instances)))
                progress.update(len(chunk))
            complete = not self.interrupts.stopped_early
            if complete and sink.rows == 0:  # the header (Parquet: the schema) alone: a file its readers open
                sink.write(self.no_rows())
        except BaseException as e:
            progress.close()
            with contextlib.suppress(BulkError):  # the file stays partial; its own failure would hide this one
                sink.close(complete=False)
            if isinstance(e, BulkError):
                raise BulkError(f"{e} ({sink.rows:,} rows before it written to {sink.where}{_kept(sink)})") from None
            raise
        sink.close(complete)
        progress.close()
        if self.interrupts.stopped_early:
            sys.stderr.write(
                f"streamtree predict: interrupted after {sink.rows:,} rows written to {sink.where}{_kept(sink)}\n"
            )
            raise SystemExit(130)
        elapsed = time.perf_counter() - started
        rate = sink.rows / elapsed if elapsed > 0 else 0.0
        sys.stderr.write(
            f"predicted {sink.rows:,} rows with {self.model.name!r} into {self.args.out} "
            f"in {elapsed:.1f} s: {rate:,.0f} rows/s\n"
        )
