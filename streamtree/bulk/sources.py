"""The files ``streamtree learn`` and ``streamtree predict`` read, a chunk of rows at a time.

A source is a path or ``-`` (standard input) in one of three formats: CSV (``.csv``, ``.tsv``
tab-separated), Parquet (``.parquet``) and JSON lines (``.jsonl``, ``.ndjson``: one JSON
object per line). The format comes from the suffix or ``--format``; CSV and JSON lines may be
gzip-compressed (told by the file's first two bytes, so ``.gz`` or not). Nothing reads the
whole file: CSV through pandas' ``read_csv(chunksize=...)``, Parquet through pyarrow's
``ParquetFile.iter_batches``, JSON lines line by line. Rows are numbered from 1, the header
not counted (for JSON lines, the row is the line's number).

How far a run has got: Parquet's row count is in its metadata; for a regular CSV or JSON-lines
file, counting lines would cost a pass over it, so the total is estimated from the bytes read
so far against the file's size (compressed bytes for a gzip file).
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import math
import os
import re
import shutil
import sys
import tempfile
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import orjson
import pandas as pd

from streamtree.bulk.problems import BulkError

__all__ = ["FORMATS", "Chunk", "Source", "format_of", "open_source"]

#: The CSV cells read as missing values.
CSV_MISSING = ["", "NaN", "nan"]

#: The formats a source may have (``tsv`` is CSV separated by tabs).
FORMATS = ("csv", "tsv", "parquet", "jsonl")
#: Most bytes of one line (a row; a CSV row's quoted line breaks start new lines): a row that
#: large is far over any service's body limit, and reading one without a bound (a gzip file of
#: one long line) took gigabytes before any error.
MAX_LINE_BYTES = 64 * 2**20
#: A run of digits that may be an integer beyond 64 bits, which orjson reads as a float (below
#: -2**63 from 19 digits: -9223372036854775809).
_LONG_DIGITS = re.compile(rb"\d{19,}")

_SUFFIXES = {
    ".csv": "csv",
    ".tsv": "tsv",
    ".parquet": "parquet",
    ".pq": "parquet",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
}
_GZIP_MAGIC = b"\x1f\x8b"


@dataclass
class Chunk:
    """Rows read together: a DataFrame (CSV, Parquet) or a list of dicts (JSON lines).

    ``first_row`` is the number of its first row; ``rows`` the number of each row when they
    are not consecutive (JSON lines skips blank lines), else None.
    """

    first_row: int
    frame: pd.DataFrame | None = None
    records: list[dict[str, Any]] | None = None
    rows: list[int] | None = None

    def __len__(self) -> int:
        return len(self.frame) if self.frame is not None else len(self.records or ())

    def row(self, i: int) -> int:
        """The number of the chunk's ``i``-th row (from 0) in the file."""
        return self.rows[i] if self.rows is not None else self.first_row + i


def format_of(path: str, given: str | None) -> str:
    """The format of ``path``: ``given`` (``--format``) or told by its suffix (``.gz`` stripped)."""
    if given is not None:
        if given not in FORMATS:
            raise BulkError(f"--format: one of {', '.join(FORMATS)}, got {given!r}")
        return given
    if path == "-":
        raise BulkError("reading standard input (-) needs --format csv, tsv, parquet or jsonl")
    name = path.lower()
    if name.endswith(".gz"):
        name = name[:-3]
    suffix = os.path.splitext(name)[1]
    if suffix not in _SUFFIXES:
        known = ", ".join(sorted(_SUFFIXES))
        raise BulkError(
            f"cannot tell the format of {path} from its suffix {suffix or '(none)'!r} "
            f"(known: {known}, and .gz for csv and jsonl): pass --format csv, tsv, parquet or jsonl"
        )
    return _SUFFIXES[suffix]


