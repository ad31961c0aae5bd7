"""``max_bytes`` when classes, features or nominal values grow (not nodes): every slot's split
statistics grow with them, so an example that would take a tree past its budget even with its
growth stopped is refused (``InputError`` naming ``max_bytes``, the model unchanged), and one
that fits only without split statistics stops the tree's growth first."""

from __future__ import annotations

import random

import pytest

from streamtree import ProbabilityForest, ProbabilityTree
from streamtree.classifier import Classifier
from streamtree.exceptions import InputError
from streamtree.inspection import memory_bytes
from streamtree.state import capacities, nbytes
from tests.batches import learn_in_batches
from tests.test_budget import wide_stream

BUDGET = 2**20


def _trees(model: Classifier) -> list:
    states = [model.state] if isinstance(model, ProbabilityTree) else [m.state for m in model.members]  # type: ignore[attr-defined]
    return [t for s in states for t in (s.tree, s.background) if t is not None]


def _besides_nodes(t: object) -> int:
    """The bytes of a tree's arrays but its nodes' (what the refusal bounds: a node keeps a
    count per class, and nodes grown before new classes came are not refused)."""
    caps = capacities(t)  # type: ignore[arg-type]
    nb, lin = t.nb_seen.shape[0] > 0, t.mix_y.shape[0] > 0  # type: ignore[attr-defined]
    return memory_bytes(t) - (nbytes(caps, nb, lin) - nbytes((0, *caps[1:]), nb, lin))  # type: ignore[arg-type]


def _hostile(n: int) -> list[tuple[dict, int]]:
    """Each example a new class, new nominal features and a new value of each."""
    return [({f"f{j}": f"v{i}" for j in range(i % 40)} | {"a": float(i)}, i) for i in range(n)]


def _learn_one_or_refused(model: Classifier, x: dict, y: object) -> bool:
    before = model.to_bytes()  # type: ignore[attr-defined]
    try:
        model.learn_one(x, y)
    except InputError as exc:
        assert exc.field is None and "max_bytes=" in str(exc)
        assert "max_bytes=1,048,576" in str(exc) and "bytes besides its nodes' (" in str(exc)
        assert model.to_bytes() == before  # type: ignore[attr-defined]
        return False
    return True


@pytest.mark.parametrize("forest", [False, True])
def test_growing_classes_features_and_values_never_pass_the_budget(forest: bool) -> None:
    model: Classifier = (
        ProbabilityForest(n_trees=3, seed=1, tree={"max_bytes": BUDGET})
        if forest
        else ProbabilityTree(max_bytes=BUDGET)
    )
    learned = [_learn_one_or_refused(model, x, y) for x, y in _hostile(120)]
    assert 0 < sum(learned) < len(learned)  # some learned, the rest refused
    assert model.n_examples == sum(learned)  # type: ignore[attr-defined]
    for t in _trees(model):
        assert memory_bytes(t) <= BUDGET


def test_new_classes_alone_are_refused_past_the_budget() -> None:
    model = ProbabilityTree(max_bytes=BUDGET)
    with pytest.raises(InputError, match="a new class, with growth stopped"):
        for i in range(3000):
            model.learn_one({"a": i * 0.1, "b": 1.0}, i)
    assert 0 < model.n_examples < 3000 and len(model.classes_) == model.n_examples
    assert _learn_one_or_refused(model, {"a": 0.5}, "new") is False
    assert _besides_nodes(model.state.tree) <= BUDGET
    assert "with growth stopped" in _message(model, {"a": 1.0}, "yet another")


def _message(model: ProbabilityTree, x: dict, y: object) -> str:
    with pytest.raises(InputError, match="a new class") as info:
        model.learn_one(x, y)
    return str(info.value)


@pytest.mark.parametrize("forest", [False, True])
def test_a_batch_past_the_budget_is_refused_whole(forest: bool) -> None:
    model: Classifier = (
        ProbabilityForest(n_trees=2, tree={"max_bytes": BUDGET}) if forest else ProbabilityTree(max_bytes=BUDGET)
    )
    model.learn_many([{"c": "x"}, {"c": "y"}], [0, 1])
    before = model.to_bytes()  # type: ignore[attr-defined]
    data = _hostile(300)
    for X in ([x for x, _ in data], [{"c": "x"}] + [x for x, _ in data]):  # the second: numbers from row 2
        with pytest.raises(InputError, match="max_bytes=1,048,576") as info:
            model.learn_many(X, list(range(len(X))))
        assert info.value.field is None
        assert model.to_bytes() == before  # type: ignore[attr-defined]
    assert model.n_examples == 2  # type: ignore[attr-defined]


