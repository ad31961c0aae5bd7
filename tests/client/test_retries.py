"""Retries never learn twice, what is retried and what is not, the typed errors with the
service's JSON, and bad arguments refused before any request."""

from __future__ import annotations

import email.utils
import time

import httpx
import numpy as np
import pandas as pd
import pytest

from streamtree.client import (
    Client,
    ConnectionFailed,
    InvalidRequest,
    NotFound,
    RemoteModel,
    ServiceError,
    TooManyRequests,
    Unauthorized,
    Unavailable,
    UnexpectedAnswer,
)
from streamtree.client.errors import error_for, format_loc
from streamtree.client.retry import retry_after, wait
from tests.app.test_process import free_port
from tests.client.conftest import TOKEN, AnswerFirst, LoseAnswers, Service, client_with, fresh_name


def _model(service: Service, transport: httpx.BaseTransport, **kwargs: float) -> RemoteModel:
    m = client_with(service, transport, **kwargs).model(fresh_name())
    m.create()
    return m


@pytest.mark.parametrize("error", [httpx.ReadError, httpx.ReadTimeout, httpx.RemoteProtocolError])
def test_a_lost_answer_is_retried_with_the_same_key_and_learns_once(service: Service, error: type) -> None:
    lose = LoseAnswers("POST", n=2, error=error)
    m = _model(service, lose)
    assert m.learn_one({"a": 1.0}, "x") == {"learned": 1, "seq": 1}
    posts = [s for s in lose.seen if s[0] == "POST"]
    assert len(posts) == 3 and len({key for _, _, key, _ in posts}) == 1 and posts[0][2]
    assert m.info()["seq"] == 1  # the service processed all three; it learned one
    assert [e["features"] for e in m.events()] == [{"a": 1.0}]


def test_every_learn_path_is_retried_once_learned(service: Service) -> None:
    lose = LoseAnswers("POST", n=0)
    m = _model(service, lose)
    steps = [
        lambda: m.learn_many(pd.DataFrame({"a": [1.0, 2.0, 3.0]}), ["x", "y", "x"], batch_size=2),
        lambda: m.predict_proba_one({"a": 1.0}, id="p-1"),
        lambda: m.label("p-1", "y"),
        lambda: m.predict_proba_one({"a": 2.0}, id="p-2"),
        lambda: m.label_many(["p-2"], ["x"]),
        lambda: m.learn_batch([{"features": {"a": 4.0}, "label": "y"}]),
        lambda: m.predict_proba_many([{"a": 5.0}, {"a": 6.0}], ids=["p-3", "p-4"]),
        lambda: m.decide_many([{"a": 7.0}], {"go": {"x": 0, "y": 1}}, ids=["p-5"]),
        lambda: m.label_many(["p-3", "p-4", "p-5"], ["x", "y", "x"]),
    ]
    for step in steps:
        lose.n = 1  # the next POST's answer is lost
        step()
    with m.writer(batch_size=2) as w:
        lose.n = 1
        for i in range(3):
            w.learn_one({"a": float(i)}, "x")
    assert w.learned == 3
    assert m.info()["seq"] == 3 + 1 + 1 + 1 + 3 + 3
    logged = [(e["features"], e["label"]) for e in m.events()]
    assert [y for _, y in logged] == ["x", "y", "x", "y", "x", "y", "x", "y", "x", "x", "x", "x"]
    assert [x for x, _ in logged[6:9]] == [{"a": 5.0}, {"a": 6.0}, {"a": 7.0}]  # the ids' features


def test_a_delete_whose_answer_was_lost_is_done(service: Service) -> None:
    lose = LoseAnswers("DELETE", n=1)
    m = _model(service, lose)
    m.delete()
    assert [status for method, _, _, status in lose.seen if method == "DELETE"] == [204, 404]
    with pytest.raises(NotFound):
        m.info()


