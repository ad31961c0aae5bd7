"""The integer codes Python and the kernels share: the configuration's layout, the splitters,
and why the learning loop stopped.

A model hands its configuration to the kernels as two arrays, ``cfg_i`` (int64) and ``cfg_f``
(float64); ``C_*`` are their indexes (``ProbabilityTree`` fills them). The learning loop
(:func:`~streamtree.kernels.learn.learn_rows`) returns one of ``DONE``, ``GROW``, ``START``,
``ADOPT``.
"""

from __future__ import annotations

__all__ = [
    "ADOPT",
    "CONFIG_FLOATS",
    "CONFIG_INTS",
    "DONE",
    "GROW",
    "HOEFFDING",
    "RANDOM",
    "SPLITTER_CODES",
    "START",
    "SUBSPACE",
]

# cfg_i (int64) and cfg_f (float64): the configuration as the kernels read it
(
    C_GRACE,
    C_MAX_DEPTH,
    C_MAX_NODES,
    C_SPLIT_POINTS,
    C_CRITERION,
    C_INHERIT,
    C_HONEST,
    C_REFIT_EVERY,
    C_REFIT_STEPS,
    C_SMOOTHER,
    C_NB,
    C_DRIFT,
    C_PATIENCE,
    C_HALF_LIFE,
    C_SPLITTER,
    C_SEED,
    C_SUBSPACE,
    C_LINEAR,
    C_TAU_RANGE,
    C_REPEATS_SEEN,
) = range(20)
CONFIG_INTS = 20
(C_DELTA, C_TAU, C_MIN_BRANCH, C_M) = range(4)
CONFIG_FLOATS = 4

DONE, GROW, START, ADOPT = range(4)
HOEFFDING, SUBSPACE, RANDOM = range(3)  # cfg_i[C_SPLITTER]
SPLITTER_CODES = {"hoeffding": HOEFFDING, "subspace": SUBSPACE, "random": RANDOM}
