"""What a tree does about concept drift: its change detector, its background tree, their history.

The policy (see ``drift_delta`` in :class:`~streamtree.tree.ProbabilityTree`):

1. After each example, ADWIN (:class:`~streamtree.drift.Adwin`) reads the tree's 0/1 error on
   it, judged before the update by the leaf's most counted class. A fall of the error is the
   tree learning; a detected *rise* is a change.
2. On a change, a background tree (same configuration, no detector of its own) starts from
   nothing and learns every later example beside the tree.
3. Both score each example before learning it; ``gap`` sums the tree's log loss minus the
   background tree's, the log likelihood ratio of the two on the same examples. Once at least
   ``MIN_COMPARE`` examples were compared and ``gap > MARGIN`` (the background tree is
   ``e**MARGIN``, about 7.4, times likelier), it becomes the tree and the detector restarts;
   after ``patience`` examples without that, it is dropped.

The small ``MIN_COMPARE`` matters: after an abrupt change the old tree is confidently wrong,
and every example it keeps serving costs; measured on the abrupt-drift streams, waiting for
10 compared examples instead of 100 cut log loss by 10-50% (STAGGER-drift 0.040 -> 0.020),
and the margin keeps a young tree from winning on a lucky streak.

This class holds the state and makes the decisions; the tree does the scoring and the swap.

Examples
--------
>>> adaptation = Adaptation(delta=0.002, patience=2000)
>>> adaptation.decide(detected=True, at=5000)
'start'
>>> adaptation.summary()["n_detections"]
1
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from streamtree.drift import Adwin

if TYPE_CHECKING:
    from streamtree.tree import ProbabilityTree

__all__ = ["MARGIN", "MIN_COMPARE", "OFF", "Adaptation"]

MIN_COMPARE = 10  # examples a background tree is compared on before it may replace the tree
MARGIN = 2.0  # nats of log likelihood by which it must beat the tree
EVENTS_KEPT = 20  # most recent events listed by the summary
_MIN_PROBA = 1e-15

OFF: dict[str, Any] = {
    "detection": False, "n_detections": 0, "n_swaps": 0, "n_dropped": 0, "tree_since": 0, "background": None, "events": [],
}
"""The summary of a tree with change detection off."""


class Adaptation:
    """Change detector, background tree and drift history of one tree."""

    _COUNTERS = ("gap", "compared", "n_detections", "n_swaps", "n_dropped", "tree_since")

    def __init__(self, delta: float, patience: int) -> None:
        self.patience = patience
        self.detector = Adwin(delta)
        self.background: ProbabilityTree | None = None
        self.gap = 0.0  # sum over compared examples of (tree's log loss - background tree's)
        self.compared = 0
        self.n_detections = 0
        self.n_swaps = 0
        self.n_dropped = 0
        self.tree_since = 0  # example count when the current tree started learning
        self.events: list[tuple[str, int]] = []

    @staticmethod
    def error(leaf_counts: list[float], k: int) -> float:
        """1.0 when the leaf's most counted class (the first on ties) is not ``k``."""
        return float(leaf_counts.index(max(leaf_counts)) != k) if leaf_counts else 1.0

    def error_rose(self, error: float) -> bool:
        """Feed the detector one error; ``True`` on a detected rise of the error rate."""
        return self.detector.update(error) and self.detector.change > 0

    def compare(self, p_tree: float, p_background: float) -> None:
        """Both trees' probabilities of one example's label, before either learned it."""
        self.gap += math.log(max(p_background, _MIN_PROBA)) - math.log(max(p_tree, _MIN_PROBA))
        self.compared += 1

    def decide(self, detected: bool, at: int) -> str | None:
        """After example number ``at``: ``"start"`` a background tree (the caller builds it
        and passes it to :meth:`started`), ``"adopt"`` it (the caller swaps, then calls
        :meth:`adopted`), ``"drop"`` it (done here), or ``None``."""
        if detected:
            self.n_detections += 1
            self._event("detection", at)
            if self.background is None:
                return "start"
        if self.background is None:
            return None
        if self.compared >= MIN_COMPARE and self.gap > MARGIN:
            return "adopt"
        if self.compared >= self.patience:
            self.background = None
            self.n_dropped += 1
            self._event("dropped", at)
            return "drop"
        return None

    def started(self, background: ProbabilityTree) -> None:
        self.background = background
        self.gap = 0.0
        self.compared = 0

    def adopted(self, at: int) -> None:
        """The background tree has become the tree: a new error stream starts."""
        assert self.background is not None
        self.tree_since = at - self.background.n_examples
        self.background = None
        self.detector = Adwin(self.detector.delta)
        self.n_swaps += 1
        self._event("swap", at)

    def _event(self, kind: str, at: int) -> None:
        self.events = [*self.events[-(EVENTS_KEPT - 1) :], (kind, at)]

    def summary(self) -> dict[str, Any]:
        """Detected changes, the background tree and swaps, as JSON-able data."""
        background = self.background
        return {
            "detection": True,
            "n_detections": self.n_detections,
            "n_swaps": self.n_swaps,
            "n_dropped": self.n_dropped,
            "tree_since": self.tree_since,
            "background": None
            if background is None
            else {
                "n_examples": background.n_examples,
                "n_nodes": background.n_nodes,
                "compared": self.compared,
                "mean_log_loss_gain": self.gap / self.compared if self.compared else None,
            },
            "events": [{"event": kind, "at": at} for kind, at in self.events],
        }

    # -- state (the background tree is stored by the persistence module) ------------------
    def to_state(self) -> dict[str, Any]:
        state: dict[str, Any] = {name: getattr(self, name) for name in self._COUNTERS}
        state["events"] = [list(event) for event in self.events]
        state.update({f"detector.{key}": value for key, value in self.detector.to_state().items()})
        return state

    def set_state(self, state: dict[str, Any]) -> None:
        for name in self._COUNTERS:
            setattr(self, name, type(getattr(self, name))(state[name]))
        self.events = [(str(kind), int(at)) for kind, at in state["events"]]
        self.detector = Adwin.from_state({key[len("detector.") :]: v for key, v in state.items() if key.startswith("detector.")})
