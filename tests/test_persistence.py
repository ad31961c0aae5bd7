"""The safe format: version 3 round trips exactly; version 1 and 2 files (written by the code
before the compiled core, committed under tests/fixtures) load and go on learning."""

from __future__ import annotations

import io
import itertools
import json
import math
import struct
from pathlib import Path

import numpy as np
import pytest
from river import datasets

import streamtree
from streamtree import FormatError, ProbabilityForest, ProbabilityTree
from streamtree.persistence import FORMAT_VERSION, MAGIC
from tests.test_drift import noisier_stream

FIXTURES = Path(__file__).parent / "fixtures"
SAVED = json.loads((FIXTURES / "v2_predictions.json").read_text())
NAMES = sorted(SAVED["models"])


def _stagger(n: int, function: int, seed: int) -> list[tuple[dict, bool]]:
    stream = datasets.synth.STAGGER(classification_function=function, seed=seed)
    return [(x, y) for x, y in zip(range(n), stream) for x, y in [y]]


def _rewrite(data: bytes, edit_header, keep) -> bytes:  # type: ignore[no-untyped-def]
    (size,) = struct.unpack(">I", data[len(MAGIC) : len(MAGIC) + 4])
    header = json.loads(data[len(MAGIC) + 4 : len(MAGIC) + 4 + size])
    edit_header(header)
    with np.load(io.BytesIO(data[len(MAGIC) + 4 + size :])) as archive:
        arrays = {k: archive[k] for k in archive.files if keep(k)}
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    head = json.dumps(header).encode()
    return MAGIC + struct.pack(">I", len(head)) + head + buffer.getvalue()


@pytest.mark.parametrize("name", NAMES)
def test_version_2_files_predict_what_they_predicted_and_keep_learning(name: str) -> None:
    saved = SAVED["models"][name]
    model = ProbabilityTree.from_bytes((FIXTURES / f"v2_{name}.streamtree").read_bytes())
    assert model.summary()["n_nodes"] == saved["summary_n_nodes"]
    assert model.n_examples == saved["n_learned"]
    for x, expected in zip(SAVED["probe"], saved["proba"]):
        got = {str(label): p for label, p in model.predict_proba_one(x).items()}  # JSON keys are text
        assert set(got) == set(expected)
        assert [got[k] for k in expected] == pytest.approx(list(expected.values()), rel=1e-9, abs=1e-12)
    # it goes on learning, and a version-3 round trip of the converted model is exact
    for x, y in _stagger(600, function=1, seed=9):
        model.learn_one(x, y)
    again = ProbabilityTree.from_bytes(model.to_bytes())
    assert again.to_bytes() == model.to_bytes()


def test_a_version_2_background_tree_is_still_compared_and_adopted() -> None:
    model = ProbabilityTree.from_bytes((FIXTURES / "v2_hgs_drift_nb.streamtree").read_bytes())
    drift = model.drift_summary()
    assert drift["background"] is not None and drift["background"]["n_examples"] == 7
    assert drift["events"] == [{"event": "detection", "at": 3040}]
    for x, y in _stagger(100, function=2, seed=4):  # the concept the background tree learns
        model.learn_one(x, y)
    assert model.drift_summary()["n_swaps"] == 1


def test_a_version_3_file_saved_before_detected_at_loads_and_goes_on() -> None:
    """``v3_adwin10``: written by commit 30dab71 (``adwin_s`` of 10 scalars, before
    ``A_DETECTED_AT``) after ``ProbabilityTree()`` learned the first 3,150 examples of
    ``tests.test_drift.noisier_stream(seed=1)``: a change detected at 3,104, a background tree
    compared since. The scalar loads as 0 (no detection on record), so the detector's next cut
    is reported as that code reported it: the rest of the stream gives the summary it gave."""
    saved = json.loads((FIXTURES / "v3_adwin10.json").read_text())
    data = (FIXTURES / "v3_adwin10.streamtree").read_bytes()
    (size,) = struct.unpack(">I", data[len(MAGIC) : len(MAGIC) + 4])
    with np.load(io.BytesIO(data[len(MAGIC) + 4 + size :])) as archive:
        old_scalars = archive["drift.adwin_s"]
    assert old_scalars.shape == (10,)
    model = ProbabilityTree.from_bytes(data)
    assert model.n_examples == saved["learned"]
    assert model.state.drift is not None
    assert model.state.drift.adwin_s.tolist() == [*old_scalars.tolist(), 0.0]
    assert model.drift_summary()["background"]["n_examples"] == 46
    for x, expected in zip(saved["probe"], saved["proba"]):
        assert {str(label): p for label, p in model.predict_proba_one(x).items()} == expected
    again = ProbabilityTree.from_bytes(model.to_bytes())
    assert again.to_bytes() == model.to_bytes()
    for x, y in noisier_stream(seed=1)[saved["learned"] :]:
        model.learn_one(x, y)
    assert model.drift_summary() == saved["drift_summary_after_the_rest"]


