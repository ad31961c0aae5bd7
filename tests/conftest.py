"""Shared test configuration: a derandomised hypothesis profile (CI runs are reproducible)."""

from __future__ import annotations

from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci", derandomize=True, deadline=None, max_examples=60, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("ci")
