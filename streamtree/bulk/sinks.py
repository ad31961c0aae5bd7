"""Where ``streamtree predict`` writes: a CSV (``.csv``, ``.tsv``, ``.gz`` too), Parquet
(``.parquet``) or JSON-lines (``.jsonl``, ``.ndjson``, ``.gz`` too) file chosen by the suffix
of ``--out``, or CSV on standard output for ``-``. Rows are written a chunk at a time, in the
input's order; the first chunk fixes the columns."""

from __future__ import annotations

import gzip
import os
import sys
from typing import IO, Any

import orjson
import pandas as pd

from streamtree.bulk.problems import BulkError

__all__ = ["Sink", "open_sink"]

_SUFFIXES = {
    ".csv": "csv",
    ".tsv": "tsv",
    ".parquet": "parquet",
    ".pq": "parquet",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
}


class Sink:
    """An output file taking DataFrames of rows, in order."""

    def __init__(self, path: str) -> None:
        self.path = path
        name = path.lower()
        compressed = name.endswith(".gz")
        suffix = os.path.splitext(name[:-3] if compressed else name)[1]
        if path == "-":
            self.format, compressed = "csv", False
        elif suffix not in _SUFFIXES:
            known = ", ".join(sorted(_SUFFIXES))
            raise BulkError(
                f"--out: cannot tell the format of {path} from its suffix {suffix or '(none)'!r} (known: {known})"
            )
        else:
            self.format = _SUFFIXES[suffix]
        if compressed and self.format == "parquet":
            raise BulkError(f"--out: {path}: Parquet compresses itself; write {path[:-3]}")
        self.rows = 0
        self._writer: Any = None
        self._schema: Any = None
        self._file: IO[Any]
        try:
            if path == "-":
                self._file = sys.stdout
            elif self.format == "parquet":
                self._file = open(path, "wb")  # noqa: SIM115 - held until close()
            elif compressed:
                self._file = gzip.open(path, "wt", newline="", encoding="utf-8")
            else:
                self._file = open(path, "w", newline="", encoding="utf-8")  # noqa: SIM115
        except OSError as e:
            raise BulkError(f"--out: cannot write {path}: {e.strerror or e}") from None

    def write(self, frame: pd.DataFrame) -> None:
        """Append the rows of ``frame`` (its columns those of the first frame written)."""
        if self.format in ("csv", "tsv"):
            frame.to_csv(self._file, sep="\t" if self.format == "tsv" else ",", index=False, header=self.rows == 0)
        elif self.format == "jsonl":
            # orjson: floats written exactly (pandas' to_json rounds to 10 digits), NaN as null
            lines = [orjson.dumps(r, option=orjson.OPT_SERIALIZE_NUMPY) for r in frame.to_dict("records")]
            if lines:
                self._file.write(b"\n".join(lines).decode() + "\n")
        else:
            self._write_parquet(frame)
        self.rows += len(frame)

    def _write_parquet(self, frame: pd.DataFrame) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            table = pa.Table.from_pandas(frame, preserve_index=False)
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as e:
            raise BulkError(
                f"--out: rows from {self.rows + 1:,} cannot be written as Parquet (a column of values of "
                f"several types?): {' '.join(str(e).split())[:300]}; write CSV or JSON lines instead"
            ) from None
        if self._writer is None:
            self._schema = table.schema
            self._writer = pq.ParquetWriter(self._file, self._schema)
        else:
            try:
                table = table.cast(self._schema)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError) as e:
                raise BulkError(
                    f"--out: rows from {self.rows + 1:,} do not fit the Parquet schema of the first: {e}"
                ) from None
        self._writer.write_table(table)

    def close(self) -> None:
        """Finish the file (Parquet's footer) and close it (not standard output)."""
        if self._writer is not None:
            self._writer.close()
        if self._file is sys.stdout:
            self._file.flush()
        else:
            self._file.close()


def open_sink(path: str) -> Sink:
    """The output ``path`` (``-``: CSV on standard output)."""
    return Sink(path)
