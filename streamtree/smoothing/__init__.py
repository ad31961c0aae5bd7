"""Leaf-probability estimators behind one interface (:class:`Smoother`).

``SMOOTHERS`` maps the option strings accepted by ``ProbabilityTree(smoothing=...)`` to classes.
"""

from __future__ import annotations

from streamtree.smoothing.base import Smoother
from streamtree.smoothing.hdp import HDP
from streamtree.smoothing.hgs import HGS, loocv
from streamtree.smoothing.mbranch import MBranch
from streamtree.smoothing.simple import MLE, Laplace, MEstimate

__all__ = [
    "HDP",
    "HGS",
    "MBranch",
    "MEstimate",
    "MLE",
    "Laplace",
    "SMOOTHERS",
    "Smoother",
    "loocv",
    "smoother_of_config",
]

SMOOTHERS: dict[str, type[Smoother]] = {
    "mle": MLE,
    "laplace": Laplace,
    "mestimate": MEstimate,
    "mbranch": MBranch,
    "hgs": HGS,
    "hdp": HDP,
}


def smoother_of_config(name: str, *, steps: int = 3, prior_weight: float = 1.0, m: float = 1.0) -> Smoother:
    """The smoother an online tree's configuration names (``ProbabilityTree(smoothing=...)``)."""
    if name == "hgs":
        return HGS(steps=steps, prior_weight=prior_weight)
    if name == "mestimate":
        return MEstimate(m=m)
    return SMOOTHERS[name]()
