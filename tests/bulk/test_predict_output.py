"""``streamtree predict``'s output against a real service: in place only once complete, ids as
they were given, and what cannot be written said in one line."""

from __future__ import annotations

import decimal
import json
from pathlib import Path

import pandas as pd
import pytest

from streamtree.bulk import predict
from tests.bulk.conftest import TOKEN, Service, table, write
from tests.bulk.test_errors import fails


def argv(service: Service, model: str, source: Path, out: Path, *more: str) -> list[str]:
    return [
        str(source),
        "--model",
        model,
        "--out",
        str(out),
        "--url",
        service.url,
        "--token",
        TOKEN,
        "--no-progress",
        *more,
    ]


def test_a_run_that_fails_leaves_the_last_complete_output_as_it_was(
    service: Service, trained: str, tmp_path: Path
) -> None:
    # --out was truncated before the first answer: a failed re-run left it empty
    source = write(table(200, seed=21), tmp_path / "rows.csv")
    out = tmp_path / "scores.csv"
    predict.run(argv(service, trained, source, out, "--label", "y", "--batch-size", "50"))
    before = out.read_bytes()
    assert len(pd.read_csv(out)) == 200 and not (tmp_path / "scores.csv.partial").exists()
    costs = tmp_path / "costs.json"
    costs.write_text(json.dumps({"stop": {"nope": 1.0}}))  # a label the model does not know: refused
    line = fails(predict, argv(service, trained, source, out, "--label", "y", "--decide", str(costs)))
    assert "scores.csv.partial" in line and "scores.csv is as it was" in line
    assert out.read_bytes() == before


def test_integer_ids_come_back_as_integers_when_some_are_missing(
    service: Service, trained: str, tmp_path: Path
) -> None:
    # a chunk with a missing id made every id of it a float: 2**53 + 1 became 9007199254740992.0
    rows = [{"a": 1.0, "rid": 9007199254740993}, {"a": 2.0}, {"a": 3.0, "rid": 42}]
    source = tmp_path / "rows.jsonl"
    source.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    for suffix in ("csv", "jsonl", "parquet"):
        out = tmp_path / f"out.{suffix}"
        predict.run(argv(service, trained, source, out, "--id-column", "rid"))
        if suffix == "csv":
            assert [line.split(",")[0] for line in out.read_text().splitlines()] == [
                "rid",
                "9007199254740993",
                "",
                "42",
            ]
        elif suffix == "jsonl":
            ids = [json.loads(line)["rid"] for line in out.read_text().splitlines()]
            assert ids == [9007199254740993, None, 42]
        else:
            import pyarrow.parquet as pq

            assert pq.read_table(out).column("rid").to_pylist() == [9007199254740993, None, 42]


def test_an_id_column_named_as_an_answer_column_is_one_line(service: Service, trained: str, tmp_path: Path) -> None:
    frame = table(20, seed=22).rename(columns={"rid": "p_yes"})
    source = write(frame, tmp_path / "rows.csv")
    line = fails(predict, argv(service, trained, source, tmp_path / "out.csv", "--id-column", "p_yes", "--label", "y"))
    assert "--id-column 'p_yes' is also a column of the answers" in line


def test_ids_json_has_no_type_for_are_written_as_text(service: Service, trained: str, tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    dates = pd.DataFrame({"a": [1.0, 2.0], "when": pd.to_datetime(["2026-01-02 03:04:05", "2026-01-03 00:00:00"])})
    amounts = pd.DataFrame({"a": [1.0, 2.0], "amount": [decimal.Decimal("1.10"), decimal.Decimal("2")]})
    for frame, column, expected in [
        (dates.set_index("when"), "when", ["2026-01-02T03:04:05", "2026-01-03T00:00:00"]),  # a pandas index too
        (amounts, "amount", ["1.10", "2.00"]),  # decimal(3, 2) in Parquet
    ]:
        source = tmp_path / f"{column}.parquet"
        frame.to_parquet(source)
        out = tmp_path / "out.jsonl"
        predict.run(argv(service, trained, source, out, "--id-column", column))
        assert [json.loads(line)[column] for line in out.read_text().splitlines()] == expected


def test_parquet_ids_missing_from_the_first_chunk_take_the_type_of_the_first_given(
    service: Service, trained: str, tmp_path: Path
) -> None:
    # the first chunk's id column had no type, and every later id was refused as not fitting it
    rows = [{"a": 1.0}, {"a": 2.0}, {"a": 3.0}, {"a": 4.0, "rid": 9007199254740993}, {"a": 5.0, "rid": 7}]
    source = tmp_path / "rows.jsonl"
    source.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    out = tmp_path / "out.parquet"
    predict.run(argv(service, trained, source, out, "--id-column", "rid", "--batch-size", "2"))
    import pyarrow.parquet as pq

    written = pq.read_table(out)
    assert written.column("rid").to_pylist() == [None, None, None, 9007199254740993, 7]
    assert written.num_rows == 5 and not (tmp_path / "out.parquet.partial.widened").exists()
    alone = tmp_path / "alone.parquet"
    predict.run(argv(service, trained, source, alone, "--id-column", "rid", "--batch-size", "5"))
    assert pq.read_table(alone).drop_columns(["rid"]).equals(written.drop_columns(["rid"]))


def test_an_input_without_rows_writes_a_file_its_readers_open(service: Service, trained: str, tmp_path: Path) -> None:
    # a 0-byte .parquet (no footer) and a .csv without its header: the day's empty file broke
    # the pipeline in its reader, while predict said it had done well
    source = tmp_path / "rows.csv"
    source.write_text("a,rid,y\n")
    labels = sorted(str(v) for v in table(600, seed=10)["y"].unique())
    for suffix in ("csv", "jsonl", "parquet"):
        out = tmp_path / f"out.{suffix}"
        predict.run(argv(service, trained, source, out, "--label", "y", "--id-column", "rid"))
        if suffix == "csv":
            read = pd.read_csv(out)
        elif suffix == "parquet":
            read = pd.read_parquet(out)
        else:
            assert out.read_text() == ""  # JSON lines: no line is no row
            continue
        assert len(read) == 0 and list(read.columns) == ["rid", *sorted(f"p_{c}" for c in labels)], read.columns


def test_a_full_disk_is_one_line_naming_the_output(service: Service, trained: str, tmp_path: Path) -> None:
    # a traceback ending in OSError [Errno 28], 20-34 lines of it
    source = write(table(2_000, seed=23), tmp_path / "rows.csv")
    for suffix in ("csv", "jsonl", "parquet"):
        out = tmp_path / f"out.{suffix}"
        partial = Path(f"{out}.partial")
        partial.symlink_to("/dev/full")  # what the command writes to, full
        line = fails(predict, argv(service, trained, source, out, "--label", "y"))
        assert f"--out: cannot write {partial}: No space left on device" in line, line
        assert not out.exists()
        partial.unlink()
