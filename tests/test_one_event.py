"""The per-event path: ``learn_one(x, y)`` right after ``predict_proba_one(x)`` reuses the row
the prediction encoded only when it cannot differ from encoding ``x`` again, so a model learns
the same bits whatever the caller does to ``x`` in between."""

from __future__ import annotations

import copy
import pickle
from typing import Any

import numpy as np
import pytest

from streamtree import ProbabilityForest, ProbabilityTree
from streamtree.encoding import encode_one
from streamtree.exceptions import InputError

MODELS = [lambda: ProbabilityTree(grace_period=10), lambda: ProbabilityForest(n_trees=3, tree={"grace_period": 10})]


def stream(n: int, seed: int = 0) -> list[tuple[dict[str, Any], str]]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        a, b = rng.normal(size=2)
        x = {"a": float(a), "b": float(b), "c": str(rng.choice(["u", "v", "w"])), "flag": bool(a > 1)}
        out.append((x, "yes" if a + b > 0 else "no"))
    return out


def same(m1: Any, m2: Any) -> bool:
    return m1.to_bytes() == m2.to_bytes()


@pytest.mark.parametrize("make", MODELS)
def test_a_dict_changed_between_prediction_and_learning_is_learned_as_it_is_then(make: Any) -> None:
    events = stream(300)
    ours, reference = make(), make()
    for i, (x, y) in enumerate(events):
        x = dict(x)
        ours.predict_proba_one(x)
        if i % 3 == 0:
            x["a"] = x["a"] + 1.0  # a value replaced
        elif i % 3 == 1:
            x["c"] = True  # another type: a nominal value that was a str
        else:
            del x["b"]  # a feature removed (the keys change, their number too)
            x["d"] = 1  # ... and a new one registered by this very event
        ours.learn_one(x, y)
        reference.learn_one(x, y)
    assert same(ours, reference)


@pytest.mark.parametrize("make", MODELS)
def test_an_equal_value_of_another_type_is_encoded_again(make: Any) -> None:
    ours, reference = make(), make()
    for x, y in stream(200):
        ours.learn_one(x, y)
        reference.learn_one(x, y)
    x = {"a": 1.0, "b": 0.5, "c": "u", "flag": True}
    ours.predict_proba_one(x)
    x["flag"] = 1  # 1 == True to ==, but not a nominal's value: refused, as without the prediction
    with pytest.raises(InputError, match="'flag' is nominal"):
        ours.learn_one(x, "yes")
    with pytest.raises(InputError, match="'flag' is nominal"):
        reference.learn_one(dict(x), "yes")
    assert same(ours, reference)


@pytest.mark.parametrize("make", MODELS)
def test_learning_other_events_in_between_registers_columns_the_kept_row_lacks(make: Any) -> None:
    ours, reference = make(), make()
    for x, y in stream(100):
        ours.learn_one(x, y)
        reference.learn_one(x, y)
    x = {"a": 0.3, "b": -0.2, "c": "v"}
    ours.predict_proba_one(x)
    ours.learn_one({"a": 0.1, "e": 2.5, "f": "new"}, "no")  # two new columns
    reference.learn_one({"a": 0.1, "e": 2.5, "f": "new"}, "no")
    ours.learn_one(x, "yes")  # x's kept row is one numeric and one nominal column short
    reference.learn_one(x, "yes")
    assert same(ours, reference)
    assert ours.predict_proba_one(x) == reference.predict_proba_one(x)


@pytest.mark.parametrize("make", MODELS)
def test_copies_and_pickles_keep_no_reference_to_the_callers_dict(make: Any) -> None:
    model = make()
    for x, y in stream(50):
        model.predict_proba_one(x)
        model.learn_one(x, y)
    x = {"a": 0.0, "b": 0.0, "c": "u"}
    model.predict_proba_one(x)
    for clone in (copy.deepcopy(model), pickle.loads(pickle.dumps(model))):
        assert "_last_row" not in vars(clone)
        assert clone.predict_proba_one(x) == model.predict_proba_one(x)


def test_the_prediction_encodes_as_encode_one_whenever_encode_known_applies() -> None:
    model = ProbabilityTree()
    for x, y in stream(100):
        model.learn_one(x, y)
    reg = model.registry
    for x in [{"a": 1.0, "b": float("nan"), "c": "w"}, {"a": 2, "c": "u"}, {"b": None, "a": -0.0}, {}]:
        known = reg.encode_known(x)
        assert known is not None
        values, codes = encode_one(reg, x)
        assert np.array(known[0]).tobytes() == np.array(values).tobytes() and known[1] == codes
