"""``ProbabilityForest``: randomized online probability trees whose probabilities are averaged.

The randomized-trees paper (Fan, Wang, Yu and Ma, ICDM 2005; ``docs/library/forests.md``)
estimates the posterior by averaging the probabilities of ``T`` randomized trees,

.. math::

    \\hat p(y \\mid x) = \\frac{1}{T} \\sum_{t=1}^{T} \\hat p_t(y \\mid x),

and its four methods are grown here online, each member an HGS-smoothed
:class:`~streamtree.tree.ProbabilityTree` on the compiled arrays:

``"rd"`` (random decision trees)
    every member sees every example; a leaf takes a *random* split (a random feature and, for
    a number, a random threshold in the range seen at the leaf) each ``grace_period``
    examples, with no criterion and no Hoeffding test (``splitter="random"``);
``"rf+"`` (random forest, probabilities averaged)
    online bagging (below) and, at each split attempt, the Hoeffding test among a random
    ``sqrt`` of the features (``splitter="subspace"``);
``"bt+"`` (bagged trees, probabilities averaged)
    online bagging (Oza and Russell, 2001): member ``t`` learns each example
    ``w ~ Poisson(1)`` times, the online form of a bootstrap sample;
``"dst"`` (disjoint sample trees)
    each example goes to one member, drawn uniformly by a seeded hash: the members partition
    the stream.

**Weighted members** (``weighted=True``, the default). A plain mean gives a member that
learned the concept late (after a change, or a split it found later than the others) the
same say as the best (what that cost: ``docs/decisions/forests.md``). So the forest serves an
exponentially weighted average,

.. math::

    \\hat p(y \\mid x) = \\frac{\\sum_t w_t \\hat p_t(y \\mid x)}{\\sum_t w_t}, \\qquad
    w_t = e^{-\\eta (L_t - \\min_j L_j)},

where ``L_t`` is an exponential moving average (decay :data:`WEIGHT_DECAY`, about the last
1,000 examples) of member ``t``'s log loss on the examples it learns, each scored before it
learned it, relative to the weighted mean of the members that learned the example and capped
at ``ln(1 / WEIGHT_FLOOR)`` nats an example (:func:`~streamtree.kernels.forest.weigh_rows`);
``eta`` is :data:`WEIGHT_ETA`. Equal losses give equal weights: the plain mean, bit for bit.

Every random draw is a hash of the forest's seed, the member and the example's position
(:mod:`streamtree.kernels.randomness`): the same seed and event sequence give the same forest,
bit for bit, whatever the batch boundaries. Each member keeps its own change detector and
background tree (``drift_delta`` of its tree config), so a member adapts to drift on its own.

The forest shares one feature registry and one list of classes among its members; every
member is handed every row (weight 0 for the rows it does not learn), so a class becomes
known to all members at the same row, as it does to a single tree.

Learning and prediction cost one compiled call for all the members
(:mod:`streamtree.kernels.forest`), not one per member: the members' arrays are held in numba
typed lists (:class:`MemberArrays`) that follow the members' states
(:class:`~streamtree.tree_state.TreeState`), and a member that needs Python (to grow its
arrays or start, adopt or drop a background tree) is handled as a tree handles itself
(``TreeState.resolve``) before the call resumes: the same bits as a call per member.
"""

from __future__ import annotations

import copy
import inspect
import math
from collections.abc import Hashable, Mapping
from typing import Any

import numpy as np

from streamtree import forest_inspection, growth
from streamtree.classifier import Classifier
from streamtree.config import FOREST_KEYS, METHODS, validate_forest_config
from streamtree.dispatch import at_entry, direct
from streamtree.exceptions import FormatError
from streamtree.features import FeatureRegistry
from streamtree.kernels.codes import DONE
from streamtree.kernels.forest import (
    ALL,
    BAGGING,
    DISJOINT,
    draw_reps,
    learn_forest,
    learn_forest_rows,
    member_weights,
    predict_forest_rows,
    weigh_rows,
)
from streamtree.kernels.randomness import mix
from streamtree.members import MemberArrays
from streamtree.persistence import FOREST, Capture, capture_forest, read_forest, register_reader
from streamtree.tree import ProbabilityTree, class_ids
from streamtree.tree_state import registry_shapes
from streamtree.typing import ClassLabel, FloatArray
from streamtree.values import check_mapping, plain

__all__ = ["METHODS", "ProbabilityForest", "poisson_cdf"]