def _open_raw(path: str) -> tuple[IO[bytes], int | None]:
    """The file's bytes (standard input for ``-``) and its size when it is a regular file."""
    if path == "-":
        return sys.stdin.buffer, None
    p = Path(path)
    try:
        raw = p.open("rb")
    except FileNotFoundError:
        raise BulkError(f"no such file: {path}") from None
    except IsADirectoryError:
        raise BulkError(f"{path} is a directory, not a file") from None
    except PermissionError:
        raise BulkError(f"cannot read {path}: permission denied") from None
    size = os.fstat(raw.fileno()).st_size if p.is_file() else None
    return raw, size


class Source:
    """An open source: its chunks of ``batch_size`` rows, and how far the reading is.

    Attributes
    ----------
    name
        The path, or ``stdin``.
    format
        One of :data:`FORMATS`.
    columns
        The column names, once known: from the header (CSV) or the schema (Parquet) at
        opening; None for JSON lines (each line names its own).
    total_rows
        The number of rows when it is known without reading them (Parquet), else None.
    """

    def __init__(self, path: str, fmt: str, batch_size: int, text_columns: tuple[str, ...] = ()) -> None:
        self.name = "stdin" if path == "-" else path
        self.path = path
        self.format = fmt
        self.batch_size = batch_size
        self.text_columns = text_columns
        self.columns: list[str] | None = None
        self.total_rows: int | None = None
        self._raw, self._size = _open_raw(path)
        self._spool: IO[bytes] | None = None
        self._text: IO[bytes] = self._raw
        self._csv: Any = None
        self._parquet: Any = None
        self._first: pd.DataFrame | None = None
        try:
            self._open()
        except BaseException:
            self.close()
            raise

    def _open(self) -> None:
        if self.format == "parquet":
            self._open_parquet()
            return
        stream: IO[bytes] = self._raw
        if not isinstance(stream, io.BufferedReader):
            stream = io.BufferedReader(stream)  # type: ignore[arg-type,type-var]
        if stream.peek(2)[:2] == _GZIP_MAGIC:
            stream = gzip.GzipFile(fileobj=stream, mode="rb")  # type: ignore[assignment]
        self._text = stream
        if self.format in ("csv", "tsv"):
            self._open_csv()

    def _open_csv(self) -> None:
        sep = "\t" if self.format == "tsv" else ","
        header = self._csv_header(sep)
        try:
            self._csv = pd.read_csv(
                _Prepended(header, self._text, self.name),  # the header line read again, now by pandas
                sep=sep,
                index_col=False,  # a first row longer than the header is refused, not taken for an index
                chunksize=self.batch_size,
                # missing: a blank cell or NaN only (pandas' default list also reads "NA", "None",
                # "null", "N/A"... as missing, values a file may well mean)
                keep_default_na=False,
                na_values=CSV_MISSING,
                dtype=dict.fromkeys(self.text_columns, str),  # ids come back as written ("00042", 2**53 + 1)
            )
        except pd.errors.EmptyDataError:
            raise BulkError(f"{self.name} is empty: a CSV file starts with a header line of column names") from None
        except (pd.errors.ParserError, UnicodeDecodeError, OSError, EOFError) as e:
            raise BulkError(f"{self.name} is not readable as {self.format.upper()}: {_one_line(e)}") from None
        self._first = self._next_csv(1)  # read now: its columns are the header's
        self.columns = None if self._first is None else [str(c) for c in self._first.columns]

    def _csv_header(self, sep: str) -> bytes:
        """The header line (read), its column names refused if blank or given twice: pandas
        renamed them ("Unnamed: 0", "y.1"), and a second label column was learned as a feature."""
        try:
            raw = self._text.readline(MAX_LINE_BYTES + 1)
            if len(raw) > MAX_LINE_BYTES:
                raise _long_line(self.name)
            line = raw.decode("utf-8-sig")
        except (UnicodeDecodeError, OSError, EOFError) as e:
            raise BulkError(f"{self.name} is not readable as {self.format.upper()}: {_one_line(e)}") from None
        if not line.strip():
            return raw  # pandas says what is wrong: an empty file, or blank lines first
        try:
            names = next(csv.reader([line.rstrip("\r\n")], delimiter=sep, strict=True))
        except csv.Error as e:
            raise BulkError(f"{self.name}: its header line is not readable as {self.format.upper()}: {e}") from None
        for position, name in enumerate(names, start=1):
            if not name.strip():
                raise BulkError(f"{self.name}: column {position} of the header has no name: name each column")
            if names.count(name) > 1:
                raise BulkError(f"{self.name} has the column {name!r} more than once: name each column once")
        return raw

    def _open_parquet(self) -> None:
        try:
            import pyarrow.parquet as pq
        except ImportError:  # pragma: no cover - the parquet extra
            raise BulkError(
                'reading Parquet needs pyarrow (streamtree\'s "parquet" extra): pip install pyarrow'
            ) from None
        source: IO[bytes] = self._raw
        if self._size is None:  # Parquet's footer is at the end: spool a stream to disk, not to memory
            self._spool = tempfile.TemporaryFile()
            shutil.copyfileobj(self._raw, self._spool, 1 << 20)
            self._spool.seek(0)
            source = self._spool
        try:
            self._parquet = pq.ParquetFile(source)
        except Exception as e:  # pyarrow raises ArrowInvalid (a ValueError) and OSErrors
            raise BulkError(f"{self.name} is not readable as Parquet: {_one_line(e)}") from None
        self.columns = [str(c) for c in self._parquet.schema_arrow.names]
        twice = sorted({c for c in self.columns if self.columns.count(c) > 1})
        if twice:
            raise BulkError(f"{self.name} has the column {twice[0]!r} more than once: name each column once")
        self.total_rows = int(self._parquet.metadata.num_rows)

    def fraction_read(self) -> float | None:
        """The share of the file's bytes read so far (None when its size is not known)."""
        if not self._size or self.format == "parquet":
            return None
        try:
            return min(1.0, self._raw.tell() / self._size)
        except (OSError, ValueError):
            return None

    def chunks(self) -> Iterator[Chunk]:
        """The rows, ``batch_size`` at a time, in order."""
        if self.format == "parquet":
            return self._parquet_chunks()
        if self.format == "jsonl":
            return self._jsonl_chunks()
        return self._csv_chunks()

    def _next_csv(self, first: int) -> pd.DataFrame | None:
        """The next chunk of the CSV reader (None at the end)."""
        try:
            with warnings.catch_warnings():  # "a loss of data": a row longer than the header
                warnings.simplefilter("error", pd.errors.ParserWarning)
                frame = next(self._csv)
        except StopIteration:
            return None
        except (pd.errors.ParserError, pd.errors.ParserWarning, UnicodeDecodeError, OSError, EOFError, ValueError) as e:
            raise BulkError(
                f"{self.name}: rows from {first:,} are not readable as {self.format.upper()}: {_one_line(e)}"
            ) from None
        frame.index = pd.RangeIndex(len(frame))
        return frame

    def _csv_chunks(self) -> Iterator[Chunk]:
        frame, self._first = self._first, None
        first = 1
        while frame is not None:
            if len(frame):
                yield Chunk(first, frame=frame)
            first += len(frame)
            frame = self._next_csv(first)

    def _parquet_chunks(self) -> Iterator[Chunk]:
        first = 1
        try:
            for batch in self._parquet.iter_batches(batch_size=self.batch_size):
                # every column of the schema a column (a pandas index too), and an integer
                # column with nulls as ints, not floats (2**53 + 1 would change)
                frame = batch.to_pandas(ignore_metadata=True, integer_object_nulls=True)
                yield Chunk(first, frame=frame)
                first += len(frame)
        except (OSError, ValueError) as e:
            raise BulkError(f"{self.name}: rows from {first:,} are not readable as Parquet: {_one_line(e)}") from None

    def _jsonl_chunks(self) -> Iterator[Chunk]:
        records: list[dict[str, Any]] = []
        rows: list[int] = []
        line_no = 0
        try:
            while line := self._text.readline(MAX_LINE_BYTES + 1):
                if len(line) > MAX_LINE_BYTES:
                    raise _long_line(self.name, line_no + 1)
                line_no += 1
                if not line.strip():
                    continue
                try:
                    obj = orjson.loads(line) if _LONG_DIGITS.search(line) is None else _loads_big_ints(line)
                except ValueError as e:  # orjson.JSONDecodeError too
                    raise BulkError(f"row {line_no:,} of {self.name} is not JSON: {e}") from None
                if not isinstance(obj, dict):
                    raise BulkError(
                        f"row {line_no:,} of {self.name}: each line is a JSON object of column to value, "
                        f"not {type(obj).__name__}"
                    )
                records.append(obj)
                rows.append(line_no)
                if len(records) == self.batch_size:
                    yield Chunk(rows[0], records=records, rows=rows)
                    records, rows = [], []
        except (OSError, EOFError) as e:
            raise BulkError(f"{self.name}: line {line_no + 1:,} is not readable: {_one_line(e)}") from None
        if records:
            yield Chunk(rows[0], records=records, rows=rows)

    def close(self) -> None:
        """Close the file (not standard input)."""
        if self._csv is not None:
            self._csv.close()
        if self._spool is not None:
            self._spool.close()
        if self._raw is not sys.stdin.buffer:
            self._raw.close()


