"""What a tree does about concept drift: its change detector, its background tree, their history.

The policy (see ``drift_delta`` in :class:`~streamtree.tree.ProbabilityTree`):

1. After each example, ADWIN (:mod:`streamtree.kernels.adwin`) reads the tree's 0/1 error on
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

The compiled learning loop (:func:`streamtree.kernels.learn.learn_rows`) runs this policy on
the model's drift arrays (:class:`~streamtree.state.DriftArrays`); the tree holds the
background tree by reference and adopts it by one assignment.
"""

from __future__ import annotations

__all__ = ["MARGIN", "MIN_COMPARE"]

MIN_COMPARE = 10  # examples a background tree is compared on before it may replace the tree
MARGIN = 2.0  # nats of log likelihood by which it must beat the tree