#: Member parameters each method starts from (``tree`` overrides them): a random split costs no
#: test, so random trees grow fast, and a disjoint member sees a fraction of the stream; BT+
#: members grow at 15 rather than the tree's 30 (``docs/decisions/forests.md``).
METHOD_TREE_DEFAULTS: dict[str, dict[str, Any]] = {
    "rd": {"grace_period": 5},
    "dst": {"grace_period": 5},
    "bt+": {"grace_period": 15, "repeats_as_seen": False},
}
#: Each method's ``poisson_rate`` (``None``): BT+ members learn each example Poisson(2) times,
#: the repetitions counted in their counts but not among their leaves' examples seen
#: (``repeats_as_seen=False`` above; ``docs/decisions/forest-variants.md``).
METHOD_POISSON_RATE: dict[str, float] = {"bt+": 2.0}
#: Each method's member variants (``variants=None``): BT+ members are of three kinds, in turn:
#: eager and forgetting (a split attempt every 5 examples, ties broken at the first:
#: ``tau=0.6``; counts halved every 2,000 examples), cautious without the linear component,
#: and cautious with it. The forest weighs its members by their recent loss, so each kind
#: carries the streams it predicts best: eager, forgetting ones the local, clustered and
#: moving ones (RandomRBF, RandomRBFDrift), cautious ones the crisp ones (Agrawal, Shuttle),
#: the linear ones the regression (``docs/decisions/forest-variants.md``).
METHOD_VARIANTS: dict[str, list[dict[str, Any]]] = {
    "bt+": [{"grace_period": 5, "tau": 0.6, "half_life": 2000}, {"linear": False}, {}],
}
#: How sharply the weighted forest prefers its better members: a member whose recent mean
#: relative log loss is ``d`` nats above the best one's weighs ``exp(-WEIGHT_ETA d)`` as much
#: (why 35: ``docs/decisions/member-weights.md``).
WEIGHT_ETA = 35.0
#: A member's loss on an example is at most ``ln(1 / WEIGHT_FLOOR)`` nats (3.0) above the
#: forest's: one confident mistake where the other members were right does not take a member's
#: weight for the next thousand examples (``docs/decisions/member-weights.md``).
WEIGHT_FLOOR = 0.05
#: The members' loss is an exponential moving average with this decay: about the last 1,000
#: examples each learned.
WEIGHT_DECAY = 0.999


def poisson_cdf(rate: float) -> np.ndarray:
    """Poisson(``rate``) cumulative probabilities ``F(k)``, ``k = 0 .. rate + 10 sqrt(rate) + 8``
    (0 .. 19 at rate 1; what lies beyond is below 1e-15): a draw is ``w = #{k : u >= F(k)}``
    for ``u`` uniform in [0, 1) (:func:`~streamtree.kernels.forest.draw_reps`)."""
    n = int(rate + 10.0 * math.sqrt(rate)) + 9
    return np.cumsum([math.exp(-rate) * rate**k / math.factorial(k) for k in range(n)])


_TREE_DEFAULTS = {
    name: p.default for name, p in inspect.signature(ProbabilityTree).parameters.items() if p.kind is p.KEYWORD_ONLY
}
_SAMPLING_CODES = {"all": ALL, "bagging": BAGGING, "disjoint": DISJOINT}


def _member_seed(seed: int, index: int) -> int:
    """Member ``index``'s seed, a hash of the forest's seed (non-negative int64)."""
    return int(mix(seed, index, 0, 0x5EED) >> np.uint64(1))


