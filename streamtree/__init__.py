"""streamtree: calibrated class probabilities from online decision trees.

>>> from streamtree import ProbabilityTree
>>> model = ProbabilityTree()
>>> model.learn_one({"x": 1.0}, "a")
>>> model.predict_proba_one({"x": 1.0})
{'a': 1.0}

The models, and numba with their compiled kernels, are imported on first use of a name below
(PEP 562), so ``import streamtree.client`` or the ``streamtree learn`` command loads neither.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from streamtree.exceptions import ConfigError, DecisionError, FormatError, InputError, StreamtreeError

if TYPE_CHECKING:
    from streamtree.decision import CostMatrix, Decision, Decisions, decide, decide_many
    from streamtree.forest import METHODS, ProbabilityForest
    from streamtree.tree import ProbabilityTree
    from streamtree.warm import kernels_cached, warm_up

__all__ = [
    "ConfigError",
    "CostMatrix",
    "Decision",
    "DecisionError",
    "Decisions",
    "FormatError",
    "InputError",
    "METHODS",
    "ProbabilityForest",
    "ProbabilityTree",
    "StreamtreeError",
    "decide",
    "decide_many",
    "kernels_cached",
    "load",
    "warm_up",
]
__version__ = "0.1.0"

#: Name -> the module it is imported from on first use.
_LAZY = {
    "CostMatrix": "streamtree.decision",
    "Decision": "streamtree.decision",
    "Decisions": "streamtree.decision",
    "decide": "streamtree.decision",
    "decide_many": "streamtree.decision",
    "METHODS": "streamtree.forest",
    "ProbabilityForest": "streamtree.forest",
    "ProbabilityTree": "streamtree.tree",
    "kernels_cached": "streamtree.warm",
    "warm_up": "streamtree.warm",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'streamtree' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later reads are plain attribute reads
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


def load(data: bytes) -> ProbabilityTree | ProbabilityForest:
    """Read a model written by ``to_bytes`` of a :class:`ProbabilityTree` or a
    :class:`ProbabilityForest`, whichever it is (:class:`FormatError` for anything else)."""
    from streamtree.persistence import load_any

    return load_any(data)
