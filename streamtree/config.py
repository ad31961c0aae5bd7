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

__all__ = [
    "ADDED",
    "CONSTRAINTS",
    "FOREST_ADDED",
    "MAX_CATEGORIES_LIMIT",
    "MAX_FEATURES_LIMIT",
    "MIN_BYTES",
    "validate_config",
    "validate_forest_config",
]


def _choice(*options: str) -> tuple[Callable[[Any], bool], str]:
    return (lambda v: isinstance(v, str) and v in options), "one of " + ", ".join(repr(o) for o in options)


def _int(low: int, high: int, none: bool = False) -> tuple[Callable[[Any], bool], str]:
    def ok(v: Any) -> bool:
        if v is None:
            return none
        return isinstance(v, numbers.Integral) and not isinstance(v, bool) and low <= int(v) <= high

    return ok, f"an int in [{low:_}, {high:_}]".replace("_", ",") + (" or None" if none else "")


def _float(
    low: float, high: float, low_open: bool = False, high_open: bool = False, none: bool = False
) -> tuple[Callable[[Any], bool], str]:
    def ok(v: Any) -> bool:
        if v is None:
            return none
        if not isinstance(v, numbers.Real) or isinstance(v, bool):
            return False
        try:
            x = float(v)
        except OverflowError:  # an int beyond any float
            return False
        if not math.isfinite(x):
            return False
        return (low < x if low_open else low <= x) and (x < high if high_open else x <= high)

    text = f"a float in {'(' if low_open else '['}{low}, {high}{')' if high_open else ']'}"
    return ok, text + (" or None" if none else "")


#: Most distinct features a model may learn (``max_features``), and its default.
MAX_FEATURES_LIMIT = 1_000_000
#: Most categories a nominal feature may keep apart (``max_categories``).
MAX_CATEGORIES_LIMIT = 1_000_000
#: The smallest memory budget (``max_bytes``): an empty tree's arrays take about 20 KB (60 KB
#: with the linear component's window).
MIN_BYTES = 2**16
#: Upper bound of the parameters that count examples: far beyond any stream's use, and well
#: inside the kernels' 64-bit integers.
EXAMPLES = 10**9


def _names(v: Any) -> bool:
    return v is None or (
        isinstance(v, (list, tuple))
        and len(v) <= MAX_FEATURES_LIMIT
        and all(isinstance(n, (str, int)) and not isinstance(n, bool) for n in v)
    )


CONSTRAINTS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "smoothing": _choice("hgs", "mbranch", "mestimate", "laplace", "mle"),
    "split_criterion": _choice("info_gain", "gini", "hellinger"),
    "grace_period": _int(1, EXAMPLES),
    "delta": _float(0.0, 1.0, low_open=True, high_open=True),
    "tau": _float(0.0, 1e6),
    "tau_scale": _choice("range", "absolute"),
    "max_depth": _int(1, 10_000, none=True),
    "max_nodes": _int(1, 10_000_000),
    "max_features": _int(1, MAX_FEATURES_LIMIT),
    "max_categories": _int(1, MAX_CATEGORIES_LIMIT, none=True),
    "max_bytes": _int(MIN_BYTES, 2**50, none=True),
    "n_split_points": _int(1, 1000),
    "min_branch_fraction": _float(0.0, 0.5, high_open=True),
    "nominal_features": (_names, f"None or a list of at most {MAX_FEATURES_LIMIT:,} feature names (str or int)"),
    "leaf_init": _choice("inherit", "zero"),
    "loocv_counts": _choice("honest", "all"),
    "refit_every": _int(1, EXAMPLES),
    "refit_steps": _int(1, 1000),
    "prior_weight": _float(1e-4, 1e6),
    "m": _float(0.0, 1e9, low_open=True),
    "half_life": _int(1, EXAMPLES, none=True),
    "drift_delta": _float(0.0, 1.0, low_open=True, high_open=True, none=True),
    "drift_patience": _int(1, EXAMPLES),
    "naive_bayes": (lambda v: isinstance(v, bool), "a bool"),
    "linear": (lambda v: isinstance(v, bool), "a bool"),
    "repeats_as_seen": (lambda v: isinstance(v, bool), "a bool"),
    "splitter": _choice("hoeffding", "subspace", "random"),
    "subspace_size": _int(1, MAX_FEATURES_LIMIT, none=True),
    "seed": _int(0, 2**63 - 1),
}


