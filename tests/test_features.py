"""The feature registry: kinds, order of first appearance, codes, validation."""

from __future__ import annotations

import enum
import json
import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

from streamtree import ProbabilityTree
from streamtree.exceptions import InputError
from streamtree.features import FeatureRegistry
from streamtree.values import NOMINAL, NUMERIC


def test_kinds_follow_the_first_value_and_declarations() -> None:
    reg = FeatureRegistry(nominal_features=["zip"])
    reg.encode({"age": 3, "city": "Oslo", "ok": True, "zip": 7, "w": np.float32(1.5), "n": np.int64(2)}, learn=True)
    kinds = dict(zip(reg.names, reg.kinds))
    assert kinds == {"age": NUMERIC, "city": NOMINAL, "ok": NOMINAL, "zip": NOMINAL, "w": NUMERIC, "n": NUMERIC}


def test_missing_values_register_nothing() -> None:
    reg = FeatureRegistry()
    row = reg.encode({"a": None, "b": float("nan")}, learn=True)
    assert reg.names == [] and row.num_cols == [] and row.nom_cols == []


def test_codes_in_order_of_first_appearance_and_unseen_is_minus_one() -> None:
    reg = FeatureRegistry()
    for city in ["b", "a", "b", "c"]:
        reg.encode({"city": city}, learn=True)
    assert reg.values[0] == ["b", "a", "c"]
    assert reg.encode({"city": "zzz"}, learn=False).nom_codes == [-1]
    assert reg.encode({"unknown": 1.0}, learn=False).num_cols == []


@pytest.mark.parametrize(
    ("x", "field"),
    [
        ({"a": float("inf")}, "a"),
        ({"a": [1]}, "a"),
        ({"a": {"b": 1}}, "a"),
        ({"num": "text"}, "num"),
        ({"nom": 3.5}, "nom"),
        ({"num": 10**400}, "num"),
        ({"a": -(10**400)}, "a"),
        ({"a": np.float64("inf")}, "a"),
    ],
)
def test_unusable_values_raise_before_registering_anything(x: dict, field: str) -> None:
    reg = FeatureRegistry()
    reg.encode({"num": 1.0, "nom": "x"}, learn=True)
    before = reg.to_state()
    with pytest.raises(InputError) as err:
        reg.encode({"new_feature": 1.0, **x}, learn=True)
    assert err.value.field == field
    assert reg.to_state() == before


def test_prediction_treats_unusable_values_as_missing() -> None:
    reg = FeatureRegistry()
    reg.encode({"num": 1.0, "nom": "x"}, learn=True)
    row = reg.encode({"num": "text", "nom": 3.5}, learn=False)
    assert row.num_cols == [] and row.nom_cols == []
    assert reg.encode({"num": 10**400}, learn=False).num_cols == []
    assert reg.value_of(NUMERIC, 0, "text") is None and reg.value_of(NOMINAL, 0, 3.5) is None
    assert reg.value_of(NUMERIC, 0, 10**400) is None
    assert reg.value_of(NUMERIC, 0, 2) == 2 and reg.value_of(NOMINAL, 0, "x") == 0


def test_a_declared_nominal_feature_reads_a_numpy_nan_as_missing_and_refuses_an_infinity() -> None:
    # as it reads Python's: a NaN is no category (before, each numpy NaN got a code of its
    # own and the model could no longer be saved)
    reg = FeatureRegistry(nominal_features=["zip"])
    for value in (75001.0, np.float64("nan"), float("nan"), np.float32("nan"), np.float64(75002.0), 7):
        reg.encode({"zip": value}, learn=True)
    assert reg.values == [[75001.0, 75002.0, 7]]
    with pytest.raises(InputError, match="finite") as err:
        reg.encode({"zip": np.float64("inf")}, learn=True)
    assert err.value.field == "zip"


