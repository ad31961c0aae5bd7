"""The blocking client: :class:`Client` (one keep-alive connection pool to a service) and
:class:`RemoteModel` (one of its models, with river's classifier API)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Hashable, Iterable, Iterator, Mapping
from typing import Any

import httpx

from streamtree.client import bodies, encoding
from streamtree.client.encoding import Labels, clean_features, costs_body, dumps
from streamtree.client.errors import Conflict, ConnectionFailed, ServiceError, answer, error_for
from streamtree.client.handle import Handle
from streamtree.client.retry import NOT_SENT, RETRY_STATUSES, Deadline, check_policy, wait
from streamtree.client.writer import Writer

__all__ = ["Client", "RemoteModel", "base_url", "client_headers"]

DEFAULT_URL = "http://127.0.0.1:8000"


def base_url(url: str) -> str:
    """``url`` without a trailing slash; a ``ValueError`` unless it is an http(s) URL."""
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise ValueError(f"url: an http:// or https:// URL, got {url!r}")
    try:
        parsed = httpx.URL(url)
        port = parsed.port  # httpx takes ports past 65535 and hosts with spaces, sockets do not
    except httpx.InvalidURL as e:
        raise ValueError(f"url: an http:// or https:// URL, got {url!r} ({e})") from None
    if not parsed.host or any(c.isspace() for c in url) or (port is not None and not 0 < port < 65536):
        raise ValueError(f"url: an http:// or https:// URL with a host, no spaces and a port in 1..65535, got {url!r}")
    return url.rstrip("/")


def client_headers(token: str | None) -> dict[str, str]:
    """The headers of every request: JSON, and the API key as the service takes it (a bearer token)."""
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if token is not None:
        if not isinstance(token, str) or not token.strip():
            raise ValueError(f"token: a non-empty API key string, got {type(token).__name__}")
        key = token.strip()
        bad = next(((i, c) for i, c in enumerate(key) if not "!" <= c <= "~"), None)
        if bad is not None:  # the key itself is not shown: it is a secret
            i, c = bad
            kind = "a line break" if c in "\r\n" else "a space" if c.isspace() else f"the character U+{ord(c):04X}"
            raise ValueError(
                f"token: an API key is printable ASCII without spaces or line breaks; the one given has {kind} "
                f"at position {i + 1} (of {len(key)})"
            )
        headers["Authorization"] = f"Bearer {key}"
    return headers


class Client(Handle):
    """A connection to a streamtree service.

    Parameters
    ----------
    url
        The service's base URL.
    token
        An API key of the service (sent as ``Authorization: Bearer <token>``), if it has keys.
    timeout
        Seconds an attempt may take, until its answer is read whole (None: no limit); an
        attempt past it is a timeout, retried as one.
    retries
        How many times a request is sent again after a connection error, a timeout, or an
        answer of 408, 429, 502, 503 or 504 (a learn with the same ``Idempotency-Key``).
    backoff
        The first retry's wait in seconds; each next one doubles it, with jitter, and an
        answer's ``Retry-After`` is a floor.
    transport
        An ``httpx.BaseTransport`` to send through instead of the network (tests, proxies).
    """

    def __init__(
        self,
        url: str = DEFAULT_URL,
        token: str | None = None,
        timeout: float | None = 30.0,
        retries: int = 5,
        backoff: float = 0.2,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.url = base_url(url)
        check_policy(timeout, retries, backoff)
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self._http = httpx.Client(
            base_url=self.url, headers=client_headers(token), timeout=timeout, transport=transport
        )

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connections."""
        self._http.close()

    def __repr__(self) -> str:
        return f"Client({self.url!r})"

    def _remade_by(self) -> str:
        return f"Client({self.url!r}, token=...)"

    def send(
        self,
        method: str,
        path: str,
        body: Any = None,
        key: str | None = None,
        params: Mapping[str, Any] | None = None,
        lost_ok: int | None = None,
        after: str | None = None,
    ) -> httpx.Response:
        """Send a request, retrying as the client's policy says; the final 2xx answer.

        ``body`` is encoded as JSON (bytes are sent as they are); ``key`` is sent as the
        ``Idempotency-Key`` of every attempt, and ``after`` as its ``Idempotency-After`` (the
        key of the request it follows). An answer of status ``lost_ok`` is returned, not raised, when an earlier attempt's
        answer was lost (it may have been processed): the caller knows what it means.

        Raises
        ------
        ServiceError
            Its subclass for the status of an error answer (after the retries for 408, 429,
            502, 503 and 504).
        ConnectionFailed
            No answer after the retries.
        """
        content = body if body is None or type(body) is bytes else dumps(body)
        headers = None if key is None else {"Idempotency-Key": key}
        if after is not None:
            headers = (headers or {}) | {"Idempotency-After": after}
        attempt = 0
        lost = False
        while True:
            try:
                r = self._attempt(
                    self._http.build_request(method, path, content=content, headers=headers, params=params)
                )
            except httpx.TransportError as e:
                lost = lost or not isinstance(e, NOT_SENT)
                if attempt >= self.retries:
                    raise ConnectionFailed(self.url, f"{method} {path}", attempt + 1, e) from e
                time.sleep(wait(attempt, self.backoff))
            else:
                status = r.status_code
                if status < 300 or (status == lost_ok and lost):
                    return r
                if status not in RETRY_STATUSES or attempt >= self.retries:
                    raise error_for(status, r.content, f"{method} {path}")
                time.sleep(wait(attempt, self.backoff, r.headers.get("retry-after")))
            attempt += 1

    def _attempt(self, request: httpx.Request) -> httpx.Response:
        """Send ``request`` once and read its answer whole, within the client's timeout: a
        read that ends past it raises ``httpx.ReadTimeout`` (a server that drips its answer
        would otherwise hold the call for good, each read well within the timeout)."""
        started = time.monotonic()
        r = self._http.send(request, stream=True)
        try:
            if self.timeout is not None and isinstance(r.stream, httpx.SyncByteStream):
                r.stream = Deadline(r.stream, started + self.timeout, self.timeout, request)
            r.read()
        finally:
            r.close()
        return r

    def call(self, method: str, path: str, body: Any = None, key: str | None = None, **params: Any) -> Any:
        """:meth:`send`, and the answer's JSON object (:class:`~streamtree.client.errors.UnexpectedAnswer`
        for anything else: the URL is not a streamtree service's)."""
        r = self.send(method, path, body, key, params or None)
        return answer(r)

    def model(self, name: str) -> RemoteModel:
        """The service's model ``name`` (nothing is sent: :meth:`RemoteModel.create` makes it)."""
        return RemoteModel(self, name)

    def models(self) -> list[dict[str, Any]]:
        """Every model of the service: ``{"name", "config", "summary", "seq"}`` each."""
        return list(self.call("GET", "/models")["models"])

    def health(self) -> dict[str, Any]:
        """The service's ``/health``: ``{"status", "role", "seq": {model: seq}}``."""
        return self.call("GET", "/health")


