"""The operator's bounds on the sizes of the models a write key may create.

The library accepts forests of up to 1,000 trees, trees of up to 10 million nodes and models
without a memory budget; one write key could then create a model that takes the machine's
memory, or whose every learn holds the service for seconds. A config is checked complete
(the library's defaults filled in), so a default over a bound is refused too; each refusal is
a 422 naming the parameter, the bound (and the setting that sets it) and the value:

==================  ========================  ===============================================
parameter           setting                   bound (default)
==================  ========================  ===============================================
``n_trees``         ``max_trees``             100 trees
``max_nodes``       ``max_tree_nodes``        1,000,000 nodes per tree
``max_features``    ``max_model_features``    10,000 features (the library's default)
``max_categories``  ``max_model_categories``  10,000 values per feature, not ``None`` (all)
``max_bytes``       ``max_tree_bytes``        256 MiB of arrays per tree (the library's
                                              default), not ``None`` (no budget)
==================  ========================  ===============================================

A model's arrays are then bounded by about ``2 x max_trees x max_tree_bytes``: each tree of a
forest has the budget, and so has the background tree a tree grows while a drift is
compared. A forest's member parameters are its ``tree`` config's (``loc``
``("body", "tree", name)``). Models created before a bound was lowered keep serving; the
bounds apply to new configs.
"""

from __future__ import annotations

from typing import Any

from .exceptions import InvalidInput, Loc
from .settings import Settings
from .validation import field_error

__all__ = ["check_model_sizes", "check_tree_count"]


def _over(loc: Loc, what: str, value: Any, bound: int, setting: str) -> InvalidInput:
    return field_error(
        loc, f"{what} must be at most {bound:,} on this service (setting {setting}); got {value:,}", "over_limit"
    )


def _trees(config: dict[str, Any]) -> int:
    n = config.get("n_trees", 1) if config.get("estimator") == "forest" else 1
    return n if isinstance(n, int) and not isinstance(n, bool) else 1  # not an int: the library names it


def check_tree_count(config: dict[str, Any], settings: Settings) -> None:
    """Refuse a config, as given, whose ``n_trees`` is over ``max_trees`` (before the library
    builds a thousand trees only to have them refused).

    Raises
    ------
    InvalidInput
        At ``("body", "n_trees")``.
    """
    trees = _trees(config)
    if trees > settings.max_trees:
        raise _over(("body", "n_trees"), "n_trees", trees, settings.max_trees, "max_trees")


def check_model_sizes(config: dict[str, Any], settings: Settings) -> None:
    """Refuse a complete model config (a tree's, or a forest's with its ``tree``, as the
    library completed it) with a size over the operator's bounds (module docstring).

    Raises
    ------
    InvalidInput
        At the first parameter over its bound.
    """
    check_tree_count(config, settings)
    member = config.get("tree")
    params, at = (member, ("body", "tree")) if isinstance(member, dict) else (config, ("body",))
    for name, setting in (
        ("max_nodes", "max_tree_nodes"),
        ("max_features", "max_model_features"),
        ("max_categories", "max_model_categories"),
        ("max_bytes", "max_tree_bytes"),
    ):
        if name not in params:  # a library without the parameter
            continue
        bound, value = getattr(settings, setting), params[name]
        if value is None:
            raise field_error(
                (*at, name),
                f"{name} must be set (at most {bound:,}) on this service (setting {setting}); got None (no limit)",
                "over_limit",
            )
        if value > bound:
            raise _over((*at, name), name, value, bound, setting)