def test_numpy_and_tuple_names_are_kept_as_they_come_back_from_a_saved_state() -> None:
    # a model's feature keys hash each name with its type: a name kept as np.str_ or
    # np.int64 became str or int once saved and loaded, and the model learned differently after
    reg = FeatureRegistry()
    names = [np.str_("a"), np.int64(3), ("lvl", np.str_("b")), np.bool_(True)]
    reg.encode(dict(zip(names, [1.0, 2.0, "x", 4.0])), learn=True)
    assert [type(n) for n in reg.names] == [str, int, tuple, bool]
    again = FeatureRegistry.from_state(json.loads(json.dumps(reg.to_state())))
    assert again.names == reg.names == ["a", 3, ("lvl", "b"), True]
    assert again.feature_keys().tolist() == reg.feature_keys().tolist()
    assert again.encode({("lvl", "b"): "x", np.str_("a"): 5.0}, learn=False).nom_codes == [0]


def test_enum_and_other_subclass_names_are_kept_as_their_plain_values() -> None:
    # the same for str/int/float subclasses (enum members): the type's name went into the key
    class Col(enum.StrEnum):
        A = "a"

    class Level(enum.IntEnum):
        LOW = 3

    class Mixed(str, enum.Enum):  # noqa: UP042 - its str() is "Mixed.M", not its value
        M = "m"

    reg = FeatureRegistry()
    reg.encode({Col.A: 1.0, Level.LOW: 2.0, Mixed.M: "x", (Col.A, Level.LOW): 4.0}, learn=True)
    assert [type(n) for n in reg.names] == [str, int, str, tuple] and reg.names[3] == ("a", 3)
    again = FeatureRegistry.from_state(json.loads(json.dumps(reg.to_state())))
    assert again.names == reg.names == ["a", 3, "m", ("a", 3)]
    assert again.feature_keys().tolist() == reg.feature_keys().tolist()
    assert reg.encode({Col.A: 5.0, "m": "x"}, learn=False).nom_codes == [0]


def test_state_round_trip() -> None:
    reg = FeatureRegistry(nominal_features=["k"])
    reg.encode({"a": 1.0, "k": 3, "c": "u"}, learn=True)
    reg.encode({"c": "v"}, learn=True)
    again = FeatureRegistry.from_state(reg.to_state())
    assert again.to_state() == reg.to_state()
    assert again.encode({"c": "v", "k": 3}, learn=False).nom_codes == [1, 0]


def test_max_features_refuses_an_example_that_would_pass_it_and_registers_nothing() -> None:
    reg = FeatureRegistry(max_features=3)
    reg.encode({"a": 1.0, "b": "x"}, learn=True)
    with pytest.raises(InputError, match="max_features=3") as err:
        reg.encode({"a": 2.0, "c": 1.0, "d": "y"}, learn=True)
    assert err.value.field is None
    assert reg.names == ["a", "b"] and reg.values == [["x"]]
    reg.encode({"c": 1.0, "a": 3.0}, learn=True)  # exactly at the limit
    assert reg.names == ["a", "b", "c"]
    assert reg.encode({"e": 1.0}, learn=False).num_cols == []  # predicting ignores unknown features
    with pytest.raises(InputError, match="max_features=3"):
        FeatureRegistry.from_state(reg.to_state(), 3).encode({"e": 1.0}, learn=True)


def _registry() -> FeatureRegistry:
    reg = FeatureRegistry(nominal_features=["zip"])
    for x in ({"a": 1.0, "b": 2, "c": "x", "flag": True, "zip": 7}, {"c": "y", "flag": False, "zip": 8}):
        reg.encode(x, learn=True)
    return reg


_BATCH_VALUES = {
    "a": [0.5, 3, None, math.nan, 2**70, -1e308],
    "b": [1, -2.25, None],
    "c": ["x", "y", None],
    "flag": [True, False, None],
}


