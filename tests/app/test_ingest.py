"""The column-wise checks of a learn batch (app.ingest) and of its labels (app.admission) answer
exactly what the event-by-event checks answer: the same columns, or the same first refusal."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.admission import EventBatch, LearnEvent, LearnRequest, admit
from app.exceptions import InvalidInput
from app.ingest import check_batch
from app.pending import PendingIds
from app.validation import Limits, check_event, check_features, check_id, check_label, field_error

LIMITS = Limits(max_batch=20, max_features=4, max_string_length=5, max_labels=3)


def reference(events: list[Any], limits: Limits) -> list[LearnEvent]:
    """The checks as they were made before app.ingest: one event at a time, then ids once."""
    if len(events) > limits.max_batch:
        raise field_error(("body", "events"), "too long", "too_long")
    out = []
    for i, e in enumerate(events):
        loc = ("body", "events", i)
        features, label, id = check_event(e, loc)
        if features is not None:
            check_features(features, (*loc, "features"), limits)
        elif id is None:
            raise field_error(loc, "Value error, an event needs 'features', or an 'id' of an earlier prediction")
        check_label(label, (*loc, "label"), limits)
        if id is not None:
            check_id(id, (*loc, "id"), limits)
        out.append(LearnEvent(features, label, id))
    first: dict[Any, int] = {}
    for i, e in enumerate(out):
        if e.id is not None:
            if e.id in first:
                raise field_error(("body", "events", i, "id"), "twice", "duplicate_id")
            first[e.id] = i
    return out


def answer(fn: Any, *args: Any) -> Any:
    """What ``fn`` answers: its events as tuples, or the refusal's (loc, type)."""
    try:
        return [tuple(e) for e in fn(*args)]
    except InvalidInput as exc:
        (e,) = exc.errors()
        return e["loc"], e["type"]


names = st.sampled_from(["a", "b", "c", "d", "e", "toolong"])
values = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(min_value=-1e308, max_value=1e308),
    st.integers(min_value=-(2**64), max_value=2**64),
    st.text(max_size=7),
    st.booleans(),
    st.none(),
    st.lists(st.integers(), max_size=1),
)
labels = st.one_of(st.text(max_size=6), st.integers(min_value=-(2**64), max_value=2**64), st.booleans(), st.floats())
ids = st.one_of(
    st.none(), st.integers(min_value=-3, max_value=3), st.sampled_from(["x", "y", "waytoolong"]), st.floats()
)


@st.composite
def events(draw: st.DrawFn) -> Any:
    event: dict[str, Any] = {}
    if draw(st.integers(0, 9)):
        event["features"] = draw(st.one_of(st.dictionaries(names, values, max_size=5), st.none(), st.integers()))
    if draw(st.integers(0, 19)):
        event["label"] = draw(labels)
    if draw(st.booleans()):
        event["id"] = draw(ids)
    if not draw(st.integers(0, 29)):
        event["extra"] = 1
    return event if draw(st.integers(0, 49)) else draw(st.one_of(st.none(), st.text()))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(events(), min_size=1, max_size=22))
def test_a_batch_is_checked_as_event_by_event(batch: list[Any]) -> None:
    assert answer(check_batch, batch, LIMITS) == answer(reference, batch, LIMITS)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.fixed_dictionaries(
            {
                "features": st.fixed_dictionaries({"a": values, "b": values, "c": st.sampled_from(["u", "v"])}),
                "label": st.sampled_from(["p", "q"]),
            }
        ),
        min_size=1,
        max_size=20,
    )
)
def test_columns_of_one_shape_are_checked_as_event_by_event(batch: list[Any]) -> None:
    # events sending the same keys in the same order: the checks by column (mostly accepted)
    assert answer(check_batch, batch, LIMITS) == answer(reference, batch, LIMITS)


def batch_of(*xs: dict[str, Any], label: Any = "p") -> list[dict[str, Any]]:
    return [{"features": x, "label": label} for x in xs]


