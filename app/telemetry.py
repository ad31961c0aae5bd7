"""Prometheus metrics of the service: requests, latencies, events learned, model size.

The HTTP middleware that counts and times requests into them is :mod:`app.instrument`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any, Protocol

from prometheus_client import CollectorRegistry, Counter, Histogram, disable_created_metrics
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

__all__ = ["ClusterView", "ModelView", "Telemetry"]

disable_created_metrics()  # type: ignore[no-untyped-call]  # the *_created series only add noise to every scrape

LATENCY_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class WindowSource(Protocol):
    """The prequential metrics of a model (:class:`app.prequential.Prequential`)."""

    def recent_summary(self) -> dict[str, Any]:
        """``{"n", "log_loss", "brier", "accuracy", "ece", ...}`` over the recent window."""
        ...


class ModelView(Protocol):
    """What the model collector reads from a hosted model."""

    name: str
    unavailable: str | None  # why the model cannot be restored (None: it can)

    @property
    def prequential(self) -> WindowSource:
        """The model's prequential metrics."""
        ...

    def gauges(self) -> dict[str, float]:
        """Current size figures, e.g. ``{"nodes": 7, "leaves": 4, ...}``; empty while recovering."""
        ...


class ClusterView(Protocol):
    """What the role collector reads from the instance's place in a deployment (:class:`app.cluster.Cluster`)."""

    @property
    def role(self) -> str:
        """``"writer"`` or ``"replica"``."""
        ...

    def lags(self) -> dict[str, tuple[int, float]]:
        """Per model, ``(events, seconds)`` this instance is behind the log."""
        ...


ROLES = ("writer", "replica")

_GAUGES = {
    "nodes": "Nodes in the model's tree.",
    "leaves": "Leaves in the model's tree.",
    "depth": "Depth of the model's tree.",
    "examples": "Examples the model has learned.",
    "classes": "Distinct labels the model has seen.",
    "seq": "Last durable event sequence number.",
    "pending_ids": "Predictions waiting for a delayed label.",
    "snapshot_bytes": "Size of the newest snapshot this instance wrote (0 before its first).",
    "drift_background": "1 while a background tree is compared with the tree after a detected change.",
    "memory_bytes": "Bytes the model's arrays hold (summary memory_bytes).",
    "other_values": "Examples whose nominal value went to its feature's 'other' code, past max_categories "
    "(all features; summary other_values has them by feature).",
    "budget_stops": "Trees of the model that stopped growing rather than pass max_bytes.",
}
# the prequential metrics of the recent window (``metrics_window`` scored events); absent
# while the window is empty
_WINDOW = {
    "n": ("window_events", "Scored events in the recent prequential window."),
    "log_loss": ("log_loss", "Prequential log loss (nats) over the recent window."),
    "brier": ("brier", "Prequential Brier score over the recent window."),
    "accuracy": ("accuracy", "Prequential accuracy over the recent window."),
    "ece": ("ece", "Expected calibration error of the top-class confidence over the recent window."),
    # only for a model configured with a cost matrix
    "improved_squared_error": (
        "improved_squared_error",
        "Improved squared error (Fan et al. 2005, Eq. 3) under the model's cost matrix over the recent window.",
    ),
    "decision_cost": (
        "decision_cost",
        "Mean cost of the decisions of least expected cost under the model's cost matrix over the recent window.",
    ),
}
# read from the model's durable state, so they survive restarts and only ever grow
_COUNTERS = {
    "drift_detections": "Detected rises of the tree's error rate (concept drift).",
    "drift_swaps": "Times a background tree replaced the tree.",
}


class _ModelCollector(Collector):
    def __init__(self, models: Callable[[], Iterable[ModelView]]) -> None:
        self._models = models

    def collect(self) -> Iterator[Metric]:
        families: dict[str, GaugeMetricFamily | CounterMetricFamily] = {
            k: GaugeMetricFamily(f"streamtree_model_{k}", doc, labels=["model"]) for k, doc in _GAUGES.items()
        }
        families |= {
            k: CounterMetricFamily(f"streamtree_model_{k}", doc, labels=["model"]) for k, doc in _COUNTERS.items()
        }
        window = {
            k: GaugeMetricFamily(f"streamtree_model_{name}", doc, labels=["model"])
            for k, (name, doc) in _WINDOW.items()
        }
        unavailable = GaugeMetricFamily(
            "streamtree_model_unavailable",
            "1 while the model cannot be restored from "
            "the store (it answers 503 saying why; /health lists the reason).",
            labels=["model"],
        )
        for m in self._models():
            unavailable.add_metric([m.name], float(m.unavailable is not None))
            gauges = m.gauges()
            for k, v in gauges.items():
                if k in families:
                    families[k].add_metric([m.name], v)
            if gauges:  # not while recovering
                for k, v in m.prequential.recent_summary().items():
                    if k in window and v is not None:
                        window[k].add_metric([m.name], v)
        yield from families.values()
        yield from window.values()
        yield unavailable


class _ClusterCollector(Collector):
    def __init__(self, cluster: ClusterView) -> None:
        self._cluster = cluster

    def collect(self) -> Iterator[Metric]:
        role = GaugeMetricFamily(
            "streamtree_role",
            "1 for this instance's role in its deployment (a single instance on SQLite is the writer).",
            labels=["role"],
        )
        current = self._cluster.role
        for r in ROLES:
            role.add_metric([r], float(r == current))
        events = GaugeMetricFamily(
            "streamtree_replica_lag_events",
            "Events of the model committed to the log and not yet applied on this instance (0 on the writer).",
            labels=["model"],
        )
        seconds = GaugeMetricFamily(
            "streamtree_replica_lag_seconds",
            "Seconds since the oldest committed event not yet applied on this instance was noticed (0 when caught up).",
            labels=["model"],
        )
        for name, (n, t) in self._cluster.lags().items():
            events.add_metric([name], n)
            seconds.add_metric([name], t)
        yield from (role, events, seconds)


class Telemetry:
    """The service's Prometheus registry and metrics (one per app, so tests stay separate)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter(
            "streamtree_http_requests",
            "HTTP requests by route template and status.",
            ["method", "route", "status"],
            registry=r,
        )
        self.latency = Histogram(
            "streamtree_http_request_duration_seconds",
            "HTTP request latency, from first byte to response sent.",
            ["method", "route"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.learned = Counter("streamtree_events_learned", "Events learned and durably logged.", ["model"], registry=r)
        self.predicted = Counter("streamtree_instances_predicted", "Instances predicted.", ["model"], registry=r)
        self.commit_seconds = Histogram(
            "streamtree_commit_duration_seconds",
            "Time to write and fsync one group commit of events.",
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.commit_events = Histogram(
            "streamtree_commit_group_events",
            "Events per group commit.",
            buckets=(1, 2, 4, 8, 16, 64, 256, 1024, 4096, 16384),
            registry=r,
        )
        self.snapshots = Counter("streamtree_snapshots", "Snapshots written.", ["model"], registry=r)

    def watch_models(self, models: Callable[[], Iterable[ModelView]]) -> None:
        """Report the size of every model returned by ``models()`` at each scrape."""
        self.registry.register(_ModelCollector(models))

    def watch_cluster(self, cluster: ClusterView) -> None:
        """Report the instance's role and each model's replication lag at each scrape."""
        self.registry.register(_ClusterCollector(cluster))

    def forget_model(self, name: str) -> None:
        """Drop a deleted model's labelled series."""
        for metric in (self.learned, self.predicted, self.snapshots):
            try:
                metric.remove(name)
            except KeyError:
                pass
