"""What a :class:`~streamtree.forest.ProbabilityForest` reports of itself: its summary and
its members' change detection, summed from each member's own
(:func:`streamtree.inspection.summary`, :func:`streamtree.inspection.drift_summary`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from streamtree.features import FeatureRegistry
from streamtree.inspection import limit_notes
from streamtree.typing import ClassLabel

__all__ = ["drift_summary", "forest_summary"]


class Member(Protocol):
    """What these functions read of a member (a :class:`~streamtree.tree.ProbabilityTree`)."""

    max_nodes: int
    max_bytes: int | None
    max_categories: int | None

    def summary(self) -> dict[str, Any]: ...

    def drift_summary(self) -> dict[str, Any]: ...


class ShownForest(Protocol):
    """What :func:`forest_summary` reads of a forest."""

    n_trees: int
    method: str
    n_examples: int
    classes_: list[ClassLabel]

    @property
    def members(self) -> Sequence[Member]: ...

    @property
    def registry(self) -> FeatureRegistry: ...

    def weights(self) -> list[float]: ...


def forest_summary(forest: ShownForest) -> dict[str, Any]:
    """Size and state of the forest as JSON-able data: totals, and each member's summary.
    ``growth_stop`` counts the members stopped at each limit, ``other_values`` and ``notes``
    are a tree's (:meth:`~streamtree.tree.ProbabilityTree.summary`)."""
    members = [m.summary() for m in forest.members]
    drifts = [s["drift"] for s in members]
    stops: dict[str, int] = {}
    for s in members:
        if s["growth_stop"]:
            stops[s["growth_stop"]] = stops.get(s["growth_stop"], 0) + 1
    first = forest.members[0]
    limits = {"max_nodes": first.max_nodes, "max_bytes": first.max_bytes}
    return {
        "n_trees": forest.n_trees,
        "method": forest.method,
        "n_nodes": sum(s["n_nodes"] for s in members),
        "n_leaves": sum(s["n_leaves"] for s in members),
        "depth": max(s["depth"] for s in members),
        "n_examples": forest.n_examples,
        "classes": list(forest.classes_),
        "n_features": len(forest.registry.names),
        "memory_bytes": sum(s["memory_bytes"] for s in members),
        "growth_stop": stops,
        "max_bytes": first.max_bytes,
        "max_categories": first.max_categories,
        "other_values": forest.registry.overflow(),
        "notes": limit_notes(forest.registry, first.max_categories, stops, limits, forest.n_trees),
        "drift": drift_summary(forest.members),
        "weights": forest.weights(),
        "members": [
            {k: s[k] for k in ("n_nodes", "n_leaves", "depth", "memory_bytes", "growth_stop")}
            | {"n_detections": d["n_detections"], "n_swaps": d["n_swaps"]}
            for s, d in zip(members, drifts)
        ],
    }


def drift_summary(members: Sequence[Member]) -> dict[str, Any]:
    """The members' change detection, summed: ``events`` merged in order and ``background``
    (the background trees being compared, or ``None``), each with its member."""
    drifts = [m.drift_summary() for m in members]
    events = sorted(
        ({**e, "member": i} for i, d in enumerate(drifts) for e in d["events"]),
        key=lambda e: (e["at"], e["member"]),
    )
    backgrounds = [{**d["background"], "member": i} for i, d in enumerate(drifts) if d.get("background")]
    return {
        "detection": any(d["detection"] for d in drifts),
        "background": backgrounds or None,
        "n_detections": sum(d["n_detections"] for d in drifts),
        "n_swaps": sum(d["n_swaps"] for d in drifts),
        "n_dropped": sum(d["n_dropped"] for d in drifts),
        "events": events,
    }