class ProbabilityForest(Classifier):
    """Online forest of randomized probability trees, their probabilities averaged.

    Parameters
    ----------
    n_trees
        Members, 1 to 1,000.
    method
        ``"rd"``, ``"rf+"``, ``"bt+"`` or ``"dst"`` (module docstring).
    seed
        Seed of every random draw (members' splits and the sampling), a non-negative int.
    tree
        :class:`~streamtree.tree.ProbabilityTree` parameters of every member (``None``: its
        defaults, and :data:`METHOD_TREE_DEFAULTS` for the method); ``splitter`` and ``seed``
        are the forest's to set. Each member has its own ``max_bytes``: the forest's arrays
        stay within ``n_trees`` times it.
    weighted
        Weigh the members by their recent log loss (module docstring); ``False``: the plain
        mean of the paper.
    poisson_rate
        The bagging methods' (``"bt+"``, ``"rf+"``): each member learns each example
        ``Poisson(poisson_rate)`` times, in (0, 16]; ``None``: the method's
        (:data:`METHOD_POISSON_RATE`: 2 for BT+, whose members count the repetitions in their
        counts but not among their leaves' examples seen, ``repeats_as_seen=False``; 1 for
        RF+). MOA's and river's ARF use 6; what the rate gives and costs:
        ``docs/decisions/forest-variants.md``.
    variants
        Member parameters that differ between members, cycled: member ``i`` learns with
        ``tree`` updated by ``variants[i % len(variants)]``. ``None``: the method's
        (:data:`METHOD_VARIANTS`; ``[{}]``, members all alike, for a method without). A variant
        may not set the parameters the members share (the features and size limits:
        :data:`~streamtree.config.SHARED_KEYS`) nor ``splitter`` and ``seed``.

    Examples
    --------
    >>> from river import datasets, metrics
    >>> from streamtree import ProbabilityForest
    >>> model = ProbabilityForest(n_trees=5, method="bt+", seed=1)
    >>> metric = metrics.LogLoss()
    >>> for x, y in datasets.Phishing():
    ...     metric.update(y, model.predict_proba_one(x))
    ...     model.learn_one(x, y)
    >>> metric.get() < 0.4
    True
    """

    def __init__(
        self,
        n_trees: int = 10,
        method: str = "bt+",
        seed: int = 0,
        tree: Mapping[str, Any] | None = None,
        weighted: bool = True,
        poisson_rate: float | None = None,
        variants: list[Mapping[str, Any]] | None = None,
    ) -> None:
        self.n_trees = n_trees
        self.method = method
        self.seed = seed
        # copies: a caller's dict edited later (one config reused in a sweep) would change
        # get_config() and clone() under members built from the old one, and a save
        # written then would not load
        self.tree = copy.deepcopy(tree)
        self.weighted = weighted
        self.poisson_rate = poisson_rate
        self.variants = copy.deepcopy(variants)
        validate_forest_config(n_trees, method, seed, weighted, tree, variants, poisson_rate)
        self._rate = float(METHOD_POISSON_RATE.get(method, 1.0) if poisson_rate is None else poisson_rate)
        splitter, self._sampling = METHODS[method]
        self._poisson_cdf = poisson_cdf(self._rate)
        base = self._member_base()
        chosen = METHOD_VARIANTS.get(method, [{}]) if variants is None else variants
        self._variants = [dict(v) for v in chosen]
        self.members = [
            ProbabilityTree(**(base | self._variants[i % len(chosen)]), splitter=splitter, seed=_member_seed(seed, i))
            for i in range(n_trees)
        ]
        self._reset()

    def _member_base(self) -> dict[str, Any]:
        """The members' parameters but their variants': the method's defaults under ``tree``."""
        return {**METHOD_TREE_DEFAULTS.get(self.method, {}), **(self.tree or {})}

    def _reset(self) -> None:
        self.classes_: list[ClassLabel] = []
        self.class_index: dict[ClassLabel, int] = {}
        self.n_examples = 0
        self.loss_ = np.zeros(self.n_trees)  # each member's recent log loss (weigh_rows)
        self._shapes: tuple[int, ...] = ()  # the registry's shapes at the last batch
        self._share(self.members[0].registry)
        self._arrays: MemberArrays | None = None  # built on first use (_member_arrays)

    def _share(self, registry: FeatureRegistry) -> None:
        """One registry and one list of classes for the forest and all its members."""
        self._registry = registry
        for m in self.members:
            m.registry = registry
            m.classes_ = self.classes_
            m.class_index = self.class_index

    @property
    def registry(self) -> FeatureRegistry:  # type: ignore[override]
        """The features the forest has learned (its members' registry)."""
        return self._registry

    @registry.setter
    def registry(self, registry: FeatureRegistry) -> None:
        self._share(registry)

    def get_config(self) -> dict[str, Any]:
        """The complete configuration as JSON-able data: ``ProbabilityForest(**config)``.

        ``tree`` holds every member parameter (the defaults filled in) but ``splitter`` and
        ``seed``."""
        member = self.members[0].get_config()
        # member 0's parameters, but those its variant set: the forest's own (or the defaults)
        base = self._member_base()
        member.update({k: plain(base.get(k, _TREE_DEFAULTS[k])) for k in self._variants[0]})
        tree = {k: v for k, v in member.items() if k not in FOREST_KEYS}
        return {
            "n_trees": int(self.n_trees),
            "method": self.method,
            "seed": int(self.seed),
            "tree": tree,
            "weighted": self.weighted,
            "poisson_rate": self._rate,
            # keys in order: equal forests (a variant's keys in any order) write the same bytes
            "variants": [{k: plain(variant[k]) for k in sorted(variant)} for variant in self._variants],
        }

    @property
    def n_nodes(self) -> int:
        """Nodes of all members."""
        return sum(m.n_nodes for m in self.members)

    def __getstate__(self) -> dict[str, Any]:
        """Pickling and deep copies leave out the typed lists (rebuilt on first use)."""
        state = super().__getstate__()
        state["_arrays"] = None
        return state

    @property
    def _eta(self) -> float:
        return WEIGHT_ETA if self.weighted else 0.0

    def weights(self) -> list[float]:
        """Each member's share of the forest's probabilities now (they sum to 1)."""
        weights = np.empty(self.n_trees)
        total = member_weights(self.loss_, self._eta, weights)
        return (weights / total).tolist()  # type: ignore[no-any-return]

    def _member_arrays(self) -> MemberArrays:
        """The members' arrays for the kernels (not yet synced: the caller does), built anew
        for a new list of members (a loaded forest)."""
        arrays = self._arrays
        if arrays is None or arrays.members is not self.members:
            arrays = self._arrays = MemberArrays(self.members)
        return arrays

    # -- learning -----------------------------------------------------------------------
    def repetitions(self, n: int) -> np.ndarray:
        """``(n_trees, n)``: how many times each member will learn each of the next ``n``
        examples (the sampling's draws, :func:`~streamtree.kernels.forest.draw_reps`: a
        function of the seed and the example numbers alone, so the forest is not changed)."""
        reps = np.empty((self.n_trees, n), dtype=np.int64)
        draw_reps(_SAMPLING_CODES[self._sampling], self.seed, self.n_examples, self._poisson_cdf, reps)
        return reps

    def _learn(
        self,
        num: np.ndarray,
        nom: np.ndarray,
        labels: list[ClassLabel],
        first_values: dict[int, float],
        want_proba: bool,
    ) -> FloatArray | None:
        """Learn the rows in every member in one compiled call
        (:func:`~streamtree.kernels.forest.learn_forest`: the draws, the members' learning and
        the weighing), returning to Python only for a member that needs it (module docstring):
        then the call resumes from that member and row, and the members are weighed row by
        row after it (:func:`~streamtree.kernels.forest.weigh_rows`). The prequential
        predictions are the members' weighted mean before each row."""
        n = len(labels)
        ks = class_ids(self.classes_, self.class_index, labels)
        arrays = self._member_arrays()
        shapes = registry_shapes(self.registry, len(self.classes_))
        # the registry's sizes before this batch when it grew (the members' last fit), for the
        # memory budget (streamtree.growth.Sizes); None: as they are
        before = growth.registry_sizes(self.members[0].state.tree) if shapes != self._shapes else None
        self._shapes = shapes
        totals = arrays.prepare(first_values, shapes)
        fkeys = self.members[0].state.fkeys  # every member's: the same registry
        k = len(self.classes_)
        if n == 1 and not want_proba:
            reps, member_proba, weighed, unweighed, proba = arrays.one_event
            scores = weighed if self.weighted else unweighed
        else:
            reps = np.empty((self.n_trees, n), dtype=np.int64)
            member_proba = np.empty((self.n_trees, n, k) if want_proba else (self.n_trees, 0, 0))
            scores = np.empty((self.n_trees, n if self.weighted else 0))
            proba = np.empty((n, k) if want_proba else (0, 0))
        args = (
            arrays.trees,
            arrays.backgrounds,
            arrays.cfg_i,
            arrays.cfg_f,
            num,
            nom,
            ks,
            fkeys,
            totals,
            _SAMPLING_CODES[self._sampling],
            self.seed,
            self.n_examples,
            self._poisson_cdf,
            self.loss_,
            self._eta,
            WEIGHT_DECAY,
            WEIGHT_FLOOR,
            reps,
            member_proba,
            scores,
            proba,
            want_proba,
            arrays.paths,
            arrays.work,
        )
        member, row, reason = direct(learn_forest, *args) if at_entry(num, nom) else learn_forest(*args)
        if reason != DONE:  # a member stopped: handle it, resume, and weigh once all are done
            while reason != DONE:
                self.members[member].state.resolve(reason, reps[member], row, (before, num, nom, ks))
                arrays.sync()
                member, row, reason = learn_forest_rows(
                    arrays.trees,
                    arrays.backgrounds,
                    arrays.cfg_i,
                    arrays.cfg_f,
                    num,
                    nom,
                    ks,
                    reps,
                    fkeys,
                    row,
                    member,
                    totals,
                    member_proba,
                    want_proba,
                    scores,
                    arrays.paths,
                    arrays.work,
                )
            weigh_rows(self.loss_, self._eta, WEIGHT_DECAY, WEIGHT_FLOOR, scores, member_proba, proba, want_proba)
        arrays.finish(n)
        self.n_examples += n
        return proba if want_proba else None

    def _check_budget(self, shapes: tuple[int, int, int, int]) -> None:
        for member in self.members:  # each member has the budget (max_bytes)
            member.state.check_budget(shapes)

    # -- prediction ---------------------------------------------------------------------
    def _predict(self, num: np.ndarray, nom: np.ndarray) -> FloatArray:
        arrays = self._member_arrays()
        arrays.sync()
        out = np.zeros((num.shape[0], len(self.classes_)))
        args = (
            arrays.trees,
            arrays.cfg_i,
            arrays.cfg_f,
            num,
            nom,
            self.loss_,
            self._eta,
            out,
            arrays.paths,
            arrays.work,
        )
        direct(predict_forest_rows, *args) if at_entry(num, nom) else predict_forest_rows(*args)
        return out

    # -- introspection ------------------------------------------------------------------
    def summary(self) -> dict[str, Any]:
        """Size and state of the forest as JSON-able data: totals, and each member's summary
        (:func:`streamtree.forest_inspection.forest_summary`)."""
        return forest_inspection.forest_summary(self)

    def drift_summary(self) -> dict[str, Any]:
        """The members' change detection, summed: ``events`` merged in order and ``background``
        (the background trees being compared, or ``None``), each with its member."""
        return forest_inspection.drift_summary(self.members)

    def explain_one(self, x: Mapping[Hashable, Any]) -> dict[str, Any]:
        """Each member's probabilities for ``x`` and its share of the forest's (its weight:
        ``1 / n_trees`` each while their recent losses are equal), with the leaf it reaches;
        ``proba`` is their weighted mean."""
        check_mapping(x)
        members = []
        for i, (m, share) in enumerate(zip(self.members, self.weights(), strict=True)):
            e = m.explain_one(x)
            members.append(
                {"tree": i, "share": share, "proba": e["proba"], "leaf": e["leaf"], "depth": e["path"][-1]["depth"]}
            )
        proba = self.predict_proba_one(x)
        return {"proba": proba, "members": members}

    @property
    def tree_(self) -> dict[str, Any]:
        """Every member's tree as plain data: ``{"members": [tree_, ...]}``."""
        return {"members": [m.tree_ for m in self.members]}

    # -- persistence (streamtree.persistence) --------------------------------------------
    def capture(self) -> Capture:
        """The forest's saved form now, not yet encoded: its ``to_bytes()`` gives what this
        forest's :meth:`to_bytes` gives now, and may run in another thread while the forest learns."""
        return capture_forest(self.get_config(), self.n_examples, [m.capture() for m in self.members], self.loss_)

    def to_bytes(self) -> bytes:
        """The forest in streamtree's safe, versioned format (no pickle)."""
        return self.capture().to_bytes()

    @classmethod
    def from_bytes(cls, data: bytes) -> ProbabilityForest:
        """Read a forest written by :meth:`to_bytes`: its members as each was, one registry and
        one list of classes shared again."""
        saved = read_forest(data)
        try:
            forest = cls(**saved.config())
            members = [ProbabilityTree.from_bytes(saved.member(i)) for i in range(forest.n_trees)]
            for i, (member, made) in enumerate(zip(members, forest.members)):
                if member.get_config() != made.get_config():  # its seed, method, variant and budget
                    raise FormatError(f"Corrupt streamtree forest: member {i} was not made by the forest's config.")
            forest.members, forest.n_examples, forest.loss_ = members, saved.n_examples(), saved.loss(forest.n_trees)
        except FormatError:  # a member's, which says what is wrong with it
            raise
        except (KeyError, TypeError, ValueError, ArithmeticError) as err:  # ValueError: a ConfigError too
            raise FormatError(f"Corrupt streamtree forest: {err!r}.") from None
        first = members[0]
        for i, member in enumerate(members[1:], 1):  # one registry and one class list, as saved
            if member.classes_ != first.classes_ or member.registry.to_state() != first.registry.to_state():
                raise FormatError(f"Corrupt streamtree forest: member {i} has other classes or features than member 0.")
        forest.classes_ = list(members[0].classes_)
        forest.class_index = {c: i for i, c in enumerate(forest.classes_)}
        forest.registry = members[0].registry  # shared again, with the classes
        return forest


register_reader(FOREST, ProbabilityForest.from_bytes)
