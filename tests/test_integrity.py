"""A saved tree whose arrays were edited is refused as corrupt before any kernel reads them
(the kernels check no bounds: a bad child index, slot or size crashed the interpreter)."""

from __future__ import annotations

import io
import json
import random
import struct
import subprocess
import sys
from typing import Any

import numpy as np
import pytest

from streamtree import FormatError, ProbabilityForest, ProbabilityTree, load
from streamtree.persistence import MAGIC
from streamtree.state import COL, DEPTH, KIND, LEFT, M_CLASSES, M_FREE, M_NODES, M_NUMERIC, PARENT, RIGHT, SLOT


def _model(**config: Any) -> ProbabilityTree:
    rng = random.Random(0)
    model = ProbabilityTree(grace_period=20, **config)
    for i in range(400):
        a, b, c = rng.gauss(0, 1), rng.gauss(0, 1), "rgb"[i % 3]
        model.learn_one({"a": a, "b": b, "c": c}, "p" if a + (c == "r") > 0.3 else ("q" if b > 0 else "s"))
    return model


def _parts(data: bytes) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    (size,) = struct.unpack(">I", data[len(MAGIC) : len(MAGIC) + 4])
    header = json.loads(data[len(MAGIC) + 4 : len(MAGIC) + 4 + size])
    with np.load(io.BytesIO(data[len(MAGIC) + 4 + size :])) as z:
        return header, {k: z[k].copy() for k in z.files}


def _bytes(header: dict[str, Any], arrays: dict[str, np.ndarray]) -> bytes:
    text = json.dumps(header).encode()
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return MAGIC + struct.pack(">I", len(text)) + text + buf.getvalue()


def test_the_files_own_parts_give_the_model_back() -> None:  # the helpers above are faithful
    model = _model()
    again = ProbabilityTree.from_bytes(_bytes(*_parts(model.to_bytes())))
    assert again.to_bytes() == model.to_bytes()


def _first_split(arrays: dict[str, np.ndarray]) -> int:
    return int(np.flatnonzero(arrays["tree.node"][:, KIND] != -1)[0])


def _first_leaf(arrays: dict[str, np.ndarray]) -> int:
    return int(np.flatnonzero(arrays["tree.node"][:, KIND] == -1)[0])


EDITS = {
    "a child beyond the nodes": lambda a: a["tree.node"].__setitem__((_first_split(a), LEFT), 1_000_000),
    "a child before its parent": lambda a: a["tree.node"].__setitem__((_first_split(a), RIGHT), 0),
    "a parent after its child": lambda a: a["tree.node"].__setitem__((1, PARENT), 5),
    "a leaf's slot beyond the slots": lambda a: a["tree.node"].__setitem__((_first_leaf(a), SLOT), 100_000),
    "a split on a column not there": lambda a: a["tree.node"].__setitem__((_first_split(a), COL), 40),
    "a node of no kind": lambda a: a["tree.node"].__setitem__((_first_leaf(a), KIND), 7),
    "a depth out of step": lambda a: a["tree.node"].__setitem__((1, DEPTH), 9),
    "more classes than the model": lambda a: a["tree.meta"].__setitem__(M_CLASSES, 50),
    "more nodes than the arrays": lambda a: a["tree.meta"].__setitem__(M_NODES, 10_000),
    "more numeric columns than the registry": lambda a: a["tree.meta"].__setitem__(M_NUMERIC, 9),
    "a free-slot stack deeper than the slots": lambda a: a["tree.meta"].__setitem__(M_FREE, 10_000),
    "a scored example of no class": lambda a: a["tree.mix_y"].__setitem__(3, 77),
    # floats a prediction reads: a NaN or infinite one was served as NaN probabilities
    "a NaN count": lambda a: a["tree.counts"].__setitem__((0, 0), np.nan),
    "an infinite count": lambda a: a["tree.counts"].__setitem__((0, 1), np.inf),
    "a negative count": lambda a: a["tree.counts"].__setitem__((0, 1), -3.0),
    "an infinite HGS log weight": lambda a: a["tree.hgs"].__setitem__((0, 0), np.inf),
    "a NaN regression weight": lambda a: a["tree.lr_w"].__setitem__((0, 0), np.nan),
    "a NaN threshold": lambda a: a["tree.thr"].__setitem__(_first_split(a), np.nan),
}


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_an_edited_array_is_refused_as_corrupt(edit: str) -> None:
    header, arrays = _parts(_model().to_bytes())
    EDITS[edit](arrays)
    with pytest.raises(FormatError, match="Corrupt"):
        ProbabilityTree.from_bytes(_bytes(header, arrays))


