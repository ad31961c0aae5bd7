"""The client's encoding of features: the fast path (orjson in one pass) and the careful one
(:func:`clean_features`) send the same JSON, whichever an event takes."""

from __future__ import annotations

import datetime
from typing import Any

import numpy as np
import orjson
import pandas as pd
import pytest

from streamtree.client.encoding import clean_features, features_json, records, rows

SAME = [
    {"a": 1.5, "b": "red", "c": 3, "d": True},
    {"a": float("nan"), "b": None, "c": pd.NA, "d": pd.NaT},
    {"null": 1.0, "text": "null [{"},  # marks inside strings: the careful way, the same answer
    {"a": np.float32(0.1), "b": np.int64(7), "c": np.bool_(False), "d": np.str_("x")},
    {"a": -0.0, "b": 1e300, "c": -(2**63), "d": ""},
    {},
]


@pytest.mark.parametrize("x", SAME)
def test_both_ways_send_the_same(x: dict[str, Any]) -> None:
    assert orjson.loads(features_json(x)) == clean_features(x)
    assert all(type(v) in (str, int, float, bool) for v in clean_features(x).values())


def test_a_float32_is_sent_as_python_reads_it() -> None:
    assert orjson.loads(features_json({"a": np.float32(0.1)})) == {"a": float(np.float32(0.1))}


@pytest.mark.parametrize(
    ("x", "error", "names"),
    [
        ({"a": float("inf")}, ValueError, r"x\['a'\]: feature values must be finite"),
        ({"a": [1, 2]}, TypeError, r"x\['a'\]: a feature value is"),
        ({"a": {"b": 1}}, TypeError, r"x\['a'\]"),
        ({"a": datetime.date(2026, 1, 1)}, TypeError, r"x\['a'\]"),
        ({"a": np.datetime64("2026-01-01T00:00:00.000000000")}, TypeError, r"x\['a'\]"),
        ({"a": 2**70}, ValueError, r"x\['a'\]: integer feature values are within 64 bits"),
        ({"a": 2**63}, ValueError, r"x\['a'\]: integer feature values are within 64 bits, not 9223372036854775808"),
        ({"a": np.uint64(2**64 - 1)}, ValueError, r"x\['a'\]: integer feature values are within 64 bits"),
        ({3: 1.0}, TypeError, "feature names are strings"),
        ([("a", 1.0)], TypeError, "features are a dict"),
    ],
)
def test_what_the_service_cannot_take_is_refused(x: Any, error: type, names: str) -> None:
    with pytest.raises(error, match=names):
        features_json(x)


def test_rows_of_a_dataframe_an_array_and_a_list() -> None:
    frame = pd.DataFrame({"a": [1.0, None], "b": pd.array(["x", None], dtype="string"), 3: [1, 2]})
    assert rows(frame) == [{"a": 1.0, "b": "x", "3": 1}, {"3": 2}]
    assert rows(np.array([[1.0, np.nan]]), columns=["p", "q"]) == [{"p": 1.0}]
    assert records([{"a": 1}], None) == [{"a": 1}]