def test_without_the_key_a_lost_answer_would_learn_twice(service: Service) -> None:
    """The control of the test above: the same loss, retried by hand without a key, learns twice."""
    m = _model(service, httpx.HTTPTransport())
    body = {"features": {"a": 1.0}, "label": "x"}
    for _ in range(2):
        httpx.post(f"{service.url}/models/{m.name}/learn", json=body, headers={"Authorization": f"Bearer {TOKEN}"})
    assert m.info()["seq"] == 2


@pytest.mark.parametrize("status", [408, 429, 502, 503, 504])
def test_not_now_answers_are_retried(service: Service, status: int) -> None:
    first = AnswerFirst(status, n=2, headers={"Retry-After": "0"})
    m = _model(service, first)
    first.n, first.requests = 2, 0
    assert m.learn_one({"a": 1.0}, "x")["seq"] == 1
    assert first.requests == 3
    first.n, first.requests = 2, 0
    assert m.predict_proba_one({"a": 1.0}) == {"x": 1.0}
    assert first.requests == 3


def test_retries_run_out(service: Service) -> None:
    busy = AnswerFirst(503, n=100)
    with pytest.raises(Unavailable) as exc:
        client_with(service, busy, retries=2).health()
    assert busy.requests == 3 and exc.value.status == 503 and exc.value.message == "not now (test)"
    full = AnswerFirst(429, n=100, headers={"Retry-After": "0"})
    with pytest.raises(TooManyRequests):
        client_with(service, full, retries=1).health()
    assert full.requests == 2


@pytest.mark.parametrize("status", [400, 401, 403, 404, 409, 422, 500])
def test_other_errors_are_not_retried(service: Service, status: int) -> None:
    refuse = AnswerFirst(status, n=100)
    with pytest.raises(ServiceError) as exc:
        client_with(service, refuse).health()
    assert refuse.requests == 1 and exc.value.status == status


def test_a_service_that_is_down_is_a_connection_failure() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    with Client(url, retries=2, backoff=0.01) as c, pytest.raises(ConnectionFailed) as exc:
        c.model("m").learn_one({"a": 1.0}, "x")
    assert url in str(exc.value) and exc.value.attempts == 3 and "POST /models/m/learn" in str(exc.value)


def test_typed_errors_carry_the_services_json(client: Client, service: Service) -> None:
    with pytest.raises(NotFound) as missing:
        client.model("no-such-model").predict_proba_one({"a": 1.0})
    assert missing.value.body == {"detail": "Model not found."}
    assert str(missing.value) == "404 POST /models/no-such-model/predict_proba: Model not found."
    m = client.model(fresh_name())
    m.create()
    m.learn_one({"a": 1.0}, "x")
    with pytest.raises(InvalidRequest) as bad:
        m.learn_many([{"a": 1.0}, {"a": 2.0}, {"a": 3.0}, {"age": "y" * 300}], ["x", "x", "x", "x"])
    e = bad.value
    assert e.status == 422 and e.loc == ("body", "events", 3, "features", "age")
    assert str(e) == (
        "422 body.events[3].features.age: String should have at most 256 characters"
        " (row 3 of X; its request is the first; e.unsent holds the rest)"
    )
    assert e.body["detail"][0]["type"] == "string_too_long"
    assert m.info()["seq"] == 1  # the refused request learned nothing
    with pytest.raises(Unauthorized) as anonymous:
        Client(service.url).model(m.name).learn_one({"a": 1.0}, "x")
    assert anonymous.value.status == 401
    with pytest.raises(Unauthorized) as wrong:
        Client(service.url, token="not-the-key-0123456789").model(m.name).learn_one({"a": 1.0}, "x")
    assert wrong.value.status == 403 and wrong.value.message == "Invalid API key."
    assert Client(service.url).model(m.name).predict_proba_one({"a": 1.0}) == {"x": 1.0}  # reads are open


