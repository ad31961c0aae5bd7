"""A shared test helper: feed a stream to ``learn_many`` in batches of varying sizes."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

from streamtree import ProbabilityTree


def learn_in_batches(model: ProbabilityTree, data: Sequence[tuple[dict, Any]], sizes: Sequence[int]) -> ProbabilityTree:
    """``model.learn_many`` over ``data`` cut into batches of ``sizes``, cycled; returns ``model``."""
    i = 0
    for size in itertools.cycle(sizes):
        if i >= len(data):
            return model
        batch = data[i : i + size]
        model.learn_many([x for x, _ in batch], [y for _, y in batch])
        i += size
    raise AssertionError("unreachable")