class RemoteModel(Handle):
    """A model of a streamtree service, with river's classifier API.

    ``learn_one`` and ``predict_proba_one`` are river's, so a remote model goes where a
    river classifier goes (``evaluate.progressive_val_score`` included). Probabilities are
    keyed by the labels as learned (``True``, not the JSON key ``"true"``). Every learn
    request carries an ``Idempotency-Key`` made for it and kept over its retries.
    """

    _supervised = True  # river: learn_one takes a label

    def __init__(self, client: Client, name: str) -> None:
        self.client = client
        self.name = bodies.check_name(name)
        self.labels = Labels()
        self._paths = bodies.Paths(name)

    def __repr__(self) -> str:
        return f"RemoteModel({self.client.url!r}, {self.name!r})"

    def _remade_by(self) -> str:
        return f"Client({self.client.url!r}, token=...).model({self.name!r})"

    # -- the model ----------------------------------------------------------------------------
    def create(self, config: Mapping[str, Any] | None = None, exist_ok: bool = True) -> dict[str, Any]:
        """Create the model with ``config`` (the library's parameters; None: its defaults);
        its ``{"name", "config", "summary", "seq"}``.

        Raises
        ------
        Conflict
            It exists with another config, or (``exist_ok=False``) at all, which includes a
            model made by an attempt whose answer was lost.
        """
        if config is not None and not isinstance(config, Mapping):
            raise TypeError(f"config: a dict of model parameters, not {type(config).__name__}")
        r = self.client.send("PUT", self._paths.model, dumps(dict(config or {}), "config"))
        if r.status_code == 200 and not exist_ok:
            raise Conflict(
                200, {"detail": "The model exists already (create with exist_ok=False)."}, f"PUT {r.url.path}"
            )
        return answer(r)

    def delete(self) -> None:
        """Delete the model, its event log and snapshots (a 404 after a lost answer: the
        lost attempt deleted it)."""
        self.client.send("DELETE", self._paths.model, lost_ok=404)
        self.labels.clear()

    def info(self) -> dict[str, Any]:
        """``{"name", "config", "summary", "seq"}``."""
        return self.client.call("GET", self._paths.model)

    def summary(self) -> dict[str, Any]:
        """The library's summary of the model (nodes, depth, classes, drift...)."""
        return dict(self.info()["summary"])

    def metrics(self) -> dict[str, Any]:
        """The service's prequential metrics of the model (``all`` and ``recent``)."""
        return self.client.call("GET", self._paths.metrics)

    def explain(self, x: Mapping[str, Any]) -> dict[str, Any]:
        """The path ``x`` takes through the tree and how each node shapes its probabilities."""
        return self.client.call("POST", self._paths.explain, {"features": clean_features(x)})

    def events(self, after: int = 0, page: int = 1000) -> Iterator[dict[str, Any]]:
        """The logged events with ``seq > after``, oldest first: ``{"seq", "features", "label"}``,
        fetched ``page`` at a time."""
        while True:
            got = self.client.call("GET", self._paths.events, after=after, limit=page)["events"]
            if not got:
                return
            yield from got
            after = got[-1]["seq"]

    # -- learning -----------------------------------------------------------------------------
    def learn_batch(
        self, events: list[dict[str, Any]] | bytes, key: str | None = None, after: str | None = None
    ) -> dict[str, Any]:
        """Post prepared events (``{"features", "label", "id"}`` dicts, as the service takes
        them, or the JSON bytes of that list) as one batch with ``Idempotency-Key`` ``key`` (a
        new one if None); the service's ``{"learned", "seq"}``. With ``after`` (the key of an
        earlier batch), the service learns this batch only after that one (409
        :class:`Conflict` if that one was not learned), so two batches can be in flight and
        still be learned in the order sent."""
        body = bodies.events_body(events)
        r = self.client.send("POST", self._paths.learn, body, key or uuid.uuid4().hex, after=after)
        return answer(r)

    def learn_one(self, x: Mapping[str, Any], y: Hashable, id: str | int | None = None) -> dict[str, Any]:
        """Learn one event; the service's ``{"learned", "seq"}``. With ``id``, the prediction
        made under that id is settled by this event (the features it kept are dropped)."""
        body = bodies.encoded_event(x, y, id, self.labels)
        return self.client.call("POST", self._paths.learn, body, uuid.uuid4().hex)

    def learn_many(
        self, X: Any, y: Any, columns: Iterable[str] | None = None, batch_size: int = bodies.BATCH
    ) -> dict[str, Any]:
        """Learn the rows of ``X`` (a DataFrame, a list of dicts, or a 2-D array with
        ``columns``) with the labels ``y``, in requests of ``batch_size`` events, in order;
        ``{"learned", "seq"}`` over them all. Should a request fail, the ones before it are
        learned, and its error says so: ``e.learned``, ``e.seq``, ``e.row`` (the row of ``X``
        a refusal names) and ``e.unsent``, the events not acknowledged as
        :class:`~streamtree.client.bodies.UnsentBatch` es, each with the ``Idempotency-Key`` to
        send it again under (``learn_batch(b.events, b.key)``: learned once, also when the
        failed request was learned and its answer lost)."""
        size = bodies.check_batch_size(batch_size)
        events = bodies.encoded_events(X, y, columns, self.labels)
        parts = bodies.chunks(events, size)
        keys = [bodies.new_key() for _ in parts]
        learned, seq = 0, 0
        for n, chunk in enumerate(parts):
            if chunk:
                try:
                    out = self.post_events(chunk, keys[n])
                except (ServiceError, ConnectionFailed) as e:
                    e.unsent = bodies.unsent_batches(parts[n:], keys[n:], 1)
                    bodies.note_failure(e, n * size, len(chunk), "events", learned, seq)
                    raise
                learned, seq = learned + out["learned"], out["seq"]
        return {"learned": learned, "seq": seq}

    def label(self, id: str | int, y: Hashable) -> dict[str, Any]:
        """The label of the prediction made with ``id``: the model learns its features with ``y``."""
        body = bodies.label_events([id], [y], self.labels)[0]
        return self.client.call("POST", self._paths.learn, body, uuid.uuid4().hex)

    def label_many(self, ids: Iterable[str | int], ys: Any) -> dict[str, Any]:
        """The labels of several earlier predictions, in one request."""
        return self.learn_batch(bodies.label_events(ids, ys, self.labels))

    def writer(self, batch_size: int = bodies.BATCH, flush_seconds: float = 1.0) -> Writer:
        """A :class:`~streamtree.client.writer.Writer`: ``learn_one`` buffered into batches."""
        return Writer(self, batch_size, flush_seconds)

    def encode_event(self, x: Mapping[str, Any], y: Hashable, id: str | int | None = None) -> bytes:
        """The event ``learn_one`` would send, encoded as JSON (its label remembered for the answers)."""
        if id is None:  # the writer's path, one call less
            return b'{"features":' + encoding.features_json(x) + self.labels.tail(y)
        return bodies.encoded_event(x, y, id, self.labels)

    def post_events(self, events: list[bytes], key: str | None = None) -> dict[str, Any]:
        """Post events encoded by :meth:`encode_event` as one batch (``Idempotency-Key``
        ``key``, a new one if None); the service's ``{"learned", "seq"}``."""
        body = encoding.events_json(events)
        return self.client.call("POST", self._paths.learn, body, key or uuid.uuid4().hex)

    # -- predictions --------------------------------------------------------------------------
    def decode(self, probabilities: dict[str, float]) -> dict[Hashable, float]:
        """An answer's probabilities keyed by labels (the model's classes read for a key not known,
        or one two labels sent share)."""
        out = self.labels.decode(probabilities)
        if out is None:
            self.labels.set_classes(self.summary().get("classes", []))
            out = self.labels.decode_known(probabilities)
        return out

    def with_id(self, path: str, body: dict[str, Any]) -> Any:
        """Post a prediction or decision that keeps ids (``body``'s ``id``, or an ``id`` in
        each of its ``instances``, as this class builds them). Should its answer be lost and
        the retry find an id pending (409), the lost attempt kept them: the answer is then
        read again without the ids (the same features, the model as it is now)."""
        r = self.client.send("POST", path, body, lost_ok=409)
        if r.status_code == 409:
            r = self.client.send("POST", path, bodies.without_ids(body))
        return answer(r)

    def predict_proba_one(self, x: Mapping[str, Any], id: str | int | None = None) -> dict[Hashable, float]:
        """Class probabilities for ``x``; with ``id``, its features wait for :meth:`label`."""
        body = bodies.single(x, id)
        if id is None:
            out = self.client.call("POST", self._paths.predict, body)
        else:
            out = self.with_id(self._paths.predict, body)
        return self.decode(out["probabilities"])

    def predict_one(self, x: Mapping[str, Any], id: str | int | None = None) -> Hashable | None:
        """The most probable label (None before any label is learned)."""
        return bodies.argmax(self.predict_proba_one(x, id))

    def predict_batch(self, instances: list[Any]) -> list[dict[str, float]]:
        """The service's probabilities (keyed as in its JSON) for prepared instances: feature
        dicts, or ``{"features", "id"}`` objects."""
        if not isinstance(instances, list):
            raise TypeError(f"instances: a list of feature dicts, not {type(instances).__name__}")
        return list(self.client.call("POST", self._paths.predict, {"instances": instances})["probabilities"])

    def _predict_rows(
        self, X: Any, ids: Any, columns: Iterable[str] | None, batch_size: int
    ) -> list[dict[Hashable, float]]:
        size = bodies.check_batch_size(batch_size)
        out: list[dict[Hashable, float]] = []
        for n, chunk in enumerate(bodies.chunks(bodies.instances(X, ids, columns), size)):
            if not chunk:
                continue
            try:
                if ids is None:
                    rows = self.predict_batch(chunk)
                else:
                    rows = (self.with_id(self._paths.predict, {"instances": chunk}))["probabilities"]
            except (ServiceError, ConnectionFailed) as e:
                bodies.note_failure(e, n * size, len(chunk), "instances")
                raise
            out += [self.decode(p) for p in rows]
        return out

    def predict_proba_many(
        self, X: Any, ids: Iterable[str | int] | None = None, columns: Any = None, batch_size: int = bodies.BATCH
    ) -> Any:
        """A DataFrame of class probabilities, one row per row of ``X``, one column per label;
        with ``ids`` (one per row), each row's features wait for its label. Sent in requests of
        ``batch_size`` rows: the default fits any model within the service's default bounds;
        a service whose ``max_answer_values`` (or ``max_batch``) is lower says in its 422 how
        many fit."""
        return bodies.frame(self._predict_rows(X, ids, columns, batch_size), X)

    def predict_many(self, X: Any, columns: Any = None, batch_size: int = bodies.BATCH) -> Any:
        """A Series of the most probable label of each row of ``X``."""
        return bodies.predictions(self._predict_rows(X, None, columns, batch_size), X)

    # -- decisions ----------------------------------------------------------------------------
    def decide(
        self, x: Mapping[str, Any], costs: Mapping[str, Mapping[Any, float]], id: str | int | None = None
    ) -> dict[str, Any]:
        """The decision of least expected cost under ``costs`` (decision to {label: cost}):
        ``{"decision", "expected_costs", "probabilities", "seq"}``, probabilities keyed by labels."""
        body = bodies.single(x, id) | {"costs": costs_body(costs)}
        if id is None:
            out = self.client.call("POST", self._paths.decide, body)
        else:
            out = dict(self.with_id(self._paths.decide, body))
        out["probabilities"] = self.decode(out["probabilities"])
        return out

    def decide_batch(self, instances: list[Any], costs: Mapping[str, Mapping[Any, float]]) -> dict[str, Any]:
        """The service's decisions for prepared instances, as its JSON: ``{"decisions",
        "expected_costs", "probabilities", "seq"}``."""
        if not isinstance(instances, list):
            raise TypeError(f"instances: a list of feature dicts, not {type(instances).__name__}")
        return self.client.call("POST", self._paths.decide, {"instances": instances, "costs": costs_body(costs)})

    def decide_many(
        self,
        X: Any,
        costs: Mapping[str, Mapping[Any, float]],
        ids: Iterable[str | int] | None = None,
        columns: Any = None,
        batch_size: int = bodies.BATCH,
    ) -> dict[str, Any]:
        """:meth:`decide` for every row of ``X``: lists ``decisions``, ``expected_costs`` and
        ``probabilities`` (keyed by labels), one entry per row, and the last ``seq``; with
        ``ids`` (one per row), each row's features wait for its label. In requests of
        ``batch_size`` rows, as :meth:`predict_proba_many`."""
        size = bodies.check_batch_size(batch_size)
        answers = []
        for n, chunk in enumerate(bodies.chunks(bodies.instances(X, ids, columns), size)):
            if not chunk:
                continue
            try:
                if ids is None:
                    answers.append(self.decide_batch(chunk, costs))
                else:
                    body = {"instances": chunk, "costs": costs_body(costs)}
                    answers.append(dict(self.with_id(self._paths.decide, body)))
            except (ServiceError, ConnectionFailed) as e:
                bodies.note_failure(e, n * size, len(chunk), "instances")
                raise
        out = bodies.merge_decisions(answers)
        out["probabilities"] = [self.decode(p) for p in out["probabilities"]]
        return out
