"""bench.bulk's own parts: the CSV it writes, and its reading of the CLI's summary line."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from bench.bulk import make_csv, parse_summary


def test_the_bench_file_has_the_columns_blanks_and_labels_it_says(tmp_path: Path) -> None:
    labels = make_csv(tmp_path / "rows.csv", 2_500, seed=1)
    frame = pd.read_csv(tmp_path / "rows.csv")
    assert list(frame.columns) == [*(f"x{i}" for i in range(10)), "s0", "s1", "s2", "y"]
    assert len(frame) == len(labels) == 2_500
    assert frame["y"].tolist() == labels.tolist() and set(labels) == {"yes", "no"}
    assert 0.003 < frame.drop(columns="y").isna().to_numpy().mean() < 0.03
    assert frame["y"].notna().all()


def test_the_summary_line_is_read() -> None:
    line = "learned 1,000,000 events into 'm' (600,000 new, 400,000 already learned) in 41.5 s: 24,096 events/s"
    assert parse_summary(line) == {"learned": 1_000_000, "new": 600_000, "already": 400_000, "seconds": 41.5}
