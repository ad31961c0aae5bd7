"""``streamtree predict`` against a real service: the probabilities (and decisions) written for
each row, in the input's order, with its id, equal to the client's answers for the same rows."""

from __future__ import annotations

import io
import json
from pathlib import Path

import orjson
import pandas as pd
import pytest

from streamtree.bulk import predict
from streamtree.client import Client, RemoteModel
from tests.bulk.conftest import TOKEN, Service, cli, features, fresh_name, table, write

COSTS = {"stop": {"yes": 0.0, "no": 4.0}, "go": {"yes": 1.0, "no": 0.0}}


def read(path: Path) -> pd.DataFrame:
    if path.suffix == ".parquet":
        return pd.read_parquet(path)
    if path.name.endswith((".jsonl", ".jsonl.gz")):
        return pd.read_json(path, lines=True, dtype=False, precise_float=True)
    return pd.read_csv(path)


def answers(model: RemoteModel, frame: pd.DataFrame) -> pd.DataFrame:
    """What the client answers for the rows of ``frame`` (its rid and y are not features)."""
    probabilities = model.predict_batch(features(frame))
    out = pd.DataFrame(probabilities)
    out.columns = [f"p_{c}" for c in out.columns]
    return out


@pytest.mark.parametrize("suffix", ["csv", "csv.gz", "parquet", "jsonl.gz"])
def test_probabilities_match_the_clients(
    service: Service, client: Client, trained: str, tmp_path: Path, suffix: str
) -> None:
    frame = table(230, seed=11)
    source = write(frame, tmp_path / "score.csv")
    out = tmp_path / f"out.{suffix}"
    predict.run(
        [str(source), "--model", trained, "--out", str(out), "--id-column", "rid", "--label", "y"]
        + ["--url", service.url, "--batch-size", "100", "--no-progress"]
    )
    got = read(out)
    expected = answers(client.model(trained), frame)
    assert list(got.columns) == ["rid", *expected.columns]
    assert got["rid"].tolist() == frame["rid"].tolist()
    for column in expected.columns:
        assert got[column].tolist() == pytest.approx(expected[column].tolist(), rel=1e-12, abs=1e-15)


def test_decisions_match_the_clients(service: Service, client: Client, trained: str, tmp_path: Path) -> None:
    frame = table(150, seed=12).drop(columns=["y"])
    source = write(frame, tmp_path / "score.parquet")
    (tmp_path / "costs.json").write_text(json.dumps(COSTS))
    out = tmp_path / "out.jsonl"
    predict.run(
        [
            str(source),
            "--model",
            trained,
            "--out",
            str(out),
            "--id-column",
            "rid",
            "--decide",
            str(tmp_path / "costs.json"),
        ]
        + ["--url", service.url, "--batch-size", "64", "--no-progress"]
    )
    rows = [orjson.loads(line) for line in out.read_bytes().splitlines()]
    expected = client.model(trained).decide_batch(features(frame, drop=("rid",)), COSTS)
    assert [r["rid"] for r in rows] == frame["rid"].tolist()
    assert [r["decision"] for r in rows] == expected["decisions"]
    for r, costs, probabilities in zip(rows, expected["expected_costs"], expected["probabilities"], strict=True):
        assert {d: r[f"cost_{d}"] for d in COSTS} == pytest.approx(costs)
        assert {c: r[f"p_{c}"] for c in ("yes", "no")} == probabilities


def test_stdin_to_stdout(service: Service, client: Client, trained: str) -> None:
    frame = table(40, seed=13)
    lines = b"".join(orjson.dumps(r) + b"\n" for r in frame.drop(columns=["rid"]).to_dict("records"))
    done = cli(
        service, "predict", "-", "--format", "jsonl", "--model", trained, "--out", "-", "--label", "y", stdin=lines
    )
    assert done.returncode == 0, done.stderr.decode()
    got = pd.read_csv(io.BytesIO(done.stdout))
    expected = answers(client.model(trained), frame)
    assert list(got.columns) == list(expected.columns)
    assert got.to_numpy().ravel().tolist() == pytest.approx(expected.to_numpy().ravel().tolist(), rel=1e-12)
    assert done.stderr.decode().startswith("predicted 40 rows with")


def test_a_model_without_labels_says_so(service: Service, client: Client, tmp_path: Path) -> None:
    name = fresh_name()
    client.model(name).create()
    source = write(table(5), tmp_path / "score.csv")
    with pytest.raises(SystemExit) as ended:
        predict.main(
            [str(source), "--model", name, "--out", str(tmp_path / "o.csv"), "--url", service.url, "--no-progress"]
        )
    assert str(ended.value.code).startswith(f"streamtree predict: model {name!r} has learned no label yet")


def test_ids_and_na_like_text_come_back_as_written(service: Service, trained: str, tmp_path: Path) -> None:
    # an id column of a CSV was read as numbers (00042 became 42.0, 2**53 + 1 lost its last
    # digit) and "NA", "None", "null" cells were read as missing values
    source = tmp_path / "ids.csv"
    source.write_text("tx_id,k\n00042,NA\n9007199254740993,None\n,null\n1e3,ok\n")
    for suffix in ("csv", "jsonl", "parquet"):
        out = tmp_path / f"out.{suffix}"
        predict.run(
            [str(source), "--model", trained, "--out", str(out), "--id-column", "tx_id"]
            + ["--url", service.url, "--token", TOKEN, "--no-progress"]
        )
        if suffix == "csv":
            assert [line.split(",")[0] for line in out.read_text().splitlines()] == [
                "tx_id",
                "00042",
                "9007199254740993",
                "",
                "1e3",
            ]
        else:
            got = read(out)["tx_id"].tolist()
            assert got[:2] + got[3:] == ["00042", "9007199254740993", "1e3"] and (pd.isna(got[2]) or got[2] == "")
