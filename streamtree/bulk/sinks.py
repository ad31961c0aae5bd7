"""Where ``streamtree predict`` writes: a CSV (``.csv``, ``.tsv``, ``.gz`` too), Parquet
(``.parquet``) or JSON-lines (``.jsonl``, ``.ndjson``, ``.gz`` too) file chosen by the suffix
of ``--out``, or CSV on standard output for ``-``. Rows are written a chunk at a time, in the
input's order; the first chunk fixes the columns (in Parquet a column of only missing values
so far takes the type of its first value, the rows before written again). A file is written
as ``<out>.partial`` and takes the name ``<out>`` only once the run is complete: a run that
fails or is interrupted leaves an earlier ``<out>`` as it was (its rows so far in the partial
file)."""

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
        self._started = False  # a frame was written (a header, or a Parquet schema)
        self._writer: Any = None
        self._schema: Any = None
        self._file: IO[Any]
        #: Where the rows are until the run is complete (None: standard output).
        self.partial = None if path == "-" else f"{path}.partial"
        try:
            if self.partial is None:
                self._file = sys.stdout
            elif self.format == "parquet":
                self._file = open(self.partial, "wb")  # noqa: SIM115 - held until close()
            elif compressed:
                self._file = gzip.open(self.partial, "wt", newline="", encoding="utf-8")
            else:
                self._file = open(self.partial, "w", newline="", encoding="utf-8")  # noqa: SIM115
        except OSError as e:
            raise BulkError(f"--out: cannot write {self.partial}: {e.strerror or e}") from None

    @property
    def where(self) -> str:
        """Where the rows written so far are: ``<out>.partial`` until :meth:`close` of a complete run."""
        return self.partial if self.partial is not None and os.path.exists(self.partial) else self.path

    def write(self, frame: pd.DataFrame) -> None:
        """Append the rows of ``frame`` (its columns those of the first frame written; a frame
        of no rows first writes the header, or Parquet's schema, alone).

        Raises
        ------
        BulkError
            The file cannot take them (a full disk, an I/O error), naming it.
        """
        try:
            self._write(frame)
        except OSError as e:
            raise self._failed(e) from None
        self.rows += len(frame)
        self._started = True

    def _failed(self, e: OSError) -> BulkError:
        if self._file is sys.stdout:
            # what stayed in the buffer would be flushed (and fail again) at exit
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - the process's stdout from now on
        where = "standard output" if self.partial is None else self.partial
        return BulkError(f"--out: cannot write {where}: {e.strerror or e}")

    def _write(self, frame: pd.DataFrame) -> None:
        if self.format in ("csv", "tsv"):
            sep = "\t" if self.format == "tsv" else ","
            frame.to_csv(self._file, sep=sep, index=False, header=not self._started)
        elif self.format == "jsonl":
            # orjson: floats written exactly (pandas' to_json rounds to 10 digits), NaN as null
            records = frame.to_dict("records")
            lines = [orjson.dumps(r, default=_as_json, option=orjson.OPT_SERIALIZE_NUMPY) for r in records]
            if lines:
                self._file.write(b"\n".join(lines).decode() + "\n")
        else:
            self._write_parquet(frame)

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
            widened = _typed_nulls(self._schema, table.schema)
            if widened is not None:
                self._rewrite(widened)
            try:
                table = table.cast(self._schema)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError) as e:
                raise BulkError(
                    f"--out: rows from {self.rows + 1:,} do not fit the Parquet schema of the first: {e}"
                ) from None
        self._writer.write_table(table)

    def _rewrite(self, schema: Any) -> None:
        """Write the rows so far again under ``schema``: a Parquet file has one schema, and a
        column that had only missing values so far (an id column) gets its type now. Once per
        such column, a row group at a time."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        self._writer.close()
        self._file.close()
        assert self.partial is not None  # Parquet is never written to standard output
        widened = f"{self.partial}.widened"
        try:
            out = open(widened, "wb")  # noqa: SIM115 - becomes self._file, held until close()
            writer = pq.ParquetWriter(out, schema)
            before = pq.ParquetFile(self.partial)
            for i in range(before.num_row_groups):
                writer.write_table(before.read_row_group(i).cast(schema))
            os.replace(widened, self.partial)
        except (OSError, pa.ArrowException) as e:
            raise BulkError(
                f"--out: cannot write the rows so far again as {widened}: {getattr(e, 'strerror', None) or e}"
            ) from None
        self._file, self._writer, self._schema = out, writer, schema

    def close(self, complete: bool) -> None:
        """Finish the file (Parquet's footer) and close it (not standard output); if the run is
        ``complete``, put it in place of ``<out>`` (on the disk first), else leave it partial.

        Raises
        ------
        BulkError
            The file could not be finished (a full disk, an I/O error), naming it.
        """
        try:
            if self._writer is not None:
                self._writer.close()
            if self._file is sys.stdout:
                self._file.flush()
                return
            self._file.close()
        except OSError as e:
            raise self._failed(e) from None
        if complete and self.partial is not None:
            try:
                fd = os.open(self.partial, os.O_RDONLY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
                os.replace(self.partial, self.path)
            except OSError as e:
                raise BulkError(
                    f"--out: cannot put {self.partial} in place of {self.path}: {e.strerror or e}"
                ) from None


def _typed_nulls(schema: Any, other: Any) -> Any:
    """``schema`` with each of its columns of no type (only missing values so far) taking the
    type ``other`` gives it, or None if no such column has one in ``other``."""
    import pyarrow as pa

    fields = list(schema)
    changed = False
    for i, field in enumerate(fields):
        if pa.types.is_null(field.type) and field.name in other.names:
            given = other.field(field.name).type
            if not pa.types.is_null(given):
                fields[i] = field.with_type(given)
                changed = True
    return pa.schema(fields, metadata=schema.metadata) if changed else None


def _as_json(value: Any) -> Any:
    """An id JSON has no type for, as text: a date or time in ISO form, bytes decoded (bytes
    not UTF-8 escaped), a Decimal or anything else as ``str`` (a CSV writes the same)."""
    if hasattr(value, "isoformat"):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.decode("utf-8", "backslashreplace")
    return str(value)


def open_sink(path: str) -> Sink:
    """The output ``path`` (``-``: CSV on standard output)."""
    return Sink(path)
