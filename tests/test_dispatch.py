"""Kernels called at their compiled entry points run the same code as through numba's dispatch."""

from __future__ import annotations

import numpy as np

from streamtree import ProbabilityTree
from streamtree.dispatch import direct, entry_point
from streamtree.kernels.handle import tree_handle
from streamtree.kernels.predict import predict_rows
from tests.test_tree import fitted, stream


def encoded(model: ProbabilityTree, n: int) -> tuple[np.ndarray, np.ndarray]:
    from streamtree.encoding import encode_for_prediction

    return encode_for_prediction(model.registry, [x for x, _ in stream(n, seed=5)])


def test_the_entry_point_answers_as_the_dispatcher() -> None:
    model = fitted()
    num, nom = encoded(model, 50)
    handle = tree_handle(model.state.tree)
    for r in range(num.shape[0]):
        row, codes = num[r : r + 1].copy(), nom[r : r + 1].copy()
        via_dispatch = np.empty((1, model.state.tree.counts.shape[1]))
        via_entry = np.empty_like(via_dispatch)
        via_direct = np.empty_like(via_dispatch)
        predict_rows(handle, model.state.cfg_i, model.state.cfg_f, row, codes, via_dispatch)
        entry_point(predict_rows, handle, model.state.cfg_i, model.state.cfg_f, row, codes, via_entry)(
            handle, model.state.cfg_i, model.state.cfg_f, row, codes, via_entry
        )
        direct(predict_rows, handle, model.state.cfg_i, model.state.cfg_f, row, codes, via_direct)
        k = len(model.classes_)  # the columns past them are capacity, never written
        assert np.array_equal(via_dispatch[:, :k], via_entry[:, :k])
        assert np.array_equal(via_dispatch[:, :k], via_direct[:, :k])


def test_one_event_and_a_batch_of_its_rows_take_their_own_paths_to_the_same_answer() -> None:
    """``predict_proba_one`` goes to the entry point, ``predict_proba`` of a DataFrame (whose
    rows need not be C-contiguous) through the dispatcher: the same probabilities."""
    import pandas as pd

    model = fitted()
    rows = [x for x, _ in stream(40, seed=6)]
    frame = pd.DataFrame(rows)
    batch = model.predict_proba(frame)
    for i, x in enumerate(rows):
        assert np.array_equal(batch[i], [model.predict_proba_one(x)[c] for c in model.classes_])
