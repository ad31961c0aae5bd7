"""``max_categories``: a nominal feature keeps its first values apart and the rest share
*other*, the same codes whatever the batch boundaries; it is saved, reported, and a model saved
before the bound existed learns on as it did."""

from __future__ import annotations

import json
import random
import struct

import numpy as np
import pandas as pd
import pytest

from streamtree import ProbabilityForest, ProbabilityTree
from streamtree.features import FeatureRegistry
from streamtree.persistence import MAGIC
from tests.batches import learn_in_batches


def id_stream(n: int, seed: int = 1, start: int = 0) -> list[tuple[dict, bool]]:
    """Issue 32's stream: an id-like feature (a new value every event) beside an amount and a
    channel that the label depends on."""
    rng = random.Random(seed)
    out = []
    for i in range(start, start + n):
        amount, channel = rng.random(), rng.choice("abc")
        y = rng.random() < (0.85 if (amount > 0.6) != (channel == "b") else 0.15)
        out.append(({"order_id": f"order-{i}", "amount": amount, "channel": channel}, y))
    return out


def test_values_past_the_bound_share_the_other_code() -> None:
    reg = FeatureRegistry(max_categories=3)
    codes = [reg.encode({"city": c}, learn=True).nom_codes[0] for c in ["b", "a", "b", "c", "d", "e", "a", "d"]]
    assert codes == [0, 1, 0, 2, 3, 3, 1, 3]
    assert reg.values[0] == ["b", "a", "c"]  # values past the bound are not kept
    assert reg.other == [3] and reg.overflow() == {"city": 3}
    assert reg.max_values == 4
    # unseen values at prediction: the other code, now that the feature has one
    assert reg.encode({"city": "zzz"}, learn=False).nom_codes == [3]
    assert reg.value_of(1, 0, "zzz") == 3


def test_below_the_bound_an_unseen_value_is_still_minus_one() -> None:
    reg = FeatureRegistry(max_categories=3)
    for c in ["a", "b", "c"]:  # full, but nothing went past it yet
        reg.encode({"city": c}, learn=True)
    assert reg.encode({"city": "zzz"}, learn=False).nom_codes == [-1]
    assert reg.max_values == 3 and reg.overflow() == {}


def test_a_batch_registers_the_codes_and_counts_of_the_same_rows_one_at_a_time() -> None:
    data = id_stream(700)
    one = ProbabilityTree(max_categories=40, grace_period=20)
    for x, y in data:
        one.learn_one(x, y)
    assert one.registry.overflow() == {"order_id": 660}
    expected = one.to_bytes()
    for sizes in ([500], [37], [1, 250, 3], [700]):
        many = learn_in_batches(ProbabilityTree(max_categories=40, grace_period=20), data, sizes)
        assert many.to_bytes() == expected, sizes
    frame = ProbabilityTree(max_categories=40, grace_period=20)
    for i in range(0, len(data), 128):
        rows = data[i : i + 128]
        frame.learn_many(pd.DataFrame([x for x, _ in rows]), [y for _, y in rows])
    assert frame.to_bytes() == expected


def test_a_forest_bounds_its_shared_registry_alike() -> None:
    data = id_stream(600)
    one = ProbabilityForest(n_trees=3, seed=2, tree={"max_categories": 25})
    for x, y in data:
        one.learn_one(x, y)
    many = learn_in_batches(ProbabilityForest(n_trees=3, seed=2, tree={"max_categories": 25}), data, [500, 7])
    assert many.to_bytes() == one.to_bytes()
    assert all(m.registry is one.registry for m in one.members)
    summary = one.summary()
    assert summary["other_values"] == {"order_id": 575}
    assert any("'order_id'" in line and "575" in line for line in summary["notes"])


def test_a_stream_within_the_bound_gives_the_model_it_gave_without_one() -> None:
    rng = random.Random(4)
    data = [({"cat": f"c{rng.randrange(255)}", "z": rng.random()}, rng.random() < 0.3) for _ in range(3000)]
    bounded, unbounded = ProbabilityTree(), ProbabilityTree(max_categories=None)
    for model in (bounded, unbounded):
        learn_in_batches(model, data, [300])
    assert bounded.registry.max_values == 255 and bounded.registry.overflow() == {}
    for a, b in zip(bounded.state.tree, unbounded.state.tree):
        assert np.array_equal(a, b)
    probe = [{"cat": "never", "z": 0.5}, {"cat": "c3", "z": 0.1}]
    assert np.array_equal(bounded.predict_proba(probe), unbounded.predict_proba(probe))


def test_an_unseen_value_goes_where_other_goes() -> None:
    """Label 1 for every value past the first two: the bounded tree learns that *other* means 1
    and reads a value it never saw as *other*; without the bound that value is missing."""
    rng = random.Random(5)
    data = [({"c": "a", "z": 0.5}, 0), ({"c": "b", "z": 0.5}, 0)]  # the first two values
    for i in range(3000):
        known = rng.random() < 0.5
        data.append(({"c": rng.choice("ab") if known else f"v{i}", "z": rng.random()}, int(not known)))
    bounded = learn_in_batches(ProbabilityTree(max_categories=2, linear=False), data, [200])
    unbounded = learn_in_batches(ProbabilityTree(max_categories=None, linear=False), data, [200])
    assert bounded.predict_proba_one({"c": "never", "z": 0.5})[1] > 0.95
    assert bounded.predict_proba_one({"c": "a", "z": 0.5})[1] < 0.05
    assert unbounded.predict_proba_one({"c": "never", "z": 0.5})[1] < 0.9
    assert bounded.tree_["split"][0] == {"feature": "c", "operator": "==", "value": None, "other": True}