def test_error_lines() -> None:
    assert format_loc(("body", "events", 3, "features", "age")) == "body.events[3].features.age"
    two = error_for(422, b'{"detail":[{"loc":["body","a"],"msg":"m1","type":"t"},{"loc":["body"],"msg":"m2"}]}')
    assert str(two) == "422 body.a: m1 (and 1 more)"
    text = error_for(502, b"<html>bad gateway</html>", "GET /health")
    assert isinstance(text, Unavailable) and str(text) == "502 GET /health: <html>bad gateway</html>"


def test_retry_waits_grow_and_honour_retry_after() -> None:
    assert 0.1 <= wait(0, 0.2) < 0.2 and 0.4 <= wait(2, 0.2) < 0.8
    assert wait(0, 0.2, "3") == 3.0 and wait(10, 0.2) == 60.0
    soon = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 25 < retry_after(soon) <= 30
    assert retry_after(None) is None and retry_after("soon") is None


INF = float("inf")


class Big(int):
    """An int subclass (as an IntEnum is)."""


class Count(httpx.BaseTransport):
    def __init__(self) -> None:
        self.requests = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.requests += 1
        return httpx.Response(200, json={})


@pytest.mark.parametrize(
    ("call", "error", "names"),
    [
        (lambda m: m.learn_many([{"a": 1}, {"a": 2}], ["x"]), ValueError, "X and y"),
        (lambda m: m.learn_many(np.ones((2, 2)), ["x", "y"]), ValueError, "columns"),
        (lambda m: m.learn_many(np.ones((2, 2)), ["x", "y"], columns=["a"]), ValueError, "columns"),
        (lambda m: m.learn_one({"a": float("inf")}, "x"), ValueError, "x['a']"),
        (lambda m: m.learn_one({"a": [1, 2]}, "x"), TypeError, "x['a']"),
        (lambda m: m.learn_one({1: 2.0}, "x"), TypeError, "feature names"),
        (lambda m: m.learn_one([1.0], "x"), TypeError, "x:"),
        (lambda m: m.learn_one({"a": 1.0}, 1.5), TypeError, "y:"),
        (lambda m: m.learn_many([{"a": 1.0}], [None]), TypeError, "y[0]"),
        (lambda m: m.predict_proba_one({"a": 1.0}, id=1.5), TypeError, "id:"),
        (lambda m: m.predict_proba_many([{"a": 1.0}], ids=["a", "b"]), ValueError, "X and ids"),
        (lambda m: m.label_many(["a"], ["x", "y"]), ValueError, "ids and ys"),
        (lambda m: m.decide({"a": 1.0}, {"go": 3}), TypeError, "costs['go']"),
        (lambda m: m.decide({"a": 1.0}, {"go": {"x": "abc"}}), TypeError, "costs['go']['x']: a cost is a number"),
        (lambda m: m.learn_one({"a": 1.0}, 2**70), ValueError, "y: an integer label is within 64 bits"),
        (lambda m: m.predict_proba_one({"a": 1.0}, id=2**70), ValueError, "id: an integer id is within 64 bits"),
        (lambda m: m.label_many([1, -(2**64)], ["x", "y"]), ValueError, "ids[1]: an integer id"),
        (lambda m: m.create(config=[1]), TypeError, "config"),
        (lambda m: m.create({"max_depth": float("nan")}), ValueError, "config['max_depth']: numbers are finite"),
        (lambda m: m.create({"half_life": float("inf")}), ValueError, "config['half_life']: numbers are finite"),
        (lambda m: m.learn_batch([{"features": {"a": -INF}, "label": "x"}]), ValueError, "events[0]['features']['a']"),
        (lambda m: m.predict_batch([{"a": 1.0}, {"a": INF}]), ValueError, "instances[1]['a']: numbers are finite"),
        (lambda m: m.learn_one({"a": 2**63}, "x"), ValueError, "x['a']: integer feature values are within 64 bits"),
        (lambda m: m.predict_proba_one({"a": 2**70}), ValueError, "x['a']: integer feature values are within"),
        (lambda m: m.explain({"a": np.uint64(2**64 - 1)}), ValueError, "x['a']: integer feature values are within"),
        (lambda m: m.predict_proba_many([{"a": 1}, {"b": -(2**64)}]), ValueError, "X[1]['b']: integer feature"),
        (lambda m: m.learn_one({"a": 1.0}, np.uint64(2**64 - 1)), ValueError, "y: an integer label is within 64"),
        (lambda m: m.learn_one({"a": 1.0}, Big(2**70)), ValueError, "y: an integer label is within 64 bits"),
        (lambda m: m.predict_proba_one({"a": 1.0}, id=np.uint64(2**63)), ValueError, "id: an integer id is within"),
        (lambda m: m.learn_many({"a": [1.0]}, ["x"]), TypeError, "X:"),
        (lambda m: m.writer(batch_size=0), ValueError, "batch_size"),
        (lambda m: m.writer(flush_seconds=0), ValueError, "flush_seconds"),
        (lambda m: m.writer(flush_seconds=INF), ValueError, "flush_seconds: seconds > 0 and at most 1e"),
        (lambda m: m.writer(flush_seconds=float("nan")), ValueError, "flush_seconds"),
    ],
)
def test_bad_arguments_are_refused_before_any_request(call: object, error: type, names: str) -> None:
    count = Count()
    m = Client(transport=count).model("m")
    with pytest.raises(error, match=names.replace("[", r"\[").replace("]", r"\]")):
        call(m)  # type: ignore[operator]
    assert count.requests == 0