#: Parameters added after models were first stored, with the value that rebuilds a model whose
#: complete config was stored before the parameter existed (its default may differ: the
#: linear component is on by default, but a model stored without the parameter had none; a
#: model stored before the category bound and the memory budget had neither).
ADDED: dict[str, Any] = {
    "linear": False,
    "tau_scale": "absolute",
    "max_categories": None,
    "max_bytes": None,
    "repeats_as_seen": True,
}
#: The same for a forest's own parameters: one stored before weighting averaged its members.
#: One stored before its members could differ (``variants``) had members all alike.
FOREST_ADDED: dict[str, Any] = {"weighted": False, "poisson_rate": 1.0, "variants": [{}]}


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
                f"The {name!r} parameter of ProbabilityTree must be {expected}. Got {_shown(value)} instead.",
                param=name,
            )
    names = config.get("nominal_features") or ()
    limit = config.get("max_features")
    if isinstance(limit, int) and len(names) > limit:
        raise ConfigError(
            f"The 'nominal_features' parameter of ProbabilityTree must list at most max_features={limit} names. "
            f"Got {len(names)} instead.",
            param="nominal_features",
        )


#: The forest's methods, and the splitter and sampling of each.
METHODS: dict[str, tuple[str, str]] = {
    "rd": ("random", "all"),
    "rf+": ("subspace", "bagging"),
    "bt+": ("hoeffding", "bagging"),
    "dst": ("hoeffding", "disjoint"),
}
MAX_TREES = 1000
FOREST_KEYS = ("splitter", "seed")  # set per member by the forest, not by its tree config
#: Member parameters every member of a forest shares, so a variant may not set them: the
#: features (one registry for all) and the size limits (a service bounds them per tree).
SHARED_KEYS = ("nominal_features", "max_features", "max_categories", "max_nodes", "max_bytes")


def validate_forest_config(
    n_trees: Any, method: Any, seed: Any, weighted: Any, tree: Any, variants: Any = None, poisson_rate: Any = None
) -> None:
    """Raise :class:`ConfigError` (naming the parameter) unless the arguments are a valid
    :class:`~streamtree.forest.ProbabilityForest` configuration; ``tree`` and each variant
    are checked by :func:`validate_config`; ``None`` for ``variants`` or ``poisson_rate``
    is the method's.

    >>> validate_forest_config(10, "bt+", 0, True, None, [{}, {"max_bytes": 2**20}])
    Traceback (most recent call last):
    ...
    streamtree.exceptions.ConfigError: The 'variants' parameter of ProbabilityForest must not set 'max_bytes' (variants[1]): every member shares it.
    """
    n = n_trees
    if not (isinstance(n, numbers.Integral) and not isinstance(n, bool) and 1 <= int(n) <= MAX_TREES):
        raise ConfigError(
            f"The 'n_trees' parameter of ProbabilityForest must be an int in [1, {MAX_TREES:,}]. Got {n!r} instead.",
            param="n_trees",
        )
    if not (isinstance(method, str) and method in METHODS):
        raise ConfigError(
            "The 'method' parameter of ProbabilityForest must be one of "
            f"{', '.join(repr(m) for m in METHODS)}. Got {method!r} instead.",
            param="method",
        )
    s = seed
    if not (isinstance(s, numbers.Integral) and not isinstance(s, bool) and 0 <= int(s) < 2**63):
        raise ConfigError(
            f"The 'seed' parameter of ProbabilityForest must be an int in [0, 2**63). Got {s!r} instead.",
            param="seed",
        )
    if not isinstance(weighted, bool):
        raise ConfigError(
            f"The 'weighted' parameter of ProbabilityForest must be a bool. Got {weighted!r} instead.",
            param="weighted",
        )
    _validate_variants(variants)
    if poisson_rate is not None:
        _validate_poisson_rate(poisson_rate, method)
    if tree is None:
        return
    if not isinstance(tree, Mapping) or not all(isinstance(k, str) for k in tree):
        raise ConfigError(
            "The 'tree' parameter of ProbabilityForest must be None or a mapping of ProbabilityTree "
            f"parameters. Got {type(tree).__name__} instead.",
            param="tree",
        )
    for key in FOREST_KEYS:
        if key in tree:
            raise ConfigError(
                f"The 'tree' parameter of ProbabilityForest must not set {key!r}: the forest sets it "
                "for each member (its method and seed).",
                param=f"tree.{key}",
            )
    try:
        validate_config(tree)
    except ConfigError as exc:
        raise ConfigError(f"In the 'tree' parameter of ProbabilityForest: {exc}", param=f"tree.{exc.param}") from None