@pytest.mark.parametrize(
    "odd",
    [
        None,  # only plain, registered values: the fast path answers
        {"a": math.inf},
        {"a": "x"},
        {"a": True},
        {"a": 10**400},
        {"a": [1]},  # unusable for a numeric feature
        {"c": "new"},
        {"c": 1.0},
        {"flag": 1},  # a nominal value not registered, or of another type
        {"zip": 7},  # an int of a feature declared nominal: encode_known's slow path
        {"new": 1.0},  # a feature not registered
    ],
)
def test_encode_known_many_equals_encode_known_row_by_row(odd: dict | None) -> None:
    """The batch form gives encode_known's values and codes for every row, or None when any
    row would need encode (to validate or register)."""
    reg = _registry()
    rng = np.random.default_rng(3)
    xs = []
    for _ in range(40):
        x = {name: values[rng.integers(len(values))] for name, values in _BATCH_VALUES.items() if rng.random() < 0.8}
        xs.append(x)
    if odd is not None:
        xs[17] = xs[17] | odd
    rows = [reg.encode_known(x) for x in xs]
    batch = reg.encode_known_many(xs)
    if any(row is None for row in rows):
        assert batch is None
        return
    assert batch is not None
    num, nom = batch
    np.testing.assert_array_equal(num, np.array([r[0] for r in rows], dtype=np.float64))  # type: ignore[index]
    assert nom.tolist() == [r[1] for r in rows]  # type: ignore[index]
    assert num.dtype == np.float64 and nom.dtype == np.int64


def test_encode_known_many_refuses_what_is_not_a_batch_of_dicts() -> None:
    reg = _registry()
    assert reg.encode_known_many([]) is None
    assert reg.encode_known_many([{"a": 1.0}, [("a", 1.0)]]) is None


UNSAVEABLE_NAMES = [b"raw", frozenset({"a"}), float("nan"), float("inf"), ("k", b"x"), ("k", (1, float("nan")))]


@pytest.mark.parametrize("name", UNSAVEABLE_NAMES, ids=repr)
def test_a_name_the_save_format_cannot_hold_is_refused_and_changes_nothing(name: object) -> None:
    # it was learned, and from then on every to_bytes() raised: nothing learned since the last
    # save could be saved (and a NaN name was a new feature on every example)
    model = ProbabilityTree()
    model.learn_one({"ok": 1.0}, "a")
    before = model.to_bytes()
    for learn in (
        lambda: model.learn_one({"ok": 2.0, name: 1.0}, "b"),
        lambda: model.learn_many([{"ok": 2.0}, {name: "v"}], ["b", "a"]),
        lambda: model.learn_many(pd.DataFrame({"ok": [2.0], name: [1.0]}), ["b"]),
    ):
        with pytest.raises(InputError, match="Feature names must be") as err:
            learn()
        assert repr(err.value.field) == repr(name) and model.to_bytes() == before
    model.learn_one({"ok": 2.0, ("k", 1, None, 2.5, True): "v"}, "b")  # tuples of scalars save as ever
    assert ProbabilityTree.from_bytes(model.to_bytes()).registry.names == ["ok", ("k", 1, None, 2.5, True)]


def test_a_nominal_number_that_is_neither_int_nor_float_is_refused_or_its_int() -> None:
    model = ProbabilityTree(nominal_features=["zip"])
    model.learn_one({"zip": 7}, "a")
    before = model.to_bytes()
    with pytest.raises(InputError, match="ints or floats") as err:
        model.learn_one({"zip": Fraction(1, 3)}, "b")
    assert err.value.field == "zip" and model.to_bytes() == before

    class Code(int):  # an Integral of another type: the int it stands for
        pass

    model.learn_one({"zip": Code(7)}, "b")
    model.learn_one({"zip": Code(8)}, "b")
    assert model.registry.values == [[7, 8]] and type(model.registry.values[0][1]) is int
    assert ProbabilityTree.from_bytes(model.to_bytes()).to_bytes() == model.to_bytes()


def test_pandas_missing_values_are_missing_when_learning_too() -> None:
    # prediction read pd.NA as missing, but learning refused it ("Got NAType"): a nullable
    # string or boolean column with a blank cell could not be learned at all
    frame = pd.DataFrame(
        {
            "s": pd.array(["u", None, "v"], dtype="string"),
            "b": pd.array([True, None, False], dtype="boolean"),
            "a": [1.0, 2.0, 3.0],
        }
    )
    batch = ProbabilityTree()
    batch.learn_many(frame, ["x", "y", "x"])
    one = ProbabilityTree()
    for row, y in zip(frame.to_dict("records"), ["x", "y", "x"], strict=True):
        one.learn_one(row, y)
    assert batch.to_bytes() == one.to_bytes()
    missing = ProbabilityTree()
    missing.learn_one({"s": pd.NA, "t": pd.NaT, "a": 1.0}, "x")
    assert missing.registry.names == ["a"]