def test_a_tree_that_fits_only_without_split_statistics_stops_growing() -> None:
    """Wide nominal features make a tree's many slots the bulk of its arrays: more values
    would pass the budget with them, not without them, so growth stops, as for nodes."""
    data = wide_stream(1500)
    config = {"max_categories": None, "max_bytes": 2**19, "grace_period": 10}
    one = ProbabilityTree(**config)
    for x, y in data:
        one.learn_one(x, y)
    many = learn_in_batches(ProbabilityTree(**config), data, [500])
    for model in (one, many):
        assert model.summary()["growth_stop"] == "max_bytes"
        assert memory_bytes(model.state.tree) <= 2**19
    for sizes in ([37, 250], [1499, 1]):  # a batch stops where one at a time stops
        assert learn_in_batches(ProbabilityTree(**config), data, sizes).to_bytes() == one.to_bytes()


def test_the_default_budget_refuses_the_audits_two_gigabytes() -> None:
    """300 nominal features, one of 255 values, and classes: 2.16 GB unchecked under 256 MiB."""
    model = ProbabilityTree()
    model.learn_one({f"f{j}": "v" for j in range(300)}, 0)
    for v in range(255):
        model.learn_one({"f0": f"v{v}"}, 0)
    refused = sum(not _learn_one_or_refused_any(model, {"f0": "v"}, k) for k in range(300))
    assert refused > 0 and memory_bytes(model.state.tree) <= 2**28


def _learn_one_or_refused_any(model: ProbabilityTree, x: dict, y: object) -> bool:
    try:
        model.learn_one(x, y)
    except InputError as exc:
        assert exc.field is None and "max_bytes=" in str(exc)
        return False
    return True


def test_what_one_at_a_time_accepts_any_batches_accept_and_what_it_refuses_they_refuse() -> None:
    """The refusal depends on the sizes alone, not on the nodes grown before: a service's log
    (what it accepted, in the batches of its requests) is accepted again whatever batches its
    replay cuts it into, and a batch is refused exactly when one at a time would refuse a row."""
    rng = random.Random(0)
    X = [{"a": rng.random(), "b": rng.random()} for _ in range(3300)]
    y: list[object] = [int(x["a"] * 8) % 2 for x in X[:3000]] + [f"c{i}" for i in range(300)]
    config = {"max_bytes": 2_200_000, "grace_period": 10, "drift_delta": None}
    one = ProbabilityTree(**config)
    with pytest.raises(InputError, match="max_bytes"):
        for x, label in zip(X, y):
            one.learn_one(x, label)
    accepted = one.n_examples
    assert 3000 < accepted < 3300  # one at a time: the rows before the refused one stay learned
    many = ProbabilityTree(**config)
    before = many.to_bytes()
    with pytest.raises(InputError, match="a new class"):
        many.learn_many(X, y)
    assert many.to_bytes() == before and many.n_examples == 0
    data = list(zip(X[:accepted], y[:accepted]))
    for sizes in ([accepted], [1000], [7, 300, 2048], [2999, 5]):
        assert learn_in_batches(ProbabilityTree(**config), data, sizes).to_bytes() == one.to_bytes()


@pytest.mark.parametrize("max_bytes", [None, 2**19])
def test_a_batch_in_parts_predicts_as_one_at_a_time(max_bytes: int | None) -> None:
    data = wide_stream(600)
    config = {"max_categories": None, "max_bytes": max_bytes, "grace_period": 10}
    one = ProbabilityTree(**config)
    expected = []
    for x, label in data:
        expected.append(one.predict_proba_one(x))
        one.learn_one(x, label)
    many = ProbabilityTree(**config)
    proba = many.learn_many([x for x, _ in data], [label for _, label in data], return_proba=True)
    assert many.to_bytes() == one.to_bytes()
    for row, p in zip(proba, expected):
        assert [row[many.classes_.index(c)] for c in p] == list(p.values())
        assert row.sum() == pytest.approx(1.0 if p else 0.0)