MAX_POISSON_RATE = 16.0


_POISSON_RATE = _float(0.0, MAX_POISSON_RATE, low_open=True)[0]


def _validate_poisson_rate(rate: Any, method: str) -> None:
    """:func:`validate_forest_config` of ``poisson_rate``: a number in (0, 16], and 1 for a
    method without bagging (``method`` already valid)."""
    if not _POISSON_RATE(rate):  # any real number (numpy's too), finite, in range
        raise ConfigError(
            "The 'poisson_rate' parameter of ProbabilityForest must be a number in (0, "
            f"{MAX_POISSON_RATE:g}]. Got {_shown(rate)} instead.",
            param="poisson_rate",
        )
    if METHODS[method][1] != "bagging" and rate != 1.0:
        raise ConfigError(
            f"The 'poisson_rate' parameter of ProbabilityForest applies to the bagging methods ('rf+', 'bt+'), "
            f"not {method!r}. Got {rate!r} instead of 1.",
            param="poisson_rate",
        )


def _validate_variants(variants: Any) -> None:
    """:func:`validate_forest_config` of ``variants``: ``None``, or a non-empty list or tuple
    of mappings of member parameters, none of :data:`FOREST_KEYS` or :data:`SHARED_KEYS`."""
    if variants is None:
        return
    if not (isinstance(variants, (list, tuple)) and 1 <= len(variants) <= MAX_TREES):
        raise ConfigError(
            "The 'variants' parameter of ProbabilityForest must be None or a list of 1 to "
            f"{MAX_TREES:,} mappings of ProbabilityTree parameters. Got {_shown(variants)} instead.",
            param="variants",
        )
    for i, variant in enumerate(variants):
        if not isinstance(variant, Mapping) or not all(isinstance(k, str) for k in variant):
            raise ConfigError(
                "The 'variants' parameter of ProbabilityForest must hold mappings of ProbabilityTree "
                f"parameters. Got {type(variant).__name__} at variants[{i}] instead.",
                param=f"variants.{i}",
            )
        for key in (*FOREST_KEYS, *SHARED_KEYS):
            if key in variant:
                owner = "the forest sets it for each member" if key in FOREST_KEYS else "every member shares it"
                raise ConfigError(
                    f"The 'variants' parameter of ProbabilityForest must not set {key!r} (variants[{i}]): {owner}.",
                    param=f"variants.{i}.{key}",
                )
        try:
            validate_config(variant)
        except ConfigError as exc:
            raise ConfigError(
                f"In variants[{i}] of ProbabilityForest: {exc}", param=f"variants.{i}.{exc.param}"
            ) from None


def _shown(value: Any) -> str:
    """``repr(value)``, cut short: a rejected value may be a huge number or a long list."""
    text = repr(value) if not isinstance(value, int) or abs(value) < 10**30 else f"an int of {value.bit_length()} bits"
    return text if len(text) <= 80 else text[:77] + "..."
