"""One config for either model: what a service stores and rebuilds models from.

A config is a :class:`~streamtree.tree.ProbabilityTree`'s parameters (``{"estimator": "tree"}``
or no ``estimator`` at all) or ``{"estimator": "forest", "n_trees", "method", "seed", "tree",
"weighted", "poisson_rate", "variants"}`` for a :class:`~streamtree.forest.ProbabilityForest`.
:data:`ESTIMATORS` builds a model from either, reads either from bytes, and gives back a
model's complete config in the same form.

>>> from streamtree.estimators import ESTIMATORS
>>> model = ESTIMATORS(estimator="forest", n_trees=3, method="rf+")
>>> config = ESTIMATORS.config_of(model)
>>> config["estimator"], config["n_trees"], config["method"]
('forest', 3, 'rf+')
>>> ESTIMATORS.config_of(ESTIMATORS(**config)) == config
True
"""

from __future__ import annotations

from typing import Any

from streamtree.config import ADDED, CONSTRAINTS, FOREST_ADDED
from streamtree.exceptions import ConfigError
from streamtree.forest import ProbabilityForest
from streamtree.persistence import load_any
from streamtree.tree import ProbabilityTree

__all__ = ["ESTIMATORS", "Estimators"]

Model = ProbabilityTree | ProbabilityForest
_KINDS: dict[str, type[ProbabilityTree] | type[ProbabilityForest]] = {
    "tree": ProbabilityTree,
    "forest": ProbabilityForest,
}
_FOREST_PARAMS = frozenset({"n_trees", "method", "seed", "tree", "weighted", "poisson_rate", "variants"})


class Estimators:
    """Builds, reads and describes models from configs (module docstring)."""

    def __call__(self, **config: Any) -> Model:
        kind = config.pop("estimator", "tree")
        if not isinstance(kind, str) or kind not in _KINDS:
            raise ConfigError(
                f"The 'estimator' parameter must be one of 'tree', 'forest'. Got {kind!r} instead.", param="estimator"
            )
        return _KINDS[kind](**config)

    @staticmethod
    def from_bytes(data: bytes) -> Model:
        """A model written by either class's ``to_bytes``."""
        return load_any(data)

    @staticmethod
    def config_of(model: Model) -> dict[str, Any]:
        """The model's complete config; ``estimator`` is named for a forest only (a tree's
        config stays what it always was)."""
        config = model.get_config()
        return {"estimator": "forest", **config} if isinstance(model, ProbabilityForest) else config

    @staticmethod
    def from_stored(config: dict[str, Any]) -> dict[str, Any]:
        """A *complete* config as a service stored it (:meth:`config_of` at creation), with each
        parameter added since it was stored set to the value that rebuilds the same model
        (:data:`~streamtree.config.ADDED`, :data:`~streamtree.config.FOREST_ADDED`), so that a
        model rebuilt from its log equals the one its snapshots hold. Not for partial configs: a
        missing parameter there means its default.

        >>> ESTIMATORS.from_stored({"grace_period": 30})["linear"]
        False
        >>> ESTIMATORS.from_stored({"linear": True})["linear"]
        True
        >>> ESTIMATORS.from_stored({"tau": 0.2})["tau_scale"]  # stored before the parameter
        'absolute'
        """
        if config.get("estimator") == "forest":
            tree = config.get("tree")
            config = {**FOREST_ADDED, **config}
            return {**config, "tree": {**ADDED, **tree}} if isinstance(tree, dict) else config
        return {**ADDED, **config}

    @staticmethod
    def param_names(config: dict[str, Any]) -> frozenset[str]:
        """The parameters a config of its ``estimator`` may hold."""
        names = _FOREST_PARAMS if config.get("estimator") == "forest" else frozenset(CONSTRAINTS)
        return names | {"estimator"}


#: The one instance services use.
ESTIMATORS = Estimators()