@pytest.mark.parametrize(
    ("kwargs", "names"),
    [
        ({"url": "127.0.0.1:8000"}, "url"),
        ({"token": ""}, "token"),
        ({"retries": -1}, "retries"),
        ({"backoff": -1}, "backoff"),
        ({"timeout": 0}, "timeout"),
        ({"timeout": float("inf")}, "timeout: seconds > 0 and at most 1e.06 .None for no timeout., got inf"),
        ({"timeout": float("nan")}, "timeout"),
        ({"timeout": 1e10}, "timeout"),
        ({"url": "http://host:abc"}, "url: .* got 'http://host:abc' .Invalid port"),
        ({"url": "http://[::1"}, "url"),
        ({"url": "http://host:99999"}, "url: .* a port in 1..65535, got 'http://host:99999'"),
        ({"url": "http://a b/"}, "url: .* no spaces"),
    ],
)
def test_bad_client_settings_are_refused(kwargs: dict[str, object], names: str) -> None:
    with pytest.raises(ValueError, match=names):
        Client(**kwargs)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="name"):
        Client().model("no spaces")


@pytest.mark.parametrize(
    ("status", "body", "says"),
    [
        (200, b"<html>sign in</html>", "not a JSON object"),
        (204, b"", "an empty answer"),
        (200, b"[1, 2]", "not a JSON object"),
        (200, b'{"foo": 1}', "has no 'probabilities'"),
    ],
)
def test_an_answer_that_is_no_services_is_an_unexpected_answer(status: int, body: bytes, says: str) -> None:
    # a --url pointing at a web page or another API: a JSONDecodeError, KeyError or TypeError before
    page = httpx.MockTransport(lambda request: httpx.Response(status, content=body))
    m = Client(transport=page).model("m")
    for call in (lambda: m.predict_proba_one({"a": 1.0}), lambda: m.predict_batch([{"a": 1.0}])):
        with pytest.raises(UnexpectedAnswer, match=says) as err:
            call()
        assert isinstance(err.value, ServiceError) and "streamtree service" in str(err.value)
    with pytest.raises(UnexpectedAnswer, match="has no 'learned'" if body.startswith(b"{") else "JSON object"):
        m.learn_many([{"a": 1.0}], ["x"])
    # the calls that read send()'s answer themselves (a create, a batch, a prediction kept by id)
    for call in (
        lambda: m.create()["seq"],
        lambda: m.learn_batch([{"features": {"a": 1.0}, "label": "x"}])["learned"],
        lambda: m.predict_proba_one({"a": 1.0}, id="i"),
    ):
        with pytest.raises(UnexpectedAnswer):
            call()
