"""Encoding batches: every input shape encodes as its rows one at a time would (the list of
dicts is the oracle), including the one-assignment path for matrices of numbers."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from streamtree import ProbabilityTree
from streamtree.encoding import encode_batch, encode_for_prediction
from streamtree.exceptions import InputError
from streamtree.features import FeatureRegistry


def _registry(rows: list[dict]) -> FeatureRegistry:
    reg = FeatureRegistry()
    for x in rows:
        reg.encode(x, learn=True)
    return reg


def _dicts(frame: pd.DataFrame) -> list[dict]:
    return [
        {k: v for k, v in row.items() if not (isinstance(v, float) and math.isnan(v))}
        for row in frame.to_dict("records")
    ]


def _same(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> None:
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])


FRAMES = {
    "registry order": pd.DataFrame({"a": [1.0, 2.5, np.nan], "b": [0.5, -1.0, 3.0], "c": [7, 8, 9]}),
    "other order": pd.DataFrame({"c": [7, 8, 9], "a": [1.0, np.nan, 3.0], "b": [0.5, -1.0, 3.0]}),
    "a subset": pd.DataFrame({"b": [0.5, np.nan, 2.0]}),
    "integers": pd.DataFrame({"a": [1, 2, 3], "b": [4, 5, 6], "c": [7, 8, 9]}),
}


@pytest.mark.parametrize("name", FRAMES)
def test_known_numeric_frames_encode_as_their_rows(name: str) -> None:
    reg = _registry([{"a": 1.0, "b": 2.0, "c": 3.0}, {"k": "u"}])
    frame = FRAMES[name]
    new_reg, num, nom, first = encode_batch(reg, frame)
    _, num_d, nom_d, _ = encode_batch(reg, _dicts(frame))
    _same((num, nom), (num_d, nom_d))
    assert new_reg is reg and first == {}  # nothing registered
    assert num.flags.c_contiguous and num.flags.writeable
    _same(encode_for_prediction(reg, frame), encode_for_prediction(reg, _dicts(frame)))


def test_prediction_ignores_unknown_columns_and_treats_infinity_as_missing() -> None:
    reg = _registry([{"a": 1.0, "b": 2.0}])
    frame = pd.DataFrame({"zz": [1.0, 2.0], "b": [np.inf, 4.0], "a": [-np.inf, np.nan]})
    num, nom = encode_for_prediction(reg, frame)
    np.testing.assert_array_equal(num, [[np.nan, np.nan], [np.nan, 4.0]])
    assert nom.shape == (2, 0)
    _same((num, nom), encode_for_prediction(reg, _dicts(frame)))


def test_an_infinite_value_rejects_the_batch_naming_the_feature() -> None:
    model = ProbabilityTree()
    model.learn_many(pd.DataFrame({"a": [1.0, 2.0], "b": [3.0, 4.0]}), ["x", "y"])
    before = model.summary()
    with pytest.raises(InputError, match="'b'") as caught:
        model.learn_many(pd.DataFrame({"a": [1.0, 2.0], "b": [3.0, np.inf]}), ["x", "y"])
    assert caught.value.field == "b"
    assert model.summary() == before


def test_new_and_numeric_nominal_columns_take_the_general_path() -> None:
    reg = _registry([{"a": 1.0, "n": 2}])
    frame = pd.DataFrame({"a": [1.0, 2.0], "new": [5.0, np.nan]})
    new_reg, num, _, first = encode_batch(reg, frame)
    assert new_reg is not reg and new_reg.n_numeric == 3 and first == {2: 5.0}
    assert reg.n_numeric == 2  # the model's registry is untouched
    np.testing.assert_array_equal(num, [[1.0, np.nan, 5.0], [2.0, np.nan, np.nan]])
    nominal = _registry([{"a": 1.0, "s": "u"}, {"s": "v"}])
    frame = pd.DataFrame({"a": [1.0], "s": ["v"]})
    _same(encode_for_prediction(nominal, frame), encode_for_prediction(nominal, _dicts(frame)))


@pytest.mark.parametrize("dtype", [float, object])
def test_a_column_name_twice_is_refused_naming_it(dtype: type) -> None:
    # which of the two is the feature? (keeping the last, as a frame's rows as dicts do, lost
    # the other silently; with mixed types it was refused as a "list" value)
    reg = _registry([{"a": 1.0, "b": 2.0}])
    frame = pd.DataFrame([[1.0, 2.0, 3.0]], columns=["a", "b", "a"]).astype(dtype)
    for encode in (encode_batch, encode_for_prediction):
        with pytest.raises(InputError, match="'a' more than once") as err:
            encode(reg, frame)
        assert err.value.field == "X"


def test_numpy_arrays_name_their_columns_by_position() -> None:
    reg = _registry([{0: 1.0, 1: 2.0}])
    X = np.array([[1.5, 2.5], [np.nan, 4.0]])
    _, num, _, _ = encode_batch(reg, X)
    np.testing.assert_array_equal(num, X)
    assert num is not X  # a copy: the caller's array is never the model's
    _same(encode_for_prediction(reg, X.astype(np.float32)), encode_for_prediction(reg, [{0: 1.5, 1: 2.5}, {1: 4.0}]))