def test_round_trip_keeps_the_other_code_and_learns_on_alike() -> None:
    data = id_stream(900)
    model = learn_in_batches(ProbabilityTree(max_categories=30), data[:600], [100])
    again = ProbabilityTree.from_bytes(model.to_bytes())
    assert again.to_bytes() == model.to_bytes()
    assert again.registry.other == model.registry.other and again.registry.unseen == model.registry.unseen
    probe = [x for x, _ in data[600:650]]
    assert np.array_equal(again.predict_proba(probe), model.predict_proba(probe))
    for m in (model, again):
        learn_in_batches(m, data[600:], [75])
    assert again.to_bytes() == model.to_bytes()


def _without(data: bytes, *names: str) -> bytes:
    """A saved model as a streamtree without these parameters wrote it."""
    (size,) = struct.unpack(">I", data[len(MAGIC) : len(MAGIC) + 4])
    header = json.loads(data[len(MAGIC) + 4 : len(MAGIC) + 4 + size])
    for name in names:
        del header["config"][name]
    head = json.dumps(header).encode()
    return MAGIC + struct.pack(">I", len(head)) + head + data[len(MAGIC) + 4 + size :]


def test_a_model_saved_before_the_bound_keeps_a_code_for_every_value() -> None:
    data = id_stream(1200)
    old_kind = ProbabilityTree(max_categories=None, max_bytes=None)
    learn_in_batches(old_kind, data[:600], [200])
    assert old_kind.registry.max_values == 600
    old = ProbabilityTree.from_bytes(_without(old_kind.to_bytes(), "max_categories", "max_bytes"))
    assert old.max_categories is None and old.max_bytes is None
    for m in (old, old_kind):
        learn_in_batches(m, data[600:], [200])
    assert old.registry.max_values == 1200 and old.registry.overflow() == {}
    assert old.to_bytes() == old_kind.to_bytes()
    # the same file read as today's default would have bounded it: the test can tell them apart
    assert ProbabilityTree(**{**old.get_config(), "max_categories": 255}).max_categories == 255


def test_version_2_files_load_without_a_bound() -> None:
    from pathlib import Path

    data = (Path(__file__).parent / "fixtures" / "v2_laplace.streamtree").read_bytes()
    model = ProbabilityTree.from_bytes(data)
    assert model.max_categories is None and model.max_bytes is None


def test_summary_says_which_feature_went_to_other() -> None:
    model = learn_in_batches(ProbabilityTree(max_categories=10), id_stream(300), [100])
    summary = model.summary()
    assert summary["other_values"] == {"order_id": 290} and summary["max_categories"] == 10
    assert summary["notes"] == [
        "Feature 'order_id' has more than max_categories=10 values: 290 examples' values "
        "beyond its first 10 share its 'other' code."
    ]
    json.dumps(summary)
    plain = learn_in_batches(ProbabilityTree(), id_stream(100), [100])
    assert plain.summary()["other_values"] == {} and plain.summary()["notes"] == []


def test_the_registry_state_is_what_it_was_without_a_bound_hit() -> None:
    reg = FeatureRegistry(max_categories=5)
    reg.encode({"a": "x", "b": 1.0}, learn=True)
    assert set(reg.to_state()) == {"nominal_features", "names", "kinds", "values"}
    for i in range(8):
        reg.encode({"a": f"v{i}"}, learn=True)
    state = reg.to_state()
    assert state["other"] == [4] and len(state["values"][0]) == 5
    back = FeatureRegistry.from_state(json.loads(json.dumps(state)), None, 5)
    assert back.other == [4] and back.unseen == [5] and back.max_values == 6
    assert back.encode({"a": "new"}, learn=True).nom_codes == [5] and back.other == [5]


@pytest.mark.parametrize("bound", [1, 2])
def test_tiny_bounds_work(bound: int) -> None:
    data = id_stream(400)
    model = learn_in_batches(ProbabilityTree(max_categories=bound), data, [50])
    assert model.registry.max_values == bound + 1
    assert model.registry.overflow()["order_id"] == 400 - bound
    assert model.predict_proba([x for x, _ in data[:5]]).shape == (5, 2)


def test_snapshot_stays_small_with_an_id_feature() -> None:
    """Issue 32: the snapshot grew with (leaves x values), 2.1 MB at 1,000 events and 656 MB at
    20,000. With the bound and a bounded tree it stops growing once the tree does."""
    model = ProbabilityTree(max_nodes=100)
    sizes = {}
    data = id_stream(16_000)
    for i in range(0, len(data), 500):
        rows = data[i : i + 500]
        model.learn_many([x for x, _ in rows], [y for _, y in rows])
        if i + 500 in (4_000, 16_000):
            sizes[i + 500] = len(model.to_bytes())
    assert model.growth_stopped
    assert sizes[16_000] <= 1.1 * sizes[4_000], sizes


def test_the_saved_registry_keeps_at_most_the_bound() -> None:
    data = learn_in_batches(ProbabilityTree(), id_stream(2000), [500]).to_bytes()
    (size,) = struct.unpack(">I", data[len(MAGIC) : len(MAGIC) + 4])
    registry = json.loads(data[len(MAGIC) + 4 : len(MAGIC) + 4 + size])["registry"]
    col = [n for n, k in zip(registry["names"], registry["kinds"]) if k == 1].index("order_id")
    assert len(registry["values"][col]) == 255 and registry["other"][col] == 1745
