"""Which requests a replica forwards to the writer (the forwarding itself runs in test_cluster.py)."""

from __future__ import annotations

import pytest

from app.forwarding import _has_id, _is_write


@pytest.mark.parametrize(
    "method, path, expected",
    [
        ("POST", "/learn", True),
        ("POST", "/models/churn/learn", True),
        ("PUT", "/models/churn", True),
        ("DELETE", "/models/churn", True),
        ("POST", "/predict_proba", None),  # a write if it carries an id
        ("POST", "/models/churn/predict_proba", None),
        ("POST", "/decide", None),
        ("POST", "/models/churn/decide", None),
        ("GET", "/models/churn", False),
        ("GET", "/models", False),
        ("GET", "/models/churn/events", False),
        ("POST", "/models/churn/explain", False),
        ("GET", "/health", False),
        ("GET", "/learn", False),
        ("PUT", "/models/churn/learn", False),
    ],
)
def test_writes_are_told_from_reads(method: str, path: str, expected: bool | None) -> None:
    assert _is_write(method, path) is expected


@pytest.mark.parametrize(
    "body, expected",
    [
        (b'{"features": {"a": 1}, "id": "order-1"}', True),
        (b'{"features": {"a": 1}, "id": 7}', True),
        (b'{"features": {"a": 1}, "id": null}', False),
        (b'{"features": {"id": 1}}', False),  # a feature named id is not the prediction's id
        (b'{"features": {"a": 1}}', False),
        (b'{"features": ', False),  # malformed: the replica's own validation answers it
        (b'["id"]', False),
        # read as the writer's route reads it (app.json_route.parse_json): an escaped key is id,
        # and numbers beyond 64 bits or NaN do not hide it
        (rb'{"features": {"a": 1}, "\u0069d": "esc-1"}', True),
        (rb'{"features": {"a": 1}, "i\u0064": "esc-2"}', True),
        (rb'{"features": {"\u0069d": 1}}', False),
        (b'{"features": {"a": 123456789012345678901234567890}, "id": "big"}', True),
        (b'{"features": {"a": NaN}, "id": "nan"}', True),
        (b'{"id": "x", "id": null}', False),  # the last of two keys, as for the route
    ],
)
def test_a_prediction_with_an_id_is_a_write(body: bytes, expected: bool) -> None:
    assert _has_id(body) is expected