def test_version_1_files_load_with_an_empty_drift_history() -> None:
    """Version 1 had no drift state and no naive-Bayes factor."""
    v2 = (FIXTURES / "v2_laplace.streamtree").read_bytes()

    def edit(header: dict) -> None:
        header["version"] = 1
        del header["drift"], header["naive_bayes"]
        header["config"]["drift_delta"] = 0.002

    v1 = _rewrite(v2, edit, keep=lambda k: not k.startswith("drift."))
    old = ProbabilityTree.from_bytes(v1)
    assert old.drift_summary()["n_detections"] == 0 and old.drift_summary()["detection"]
    probe = SAVED["probe"][0]
    assert old.predict_proba_one(probe) == ProbabilityTree.from_bytes(v2).predict_proba_one(probe)


def test_drift_arrays_of_another_dtype_load_as_the_kernels_need_and_other_shapes_are_refused() -> None:
    """The kernels take a detector's arrays as one compiled handle of fixed types: a file whose
    drift arrays were written as other numbers (here int32 and float32) loads into float64 and
    int64 arrays and learns on; an array of the wrong dimensions is a corrupt file."""
    model = ProbabilityTree()
    for x, y in _stagger(300, function=1, seed=2):
        model.learn_one(x, y)
    data = model.to_bytes()

    def retyped(k: str, a: np.ndarray) -> np.ndarray:
        if k == "drift.adwin_n":
            return a.astype(np.int32)
        return a.astype(np.float32) if k == "drift.drift_s" else a

    (size,) = struct.unpack(">I", data[len(MAGIC) : len(MAGIC) + 4])
    head = data[: len(MAGIC) + 4 + size]
    with np.load(io.BytesIO(data[len(MAGIC) + 4 + size :])) as archive:
        arrays = {k: retyped(k, archive[k]) for k in archive.files}
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    loaded = ProbabilityTree.from_bytes(head + buffer.getvalue())
    assert loaded.state.drift is not None and loaded.state.drift.adwin_n.dtype == np.int64
    for x, y in _stagger(300, function=2, seed=3):
        loaded.learn_one(x, y)
        model.learn_one(x, y)
    assert loaded.to_bytes() == model.to_bytes()
    arrays["drift.adwin_n"] = arrays["drift.adwin_n"].reshape(-1, 1)
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    with pytest.raises(FormatError, match="adwin_n"):
        ProbabilityTree.from_bytes(head + buffer.getvalue())


def test_bad_bytes_and_newer_versions_are_refused() -> None:
    model = ProbabilityTree()
    model.learn_one({"a": 1.0}, "x")
    data = model.to_bytes()
    with pytest.raises(FormatError, match="magic"):
        ProbabilityTree.from_bytes(b"not a model")
    with pytest.raises(FormatError, match="Corrupt"):
        ProbabilityTree.from_bytes(data[:40])
    newer = data.replace(f'"version": {FORMAT_VERSION}'.encode(), b'"version": 9', 1)
    with pytest.raises(FormatError, match="version 9"):
        ProbabilityTree.from_bytes(newer)
    missing = _rewrite(data, lambda header: None, keep=lambda k: k != "tree.counts")
    with pytest.raises(FormatError, match="Corrupt"):
        ProbabilityTree.from_bytes(missing)


def _weights_kept(model: ProbabilityTree) -> bool:
    """Whether every tree's kept HGS weights are exp of its log-weights, bit for bit (what a
    prediction reads instead of computing them; ``streamtree.state``)."""
    from streamtree.state import ALPHA, THETA

    trees = [t for t in (model.state.tree, model.state.background) if t is not None]
    return all(t.hgs[:, ALPHA].tolist() == [math.exp(v) for v in t.hgs[:, THETA]] for t in trees)


@pytest.mark.parametrize("fixture", ["v2_hgs_drift_nb", "v3_adwin10"])
def test_loaded_files_and_round_trips_keep_the_weights_of_their_log_weights(fixture: str) -> None:
    model = ProbabilityTree.from_bytes((FIXTURES / f"{fixture}.streamtree").read_bytes())
    assert model.state.background is not None and model.n_nodes > 3 and _weights_kept(model)
    for x, y in _stagger(700, function=2, seed=5):  # refits, splits, growth and a swap
        model.learn_one(x, y)
    assert model.summary()["hgs"]["n_refits"] > 0
    assert _weights_kept(model)
    again = ProbabilityTree.from_bytes(model.to_bytes())
    assert _weights_kept(again)
    assert again.to_bytes() == model.to_bytes()


