"""A tree's state (:class:`~streamtree.tree_state.TreeState`) works through its public surface
alone: it learns what a model learns from the same encoded rows, and persistence writes and
reads it bit for bit without the estimator class."""

from __future__ import annotations

import ast
import copy
import threading
from pathlib import Path

import numpy as np
import pytest

import streamtree
from streamtree import ProbabilityTree
from streamtree.encoding import encode_batch, encode_for_prediction
from streamtree.features import FeatureRegistry
from streamtree.persistence import capture, dump, read, restore
from streamtree.state import M_NODES, TreeArrays
from streamtree.tree import class_ids
from streamtree.tree_state import TreeState, registry_shapes

FIXTURES = Path(__file__).parent / "fixtures"


def _rows(n: int, seed: int = 0, flip: int | None = None) -> tuple[list[dict], list[str]]:
    """A numeric and a nominal feature; the concept flips at row ``flip``."""
    rng = np.random.default_rng(seed)
    rows, labels = [], []
    for i in range(n):
        a, b = float(rng.normal()), "uvw"[int(rng.integers(3))]
        y = (a > 0.3) != (b == "u")
        if flip is not None and i >= flip:
            y = not y
        if rng.random() < 0.05:
            y = not y
        rows.append({"a": a, "b": b})
        labels.append("yes" if y else "no")
    return rows, labels


def _same(a: TreeArrays, b: TreeArrays) -> bool:
    return all(np.array_equal(x, y, equal_nan=True) for x, y in zip(a, b, strict=True))


def test_a_model_composes_a_state_that_owns_its_arrays() -> None:
    model = ProbabilityTree(grace_period=10)
    first = model.state.tree
    model.learn_many(*_rows(400))
    state = model.state
    assert isinstance(state, TreeState) and state.tree is not first  # grown: new arrays
    assert model.n_nodes == int(state.tree.meta[M_NODES]) > 1
    assert set(state.handles) <= {id(state.tree), id(state.background), id(state.drift)}
    assert state.config == model.get_config()


def test_a_state_alone_learns_and_predicts_what_a_model_does() -> None:
    rows, labels = _rows(600, flip=300)
    model = ProbabilityTree(grace_period=10, refit_every=50)
    model.learn_many(rows[:250], labels[:250])
    for x, y in zip(rows[250:], labels[250:], strict=True):
        model.learn_one(x, y)

    state = TreeState(model.get_config())
    registry = FeatureRegistry((), model.max_features, model.max_categories)
    classes: list = []
    index: dict = {}
    seen = 0
    for lo, hi in ((0, 250), *((i, i + 1) for i in range(250, 600))):  # the model's batches
        registry, num, nom, first_values = encode_batch(registry, rows[lo:hi])
        ks = class_ids(classes, index, labels[lo:hi])
        state.make_room(registry, first_values, registry_shapes(registry, len(classes)))
        state.learn(num, nom, ks, np.ones(hi - lo, dtype=np.int64), seen, want_proba=False, at_entry=False)
        seen += hi - lo
    assert _same(state.tree, model.state.tree)
    assert (state.background is None) == (model.state.background is None)
    assert state.drift is not None and model.state.drift is not None and _same(state.drift, model.state.drift)  # type: ignore[arg-type]
    num, nom = encode_for_prediction(registry, rows[:50])
    served = state.predict(num, nom, at_entry=False)[:, : len(classes)]
    assert served.tolist() == model.predict_proba(rows[:50]).tolist()


def test_a_copied_state_leaves_its_handles_and_learns_the_same() -> None:
    model = ProbabilityTree(grace_period=10)
    model.learn_many(*_rows(300))
    twin = copy.deepcopy(model)
    assert twin.state.handles == {} and twin.state is not model.state
    rows, labels = _rows(200, seed=1)
    model.learn_many(rows, labels)
    twin.learn_many(rows, labels)
    assert twin.to_bytes() == model.to_bytes()


@pytest.mark.parametrize("fixture", ["v3_adwin10", "v2_hgs_drift_nb"])
def test_persistence_round_trips_a_state_bit_for_bit(fixture: str) -> None:
    model = ProbabilityTree.from_bytes((FIXTURES / f"{fixture}.streamtree").read_bytes())
    rows, labels = _rows(300, seed=2)
    model.learn_many([{"new_a": x["a"], "new_b": x["b"]} for x in rows], labels)  # new features and classes
    data = model.to_bytes()
    assert dump(model.state, model.header()) == data

    saved = read(data)  # from here on, only states and headers
    state = TreeState(saved.config)  # saved from get_config(): complete
    header = restore(saved, state)
    assert header.config == model.get_config() and header.classes == model.classes_
    assert header.n_examples == model.n_examples and header.registry.to_state() == model.registry.to_state()
    assert state.capacities() == model.state.capacities()
    ours, theirs = state.to_arrays(), model.state.to_arrays()
    assert list(ours) == list(theirs)
    assert all(np.array_equal(ours[k], theirs[k], equal_nan=True) for k in ours)
    assert (state.background is None) == (model.state.background is None)
    assert dump(state, header) == data


def test_a_capture_of_a_state_encodes_later_what_it_held() -> None:
    model = ProbabilityTree(grace_period=10)
    model.learn_many(*_rows(300))
    before = model.to_bytes()
    taken = capture(model.state, model.header())
    model.learn_many(*_rows(300, seed=3))  # the state's arrays change and grow
    out: list[bytes] = []
    worker = threading.Thread(target=lambda: out.append(taken.to_bytes()))
    worker.start()
    worker.join()
    assert out == [before] and model.to_bytes() != before


def test_persistence_imports_no_estimator() -> None:
    source = Path(streamtree.__file__).parent / "persistence.py"
    imported = set()
    for node in ast.walk(ast.parse(source.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module)
        elif isinstance(node, ast.Import):
            imported.update(a.name for a in node.names)
    assert not imported & {"streamtree.tree", "streamtree.forest", "streamtree.estimators", "streamtree"}
