"""Reading a file a chunk at a time: a line over MAX_LINE_BYTES is refused as it is read, not
taken into memory whole (a small gzip file of one long line took gigabytes)."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from streamtree.bulk import sources
from streamtree.bulk.problems import BulkError


@pytest.mark.parametrize(
    "name, text",
    [
        ("header.csv.gz", "y," + "a" * 3_000_000 + "\nyes,1\n"),
        ("row.csv.gz", "y,a\nyes,1\nno," + "x" * 3_000_000 + "\n"),
        ("row.jsonl.gz", '{"y": "yes", "a": 1}\n{"y": "no", "a": "' + "x" * 3_000_000 + '"}\n'),
    ],
)
def test_a_line_over_the_bound_is_refused_as_it_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, text: str
) -> None:
    monkeypatch.setattr(sources, "MAX_LINE_BYTES", 2**20)
    path = tmp_path / name
    with gzip.open(path, "wt") as f:
        f.write(text)
    with pytest.raises(BulkError, match="is over 1 MiB: more than any service takes in one request"):
        source = sources.open_source(str(path), None, 10)
        list(source.chunks())


def test_long_lines_within_the_bound_and_quoted_line_breaks_are_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sources, "MAX_LINE_BYTES", 2**20)
    path = tmp_path / "ok.csv"
    path.write_text('y,a\nyes,"' + ("x" * 900_000 + "\n") * 3 + '"\nno,1\n')  # 2.7 MB in one quoted cell
    source = sources.open_source(str(path), None, 10)
    [chunk] = list(source.chunks())
    assert chunk.frame is not None and len(chunk.frame) == 2
