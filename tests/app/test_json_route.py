"""JSON bodies: parsed by pydantic-core, and refused naming the field when a string is not valid Unicode."""

from __future__ import annotations

import warnings
from typing import Any

import pytest

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

from app.json_route import SURROGATE, surrogate_path

LONE = "\\ud800"  # JSON text of a lone (high) surrogate
LOW = "\\udfff"


def post(client: TestClient, method: str, path: str, text: str) -> Any:
    return client.request(method, path, content=text.encode(), headers={"content-type": "application/json"})


def refused_at(r: Any, *loc: str | int) -> None:
    assert r.status_code == 422, r.text
    assert r.headers["content-type"] == "application/json"
    assert r.json() == {"detail": [{"type": "string_unicode", "loc": ["body", *loc], "msg": SURROGATE}]}


@pytest.mark.parametrize(
    ("method", "path", "text", "loc"),
    [
        ("POST", "/learn", '{"features": {"%s": 1}, "label": "a"}' % LONE, ("features", "?")),
        ("POST", "/learn", '{"features": {"a": "x%s"}, "label": "a"}' % LONE, ("features", "a")),
        ("POST", "/learn", '{"features": {"a": 1}, "label": "%s"}' % LOW, ("label",)),
        (
            "POST",
            "/learn",
            '{"events": [{"features": {"a": 1}, "label": "y"}, {"id": "%s", "label": "y"}]}' % LONE,
            ("events", 1, "id"),
        ),
        ("POST", "/predict_proba", '{"features": {"a": "%s"}, "id": "q"}' % LONE, ("features", "a")),
        ("POST", "/predict_proba", '{"features": {"a": 1}, "id": "%s"}' % LONE, ("id",)),
        ("POST", "/predict_proba", '{"instances": [{"a": 1}, {"b": ["%s"]}]}' % LONE, ("instances", 1, "b", 0)),
        ("POST", "/models/default/explain", '{"features": {"a": "%s"}}' % LONE, ("features", "a")),
        ("PUT", "/models/m", '{"nominal_features": ["ok", "%s"]}' % LONE, ("nominal_features", 1)),
        ("PUT", "/models/m", '{"smoothing": "%s"}' % LONE, ("smoothing",)),
    ],
)
def test_a_lone_surrogate_anywhere_is_a_422_naming_the_field_and_changes_nothing(
    client: TestClient, method: str, path: str, text: str, loc: tuple[str | int, ...]
) -> None:
    assert client.post("/learn", json={"features": {"a": 1.0}, "label": "y"}).json()["seq"] == 1
    before = client.get("/models").json()
    refused_at(post(client, method, path, text), *loc)
    assert client.get("/models").json() == before  # nothing learned, created or rebuilt
    assert client.post("/learn", json={"features": {"a": 2.0}, "label": "y"}).json()["seq"] == 2


def test_valid_surrogate_pairs_and_escaped_backslashes_are_text(client: TestClient) -> None:
    r = post(client, "POST", "/learn", '{"features": {"\\ud83d\\ude00": "\\\\ud800"}, "label": "\\ud83d\\ude00"}')
    assert r.status_code == 200, r.text
    assert client.post("/predict_proba", json={"features": {}}).json()["probabilities"] == {"\N{GRINNING FACE}": 1.0}


def test_other_broken_json_is_still_a_decode_error_at_its_position(client: TestClient) -> None:
    r = post(client, "POST", "/learn", '{"features": {"a": "\\u12"}, "label": "a"}')
    assert r.status_code == 422 and r.json()["detail"][0]["type"] == "json_invalid"


def test_surrogate_path_names_keys_by_their_printable_part() -> None:
    assert surrogate_path({"a": {"\ud800b": 1}}) == ("a", "?b")
    assert surrogate_path([["x"], ["y", "\udc00"]]) == (1, 1)
    assert surrogate_path({"a": "\U0001f600"}) is None


@pytest.mark.parametrize("number", ["123456789012345678901234567890", "-9223372036854775809", "1e400"])
def test_a_number_no_float_holds_exactly_is_refused_naming_its_field(client: TestClient, number: str) -> None:
    # The body parser keeps an integer exact and reads 1e400 as infinity, so the checks refuse
    # them by name; a parser that turned the integer into a float (orjson does) would learn it
    # (docs/decisions/batch-ingestion.md, "Not adopted").
    for text, loc in [
        ('{"features": {"a": %s}, "label": "y"}' % number, ["body", "features", "a"]),
        (
            '{"events": [{"features": {"a": 1}, "label": "y"}, {"features": {"a": %s}, "label": "y"}]}' % number,
            ["body", "events", 1, "features", "a"],
        ),
    ]:
        r = post(client, "POST", "/learn", text)
        assert r.status_code == 422, r.text
        assert r.json()["detail"][0]["loc"] == loc
    assert client.post("/learn", json={"features": {"a": 2.0}, "label": "y"}).json()["seq"] == 1  # nothing learned


@pytest.mark.parametrize(
    "content_type", [None, "text/plain", "application/x-www-form-urlencoded", "multipart/form-data"]
)
@pytest.mark.parametrize(("method", "path"), [("POST", "/learn"), ("POST", "/predict_proba"), ("PUT", "/models/m")])
def test_a_body_that_is_not_said_to_be_json_is_refused_naming_the_content_type(
    client: TestClient, content_type: str | None, method: str, path: str
) -> None:
    # refused all along (a page of another site can send these, not JSON), but as "Input should
    # be a valid dictionary": `curl -d` sends a JSON object as a form
    headers = {} if content_type is None else {"content-type": content_type}
    r = client.request(method, path, content=b'{"features": {"a": 1}, "label": "x"}', headers=headers)
    assert r.status_code == 422, r.text
    shown = "no Content-Type" if content_type is None else repr(content_type)
    assert r.json() == {
        "detail": [
            {
                "type": "content_type",
                "loc": ["body"],
                "msg": f"Expected a JSON body (Content-Type: application/json); got {shown}",
            }
        ]
    }
    if path == "/learn":  # a JSON type with parameters, or a +json one, is JSON
        for json_type in ("application/json; charset=utf-8", "application/vnd.api+json"):
            body = b'{"features": {"a": 1}, "label": "x"}'
            assert client.request(method, path, content=body, headers={"content-type": json_type}).status_code == 200