@pytest.mark.parametrize("capacity", [[10**12, 4, 2, 1, 4], [16, 4, 2, 1, 10**9], [-1, 4, 2, 1, 4]])
def test_a_capacity_far_beyond_the_saved_arrays_is_refused_before_it_is_allocated(capacity: list[int]) -> None:
    header, arrays = _parts(_model().to_bytes())
    header["capacity"]["tree"] = capacity
    with pytest.raises(FormatError, match="capacity"):
        ProbabilityTree.from_bytes(_bytes(header, arrays))


def test_a_header_missing_a_field_or_naming_an_unknown_parameter_is_refused_as_corrupt() -> None:
    header, arrays = _parts(_model().to_bytes())
    for edit in (
        lambda h: h["registry"].pop("names"),
        lambda h: h.pop("n_examples"),
        lambda h: h.pop("config"),
        lambda h: h["config"].__setitem__("seeX", 1),
        lambda h: h["registry"].__setitem__("kinds", [0, 0, 7]),
    ):
        broken = json.loads(json.dumps(header))
        edit(broken)
        with pytest.raises(FormatError, match="Corrupt"):
            ProbabilityTree.from_bytes(_bytes(broken, arrays))


def test_an_edited_forest_member_is_refused_and_the_interpreter_survives() -> None:
    # in a child process: before the checks, this crashed it (SIGSEGV)
    script = """
import io, json, struct, sys
import numpy as np
from streamtree import FormatError, ProbabilityForest
from tests.test_integrity import _bytes, _first_split, _parts
forest = ProbabilityForest(n_trees=2, seed=1)
rng = np.random.default_rng(0)
for i in range(600):
    a = float(rng.normal())
    forest.learn_one({"a": a, "b": float(rng.normal())}, "p" if a > 0 else "q")
outer, arrays = _parts(forest.to_bytes())
header, member = _parts(arrays["member.0"].tobytes())
member["tree.node"][_first_split(member), 1] = 1_000_000
arrays["member.0"] = np.frombuffer(_bytes(header, member), dtype=np.uint8)
try:
    ProbabilityForest.from_bytes(_bytes(outer, arrays)).predict_proba_one({"a": 0.1, "b": 0.2})
except FormatError as err:
    print("refused", err)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("refused")


def test_every_model_of_the_suite_passes_the_checks() -> None:  # no false refusal
    for config in ({}, {"naive_bayes": True}, {"linear": False}, {"splitter": "random"}):
        model = _model(**config)
        assert ProbabilityTree.from_bytes(model.to_bytes()).to_bytes() == model.to_bytes()
    forest = ProbabilityForest(n_trees=3, seed=2)
    forest.learn_many(
        [{"a": float(i % 7), "c": "xy"[i % 2]} for i in range(500)], ["pq"[i % 3 == 0] for i in range(500)]
    )
    assert ProbabilityForest.from_bytes(forest.to_bytes()).to_bytes() == forest.to_bytes()


def test_a_forest_whose_members_come_from_other_forests_is_refused() -> None:
    # each member's file is valid alone; the forest shares member 0's registry and classes,
    # so a member with more features or classes read past the end of its arrays
    rng = random.Random(3)
    big, small = ProbabilityForest(n_trees=2, method="rd", seed=1), ProbabilityForest(n_trees=2, method="rd", seed=1)
    for _ in range(300):
        big.learn_one({f"f{k}": rng.random() for k in range(6)} | {"c": rng.choice("abc")}, rng.choice("pqst"))
    for _ in range(10):
        small.learn_one({"f0": rng.random()}, "p")
    header, arrays = _parts(big.to_bytes())
    for member in ("member.0", "member.1"):
        mixed = dict(arrays) | {member: _parts(small.to_bytes())[1][member]}
        with pytest.raises(FormatError, match="other classes or features"):
            ProbabilityForest.from_bytes(_bytes(header, mixed))


@pytest.mark.parametrize("make", [_model, lambda: _forest(2)])
def test_a_file_cut_where_its_header_ends_is_refused_as_corrupt(make: Any) -> None:
    # a write interrupted between the header and the arrays: numpy's raw EOFError escaped
    data = make().to_bytes()
    (size,) = struct.unpack(">I", data[len(MAGIC) : len(MAGIC) + 4])
    with pytest.raises(FormatError, match="Corrupt"):
        load(data[: len(MAGIC) + 4 + size])


HEADER_EDITS = {
    "n_examples infinite": lambda h: h.__setitem__("n_examples", float("inf")),
    "n_examples beyond an int64": lambda h: h.__setitem__("n_examples", 2**63),
    "n_examples negative": lambda h: h.__setitem__("n_examples", -1),
    "a capacity infinite": lambda h: h["capacity"]["tree"].__setitem__(0, float("inf")),
    "a feature's kind infinite": lambda h: h["registry"]["kinds"].__setitem__(0, float("inf")),
    "a class that is a list": lambda h: h["classes"].__setitem__(0, []),
    "a class twice (one bit flipped)": lambda h: h.__setitem__("classes", [h["classes"][0]] * len(h["classes"])),
    "a parameter out of range": lambda h: h["config"].__setitem__("grace_period", 0),
    "a parameter misspelt": lambda h: h["config"].__setitem__("splitter", "hoeffdinw"),
    "a feature named NaN": lambda h: h["registry"]["names"].__setitem__(0, float("nan")),
    "a nominal value NaN": lambda h: h["registry"]["values"][0].__setitem__(1, float("nan")),
    "a feature twice": lambda h: h["registry"]["names"].__setitem__(1, h["registry"]["names"][0]),
    "a nominal value twice": lambda h: h["registry"]["values"][0].__setitem__(1, h["registry"]["values"][0][0]),
    "values of a feature not there": lambda h: h["registry"]["values"].append(["x"]),
    "more features than max_features": lambda h: h["config"].__setitem__("max_features", 1),
}


@pytest.mark.parametrize("edit", sorted(HEADER_EDITS))
def test_an_edited_header_is_refused_as_corrupt(edit: str) -> None:
    # they raised a raw OverflowError, TypeError or ConfigError, or (a class twice) loaded and
    # served probabilities that summed to less than 1
    header, arrays = _parts(_model().to_bytes())
    HEADER_EDITS[edit](header)
    with pytest.raises(FormatError, match="Corrupt"):
        ProbabilityTree.from_bytes(_bytes(header, arrays))


def _forest(n_trees: int) -> ProbabilityForest:
    forest = ProbabilityForest(n_trees=n_trees, seed=2)
    forest.learn_many([{"a": float(i % 7)} for i in range(200)], ["pq"[i % 2] for i in range(200)])
    return forest


@pytest.mark.parametrize("loss", [np.nan, -np.inf, np.inf])
def test_a_forest_whose_member_losses_are_not_finite_is_refused(loss: float) -> None:
    header, arrays = _parts(_forest(3).to_bytes())
    arrays["loss"][1] = loss
    with pytest.raises(FormatError, match="Corrupt streamtree forest"):
        ProbabilityForest.from_bytes(_bytes(header, arrays))
    for edit in (lambda h: h.__setitem__("n_examples", float("inf")), lambda h: h["config"].__setitem__("n_trees", 0)):
        broken = json.loads(json.dumps(header))
        edit(broken)
        with pytest.raises(FormatError, match="Corrupt streamtree forest"):
            ProbabilityForest.from_bytes(_bytes(broken, _parts(_forest(3).to_bytes())[1]))


def test_a_forest_whose_members_were_made_by_another_config_is_refused() -> None:
    # accepted: the forest then said max_bytes=131072 while its members learned without a budget
    bounded = ProbabilityForest(n_trees=2, seed=1, tree={"max_bytes": 2**17})
    other = ProbabilityForest(n_trees=2, seed=99, tree={"max_bytes": None, "grace_period": 1})
    for forest in (bounded, other):
        forest.learn_one({"a": 1.0}, "x")
    header, arrays = _parts(bounded.to_bytes())
    arrays["member.1"] = _parts(other.to_bytes())[1]["member.1"]
    with pytest.raises(FormatError, match="member 1 was not made by the forest's config"):
        ProbabilityForest.from_bytes(_bytes(header, arrays))