@pytest.mark.parametrize(
    "batch, loc, kind",
    [
        (batch_of({"a": 1.0}, {"a": 2.0}, {"a": math.nan}), ("body", "events", 2, "features", "a"), "finite_number"),
        (
            batch_of({"a": 1.0}, {"a": math.inf}, {"a": -math.inf}),
            ("body", "events", 1, "features", "a"),
            "finite_number",
        ),
        (batch_of({"a": "u"}, {"a": 2**63}), ("body", "events", 1, "features", "a"), "int_out_of_range"),
        (batch_of({"a": -(2**63) - 1}, {"a": "u"}), ("body", "events", 0, "features", "a"), "int_out_of_range"),
        (batch_of({"a": "u"}, {"a": "uvwxyz"}), ("body", "events", 1, "features", "a"), "string_too_long"),
        (batch_of({"a": 1}, {"a": 1, "b": [1]}), ("body", "events", 1, "features", "b"), "feature_type"),
        (batch_of({"a": 1}, {"a": 1}, label=1.5), ("body", "events", 0, "label"), "label_type"),
        ([{"features": {"a": 1}, "label": "p"}, {"label": "p"}], ("body", "events", 1), "value_error"),
        (
            [{"features": {"a": 1}, "label": "p", "id": 1}, {"id": 1, "label": "q"}],
            ("body", "events", 1, "id"),
            "duplicate_id",
        ),
    ],
)
def test_a_refusal_names_the_first_bad_field(batch: list[Any], loc: tuple[Any, ...], kind: str) -> None:
    assert answer(check_batch, batch, LIMITS) == (loc, kind)


def test_floats_whose_sum_overflows_are_accepted() -> None:
    # the column's sum is infinite although each value is finite: checked one by one, accepted
    batch = check_batch(batch_of({"a": 1e308}, {"a": 1e308}, {"a": -1e308}), LIMITS)
    assert batch.xs == [{"a": 1e308}, {"a": 1e308}, {"a": -1e308}]
    assert batch.ids is None


def test_a_batch_is_a_sequence_of_events() -> None:
    batch = check_batch([{"features": {"a": 1}, "label": "p"}, {"id": "x", "label": "q"}], LIMITS)
    assert len(batch) == 2
    assert list(batch) == [LearnEvent({"a": 1}, "p", None), LearnEvent(None, "q", "x")]
    assert batch[1] == LearnEvent(None, "q", "x")
    assert batch[-1:] == [LearnEvent(None, "q", "x")]
    assert batch.ids == [None, "x"]


def admitted(requests: list[LearnRequest], classes: list[Any], max_labels: int) -> Any:
    ok, refused = admit(requests, classes, PendingIds(10, 10_000, 60.0), max_labels)
    return [(a.request, a.xs, a.ys) for a in ok], [(r, exc.errors()) for r, exc in refused]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.lists(
            st.one_of(st.sampled_from(["p", "q", "r", "s"]), st.integers(0, 3), st.booleans()), min_size=1, max_size=6
        ),
        min_size=1,
        max_size=4,
    ),
    st.sampled_from([[], ["p"], [0], ["p", "q"]]),
    st.integers(1, 4),
)
def test_labels_are_admitted_by_column_as_event_by_event(
    label_lists: list[list[Any]], classes: list[Any], max_labels: int
) -> None:
    # the same requests as columns (EventBatch) and as events: the same admitted and refused
    loop = None
    columns = [
        LearnRequest(EventBatch([{"a": i} for i in range(len(ys))], ys, None), True, loop)  # type: ignore[arg-type]
        for ys in label_lists
    ]
    rows = [LearnRequest(list(r.events), True, loop) for r in columns]  # type: ignore[arg-type]
    by_columns = admitted(columns, classes, max_labels)
    by_rows = admitted(rows, classes, max_labels)
    assert [(xs, ys) for _, xs, ys in by_columns[0]] == [(xs, ys) for _, xs, ys in by_rows[0]]
    assert [at(columns, r) for r, _, _ in by_columns[0]] == [at(rows, r) for r, _, _ in by_rows[0]]
    assert [(at(columns, r), e) for r, e in by_columns[1]] == [(at(rows, r), e) for r, e in by_rows[1]]


def at(requests: list[LearnRequest], request: LearnRequest) -> int:
    return next(i for i, r in enumerate(requests) if r is request)
