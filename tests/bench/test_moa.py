"""MOA through CapyMOA (bench.moa): the stream file MOA reads, and the worker's predictions.

The worker tests need ``.venv-moa`` (``make .venv-moa/bin/.installed``; ``make test`` does not
build it) and are skipped without it.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from bench import moa
from bench.scoring import Score
from bench.streams import STREAMS

needs_moa = pytest.mark.skipif(
    not moa.available(), reason="MOA is not installed: .venv-moa absent (make .venv-moa/bin/.installed)"
)


def test_the_arff_declares_the_whole_streams_labels_and_keeps_every_double(tmp_path: Path) -> None:
    data = [({"a": 0.1, "b": "red"}, "yes"), ({"a": 1 / 3, "b": "blue"}, 7), ({"b": "red"}, "yes")]
    labels = moa.write_arff(data, tmp_path / "s.arff")
    text = (tmp_path / "s.arff").read_text().splitlines()
    assert labels == ["yes", 7]
    assert text[1:4] == ["@attribute a0 numeric", "@attribute a1 {'red','blue'}", "@attribute class {c0,c1}"]
    rows = text[text.index("@data") + 1 :]
    assert rows == [f"{0.1!r},'red',c0", f"{1 / 3!r},'blue',c1", "?,'red',c0"]
    assert float(rows[1].split(",")[0]) == 1 / 3


def test_a_feature_that_is_neither_number_nor_string_is_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"feature 'when': expected a number, a string or None, got list"):
        moa.write_arff([({"when": [1]}, 0)], tmp_path / "s.arff")


def test_an_unknown_moa_model_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"models: expected names among .*got \['moa-XYZ'\]"):
        moa.prequential(STREAMS["SEA"].take(10), ["moa-XYZ"])


@needs_moa
def test_the_worker_tests_then_trains_every_moa_peer_sanely() -> None:
    data = STREAMS["SEA"].take(500)
    runs = moa.prequential(data, list(moa.MOA_PEERS))
    majority = max(sum(y == label for _, y in data) for label in {True, False}) / len(data)
    for name, run in runs.items():
        probas = run["proba"]
        assert len(probas) == len(data)
        given = [p for p in probas if p]
        assert len(given) >= len(data) - 5, name  # MOA answers once it has trained on an example or two
        for p in given:
            assert set(p) <= {True, False}
            assert math.isclose(sum(p.values()), 1.0, rel_tol=1e-9), (name, p)
            assert all(0.0 <= v <= 1.0 for v in p.values())
        score = Score()
        for (_, y), p in zip(data, probas):
            score.update(y, p)
        result = score.result()
        assert math.isfinite(result["log_loss"]), name
        if name == "moa-HT":
            assert result["accuracy"] > majority, (result, majority)


@needs_moa
def test_moas_own_loop_reports_its_cpu_seconds(tmp_path: Path) -> None:
    data = STREAMS["SEA"].take(500)
    moa.write_arff(data, tmp_path / "s.arff")
    run = moa.java_prequential("moa-HT", tmp_path / "s.arff", len(data), tmp_path)
    assert 0.0 < run["cpu_s"] <= run["jvm_cpu_s"]
