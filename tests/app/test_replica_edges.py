"""A replica answers hostile requests as the writer does: a writer and a replica on a real
PostgreSQL (``streamtree serve`` processes, :func:`tests.app.test_cluster.instances`).

- a chunked body over the size limit is 413 JSON on both roles (it was 500 text on the
  replica, whose forwarding reads a write's body before any route);
- a prediction id written with an escaped key (``"\\u0069d"``) is forwarded and kept by the
  writer, so its label is learned through either instance (the replica used to keep it
  itself, and the label then got 422 ``unknown_id``).
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.app.conftest import make_stream
from tests.app.test_cluster import health, instances, learn
from tests.app.test_process import request

pytestmark = pytest.mark.slow

LIMIT = 4096


def chunked_learn(port: int, size: int) -> tuple[int, str, bytes]:
    """POST /learn with a chunked body of about ``size`` bytes: status, content type, body."""

    def chunks() -> Iterator[bytes]:
        yield b'{"events": ['
        for i in range(size // 40):
            yield b'{"features": {"a": %d}, "label": "x"},' % i
        yield b'{"features": {"a": 0}, "label": "x"}]}'

    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("POST", "/learn", body=chunks(), headers={"Content-Type": "application/json"}, encode_chunked=True)
    r = conn.getresponse()
    data = r.read()
    conn.close()
    return r.status, r.getheader("content-type", ""), data


def test_a_replica_answers_oversized_bodies_and_escaped_ids_as_the_writer(tmp_path: Path, pg_url: str) -> None:
    events = make_stream(100, seed=8)
    with instances(tmp_path, pg_url, 2, max_body_bytes=str(LIMIT)) as [(_, w), (_, r)]:
        assert health(w)["role"] == "writer" and health(r)["role"] == "replica"
        learn(w, events[:20])
        for port in (w, r):
            status, ctype, body = chunked_learn(port, 4 * LIMIT)
            assert (status, ctype) == (413, "application/json"), (port, body)
            assert json.loads(body) == {"detail": "Request body is too large."}
            status, _, body = chunked_learn(port, LIMIT // 2)  # within the limit: learned
            assert status == 200, body
        assert request(w, "GET", "/models/default")[1]["seq"] == 20 + 2 * (LIMIT // 2 // 40 + 1)

        x, y = events[60]
        for i, (predict_on, label_on) in enumerate([(r, r), (r, w), (w, r)]):
            key = f"esc-{i}"
            raw = '{"features": %s, "\\u0069d": "%s"}' % (json.dumps(x), key)
            conn = http.client.HTTPConnection("127.0.0.1", predict_on, timeout=30)
            conn.request("POST", "/predict_proba", body=raw, headers={"Content-Type": "application/json"})
            answer = conn.getresponse()
            assert answer.status == 200, answer.read()
            conn.close()
            status, out = request(label_on, "POST", "/learn", {"id": key, "label": y})
            assert status == 200 and out["learned"] == 1, (i, out)


def raw(port: int, method: str, target: str, key: str | None = None) -> tuple[int, dict[str, str], bytes]:
    """``method target`` sent as written (percent-encoding kept): status, headers, body."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    headers = {"Content-Type": "application/json"} | ({"Authorization": f"Bearer {key}"} if key else {})
    body = b'{"features": {"a": 1}, "label": "x"}' if target.endswith("learn") else b"{}"
    conn.request(method, target, body=body, headers=headers)
    r = conn.getresponse()
    out = (r.status, {k.lower(): v for k, v in r.getheaders()}, r.read())
    conn.close()
    return out


def test_a_replica_answers_bad_model_names_and_keys_as_the_writer(tmp_path: Path, pg_url: str) -> None:
    key = "k" * 20
    with instances(tmp_path, pg_url, 2, api_keys=key) as [(_, w), (_, r)]:
        assert health(r)["role"] == "replica"
        assert raw(w, "PUT", "/models/victim", key)[0] == 201
        # the replica forwarded the decoded path: DELETE /models/victim?x deleted 'victim',
        # PUT /models/made#x created 'made', and CR LF reached the forwarded request's head
        for method, target in [
            ("DELETE", "/models/victim%3Fx"),
            ("PUT", "/models/made%23x"),
            ("PUT", "/models/m%0D%0AIdempotency-Key:%20zz"),
            ("POST", "/models/%E2%82%AC/learn"),  # a 500 (UnicodeEncodeError) on the replica
            ("DELETE", "/models/%C3%A9"),
        ]:
            answers = [raw(port, method, target, key) for port in (w, r)]
            assert answers[0][0] == answers[1][0] == 422, (target, answers)
            assert answers[0][2] == answers[1][2] and b'"loc":["path","name"]' in answers[1][2], target
        names = sorted(m["name"] for m in json.loads(raw(w, "GET", "/models", key)[2])["models"])
        assert names == ["default", "victim"]
        assert raw(r, "POST", "/models/%76ictim/learn", key)[0] == 200  # an encoded letter is still the name
        status, headers, _ = raw(r, "POST", "/learn")  # no key: the writer's 401, with its challenge
        assert status == 401 and headers.get("www-authenticate") == "Bearer"

        # a model created or deleted through the replica is so there when it answers (its
        # follower's notice could come later: a read right after the 201 was 404)
        for _ in range(3):
            assert raw(r, "PUT", "/models/made", key)[0] == 201
            assert raw(r, "GET", "/models/made", key)[0] == 200
            assert raw(r, "DELETE", "/models/made", key)[0] == 204
            assert raw(r, "GET", "/models/made", key)[0] == 404
