"""Domain type aliases used across streamtree."""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any, TypeAlias

import numpy as np
import numpy.typing as npt

__all__ = ["ClassLabel", "FeatureName", "FeatureValue", "Features", "FloatArray", "IntArray"]

ClassLabel: TypeAlias = bool | int | str
FeatureName: TypeAlias = Hashable
FeatureValue: TypeAlias = Any
Features: TypeAlias = Mapping[FeatureName, FeatureValue]
FloatArray: TypeAlias = npt.NDArray[np.float64]
IntArray: TypeAlias = npt.NDArray[np.int64]