class _Prepended(io.RawIOBase):
    """``head`` then the rest of ``stream``, as one readable binary stream, in which a line
    over :data:`MAX_LINE_BYTES` raises :class:`BulkError` (``name`` the file's)."""

    def __init__(self, head: bytes, stream: IO[bytes], name: str) -> None:
        self._head, self._stream, self._name = head, stream, name
        self._line = 0  # bytes since the last line break

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self._head:
            n = min(len(buffer), len(self._head))
            buffer[:n], self._head = self._head[:n], self._head[n:]
            return n
        data = self._stream.read(len(buffer))
        last = data.rfind(b"\n")
        self._line = self._line + len(data) if last < 0 else len(data) - last - 1
        if self._line > MAX_LINE_BYTES:
            raise _long_line(self._name)
        buffer[: len(data)] = data
        return len(data)


def _long_line(name: str, row: int | None = None) -> BulkError:
    where = f"row {row:,} of {name}" if row is not None else f"{name} has a line that"
    return BulkError(
        f"{where} is over {MAX_LINE_BYTES // 2**20} MiB: more than any service takes in one request "
        "(its max_body_bytes); is it the file you meant?"
    )


def _loads_big_ints(line: bytes) -> Any:
    """A JSON line as orjson reads it, but its integers beyond 64 bits kept as integers (orjson
    makes 10**23 the float 1e+23, which would be learned; as an int it is refused, naming its row
    and column, as the service refuses it)."""

    def finite(text: str) -> float:
        value = float(text)
        if math.isinf(value):
            raise ValueError(f"number is infinity when parsed as double: {text}")
        return value

    def constant(name: str) -> Any:
        raise ValueError(f"{name} is not a JSON value")

    return json.loads(line, parse_float=finite, parse_constant=constant)


def open_source(path: str, fmt: str | None, batch_size: int, text_columns: tuple[str, ...] = ()) -> Source:
    """Open ``path`` (``-``: standard input) in format ``fmt`` (None: from its suffix);
    ``text_columns`` of a CSV are read as the text they hold (ids), not as numbers."""
    return Source(path, format_of(path, fmt), batch_size, text_columns)


def _one_line(e: BaseException) -> str:
    """An exception's message on one line."""
    text = " ".join(str(e).split())
    return text[:300] or type(e).__name__
