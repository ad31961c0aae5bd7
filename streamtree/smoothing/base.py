"""The one interface every leaf-probability estimator implements.

A smoother maps the class counts kept at every node of a tree to class probabilities at a
node (usually a leaf; an internal node when an example stopped there because a feature was
missing). Counts are a float array ``counts[node, class]``; the tree is a
:class:`~streamtree.topology.Topology`. The same smoother serves the online tree (one path at
a time, :meth:`Smoother.path_proba`) and batch use on any fitted tree
(:meth:`Smoother.node_proba`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from streamtree.topology import Topology
from streamtree.typing import FloatArray, IntArray

__all__ = ["Smoother", "State"]

State = dict[str, Any]  # numpy arrays and JSON scalars only: what the safe format can store


class Smoother(ABC):
    """Maps node counts to class probabilities.

    Subclasses implement :meth:`node_proba`; those with fitted parameters override
    :meth:`refit`, :meth:`get_state` and :meth:`set_state`; those that can do better than
    computing every node override :meth:`path_proba`.
    """

    name: ClassVar[str]
    #: whether every probability it returns is > 0 (the tree floors those of the others)
    strictly_positive: ClassVar[bool] = True
    #: its code in the compiled kernels (:mod:`streamtree.kernels.smoothing`); -1 for
    #: estimators that only serve batch use
    code: ClassVar[int] = -1

    def refit(self, topology: Topology, counts: FloatArray, fit_counts: FloatArray | None = None) -> None:  # noqa: B027
        """Update fitted parameters. ``fit_counts`` are the counts an objective should read
        (honest counts), ``counts`` those predictions use; closed-form estimators ignore both."""

    @abstractmethod
    def node_proba(self, topology: Topology, counts: FloatArray) -> FloatArray:
        """Probabilities ``(S, K)`` at every node, each node treated as the leaf it would be."""

    def predict(self, topology: Topology, counts: FloatArray, nodes: IntArray) -> FloatArray:
        """Probabilities ``(len(nodes), K)`` at the given nodes."""
        return self.node_proba(topology, counts)[np.asarray(nodes, dtype=np.int64)]

    def path_proba(self, parent: IntArray, counts: FloatArray, path: Sequence[int] | IntArray) -> FloatArray:
        """Probabilities ``(K,)`` at ``path[-1]``; ``path`` runs from the root to that node.

        The per-event hot path: it takes the bare ``parent`` array (no :class:`Topology`, which
        costs O(S) to build after every split) and should cost O(len(path) K). The default
        builds the topology and computes every node: override it.
        """
        return self.node_proba(Topology.from_parent(parent), counts)[int(path[-1])]

    def weights(self, tree: Any) -> tuple[FloatArray | None, float | None]:
        """Online tree (:class:`~streamtree.state.TreeArrays`): the weight of every node as an
        ancestor and of the uniform pseudo-node, for estimators that mix a leaf with its
        ancestors by fitted weights (``(None, None)`` for the others)."""
        return None, None

    def summary(self, tree: Any) -> dict[str, Any] | None:
        """Online tree: the fitted state worth showing in a model's summary, if any."""
        return None

    def get_state(self) -> State:
        """Fitted parameters as numpy arrays and JSON scalars (empty for closed forms)."""
        return {}

    def set_state(self, state: State) -> None:  # noqa: B027 (a no-op unless overridden)
        """Restore what :meth:`get_state` returned."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"
