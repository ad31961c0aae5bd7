"""One table of constraints for ``ProbabilityTree``'s configuration, checked in one place.

Each entry says what a parameter must be; :func:`validate_config` raises
:class:`~streamtree.exceptions.ConfigError` naming the parameter, what was expected and what
was given (and rejects unknown names, so a typo never passes silently).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Mapping
from typing import Any

from streamtree.exceptions import ConfigError

__all__ = ["CONSTRAINTS", "validate_config"]


def _choice(*options: str) -> tuple[Callable[[Any], bool], str]:
    return (lambda v: isinstance(v, str) and v in options), "one of " + ", ".join(repr(o) for o in options)


def _int(low: int, high: float = math.inf, none: bool = False) -> tuple[Callable[[Any], bool], str]:
    def ok(v: Any) -> bool:
        if v is None:
            return none
        return isinstance(v, numbers.Integral) and not isinstance(v, bool) and low <= int(v) <= high

    text = f"an int in [{low}, {high}]" if high != math.inf else f"an int >= {low}"
    return ok, text + (" or None" if none else "")


def _float(
    low: float, high: float, low_open: bool = False, high_open: bool = False, none: bool = False
) -> tuple[Callable[[Any], bool], str]:
    def ok(v: Any) -> bool:
        if v is None:
            return none
        if not isinstance(v, numbers.Real) or isinstance(v, bool) or not math.isfinite(v):
            return False
        x = float(v)
        return (low < x if low_open else low <= x) and (x < high if high_open else x <= high)

    text = f"a float in {'(' if low_open else '['}{low}, {high}{')' if high_open else ']'}"
    return ok, text + (" or None" if none else "")


def _names(v: Any) -> bool:
    return v is None or isinstance(v, (list, tuple)) and all(isinstance(n, (str, int)) and not isinstance(n, bool) for n in v)


CONSTRAINTS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "smoothing": _choice("hgs", "mbranch", "mestimate", "laplace", "mle"),
    "split_criterion": _choice("info_gain", "gini", "hellinger"),
    "grace_period": _int(1),
    "delta": _float(0.0, 1.0, low_open=True, high_open=True),
    "tau": _float(0.0, math.inf),
    "max_depth": _int(1, none=True),
    "max_nodes": _int(1),
    "n_split_points": _int(1, 1000),
    "min_branch_fraction": _float(0.0, 0.5, high_open=True),
    "nominal_features": (_names, "None or a list of feature names (str or int)"),
    "leaf_init": _choice("inherit", "zero"),
    "loocv_counts": _choice("honest", "all"),
    "refit_every": _int(1),
    "refit_steps": _int(1, 1000),
    "prior_weight": _float(1e-4, 1e6),
    "m": _float(0.0, 1e9, low_open=True),
    "half_life": _int(1, none=True),
    "drift_delta": _float(0.0, 1.0, low_open=True, high_open=True, none=True),
    "drift_patience": _int(1),
    "naive_bayes": (lambda v: isinstance(v, bool), "a bool"),
}


def validate_config(config: Mapping[str, Any]) -> None:
    """Raise :class:`ConfigError` for the first unknown or invalid parameter.

    Examples
    --------
    >>> validate_config({"delta": 1.5})
    Traceback (most recent call last):
    ...
    streamtree.exceptions.ConfigError: The 'delta' parameter of ProbabilityTree must be a float in (0.0, 1.0). Got 1.5 instead.
    """
    for name, value in config.items():
        if name not in CONSTRAINTS:
            raise ConfigError(
                f"ProbabilityTree has no parameter {name!r}; valid ones are {', '.join(sorted(CONSTRAINTS))}.",
                param=name,
            )
        ok, expected = CONSTRAINTS[name]
        if not ok(value):
            raise ConfigError(
                f"The {name!r} parameter of ProbabilityTree must be {expected}. Got {value!r} instead.", param=name
            )