def test_a_file_written_before_tau_scale_keeps_its_absolute_tie_threshold() -> None:
    """A model saved before ``tau_scale`` existed broke ties on ``eps < tau`` (absolute): it
    loads with ``tau_scale="absolute"``, not today's default, and learns on as it would have."""
    from river.datasets import synth

    data = list(itertools.islice(synth.RandomRBF(seed_model=3, seed_sample=3, n_classes=5), 1500))
    model = ProbabilityTree(tau_scale="absolute")
    for x, y in data[:500]:
        model.learn_one(x, y)

    saved = model.to_bytes()

    def edit(header: dict) -> None:
        del header["config"]["tau_scale"]

    old = ProbabilityTree.from_bytes(_rewrite(saved, edit, keep=lambda k: True))
    assert old.tau_scale == "absolute"
    # the default rule, from the same file, grows another tree: the test can tell them apart
    ranged = ProbabilityTree.from_bytes(
        _rewrite(saved, lambda h: h["config"].update(tau_scale="range"), keep=lambda k: True)
    )
    for x, y in data[500:]:
        model.learn_one(x, y)
        old.learn_one(x, y)
        ranged.learn_one(x, y)
    assert old.to_bytes() == model.to_bytes()
    assert ranged.n_nodes != model.n_nodes


@pytest.mark.parametrize("kind", ["tree", "forest"])
def test_a_capture_encodes_the_model_as_it_was_when_taken(kind: str) -> None:
    """``capture()`` copies: encoded after the model learned on (as the service does in a
    thread), it gives the bytes ``to_bytes()`` gave at the capture, not the model's new ones."""
    from streamtree import ProbabilityForest

    rows = _stagger(3_000, 1, 3)
    model = (
        ProbabilityTree(grace_period=20) if kind == "tree" else ProbabilityForest(n_trees=3, tree={"grace_period": 20})
    )
    for x, y in rows[:1_500]:
        model.learn_one(x, y)
    then = model.to_bytes()
    captured = model.capture()
    for x, y in rows[1_500:]:
        model.learn_one(x, y)
    assert model.to_bytes() != then
    assert captured.to_bytes() == then


def test_a_config_of_numpy_scalars_saves_as_plain_values() -> None:
    # values from a numpy sweep (np.int64, np.float32) were kept as given: the model could
    # never be saved ("feature names, values and labels must be JSON data")
    tree = ProbabilityTree(grace_period=np.int64(20), delta=np.float32(0.25))
    forest = ProbabilityForest(
        n_trees=np.int64(2), seed=np.int64(5), tree={"max_depth": np.int64(6)}, variants=[{"m": np.float64(2.0)}, {}]
    )
    for model in (tree, forest):
        model.learn_one({"a": 1.0}, "p")
        data = model.to_bytes()
        again = streamtree.load(data)
        assert again.to_bytes() == data and again.get_config() == model.get_config()
    assert type(tree.get_config()["grace_period"]) is int and tree.get_config()["delta"] == 0.25
    assert forest.get_config()["tree"]["max_depth"] == 6 and forest.get_config()["variants"][0] == {"m": 2.0}


def test_equal_forests_write_the_same_bytes_whatever_the_order_of_a_variants_keys() -> None:
    made = [
        ProbabilityForest(n_trees=2, seed=4, variants=[{"tau": 0.3, "grace_period": 7}]),
        ProbabilityForest(n_trees=2, seed=4, variants=[{"grace_period": 7, "tau": 0.3}]),
    ]
    for forest in made:
        forest.learn_many([{"a": float(i % 5)} for i in range(60)], ["pq"[i % 2] for i in range(60)])
    assert made[0].get_config() == made[1].get_config() and made[0].to_bytes() == made[1].to_bytes()


def test_a_forest_saved_before_the_member_parameters_added_since_loads_and_goes_on() -> None:
    """``forest_38a5347``: three BT+ members written by commit 38a5347, before
    ``max_categories``, ``max_bytes`` and ``repeats_as_seen``; its members read with the values
    that rebuild them (``ADDED``), so the forest's config is theirs, and each predicts what it did.
    It was refused as corrupt once the members' configs were checked against the forest's."""
    saved = json.loads((FIXTURES / "forest_38a5347.json").read_text())
    forest = ProbabilityForest.from_bytes((FIXTURES / "forest_38a5347.streamtree").read_bytes())
    tree = forest.get_config()["tree"]
    assert (tree["max_categories"], tree["max_bytes"], tree["repeats_as_seen"]) == (None, None, True)
    assert all(m.get_config()["max_bytes"] is None for m in forest.members) and forest.n_examples == 300
    # each member predicts what it did (the forest weighs them by a rule changed since)
    for member, expected_rows in zip(forest.members, saved["member_proba"]):
        assert [member.predict_proba_one(x) for x in saved["probe"]] == expected_rows
    for x in saved["probe"]:
        assert sum(forest.predict_proba_one(x).values()) == pytest.approx(1.0)
    for i in range(200):
        forest.learn_one({"a": (i % 7) - 3.0, "c": f"v{i % 5}"}, "yes" if i % 7 > 3 else "no")
    assert ProbabilityForest.from_bytes(forest.to_bytes()).to_bytes() == forest.to_bytes()
