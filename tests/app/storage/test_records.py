"""The log's records: any texts, cut into records of any size, read back exactly, from any seq."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.storage import StorageError
from app.storage.records import expand, records

texts = st.lists(st.text(alphabet=st.sampled_from('ab\n{}"é'), max_size=6), max_size=30)


@given(texts, st.integers(1, 10**12), st.integers(1, 40), st.integers(0, 40), st.integers(1, 40))
def test_records_read_back_every_event_by_seq(events: list[str], first: int, size: int, skip: int, limit: int) -> None:
    rows = records(first, events, size)
    assert sum(n for _, n, _ in rows) == len(events)
    follows = first
    for seq, n, text in rows:  # consecutive, within the size unless an event alone is larger
        assert seq == follows and n >= 1 and (n == 1 or len(text) <= size)
        follows = seq + n
    numbered = list(enumerate(events, start=first))
    assert expand("m", rows, first - 1, len(events) + 1) == numbered
    assert expand("m", rows, first - 1 + skip, limit) == numbered[skip : skip + limit]


def test_one_batch_is_one_record() -> None:
    assert records(7, ["x"] * 1000) == [(7, 1000, "\n".join(["x"] * 1000))]
    assert records(1, []) == []


def test_a_record_holding_fewer_events_than_written_is_refused() -> None:
    with pytest.raises(StorageError, match="model 'm': the log's record at seq 4 holds 2 events, not 3"):
        expand("m", [(4, 3, "a\nb")], 0, 10)
