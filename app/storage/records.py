"""The event log's records: the events of one append stored as one row, read back one by one.

An append of many events (a batch) is stored as few rows, not one row per event: each row, a
*record*, holds ``n`` consecutive events numbered from its ``seq``, their texts joined by
newlines (the service logs compact JSON, which never holds a raw newline). A store then writes
one row and one index entry for a batch of a thousand events where it wrote a thousand, which
is most of an append's cost (measured: ``docs/decisions/batch-ingestion.md``). Reads still
answer event by event (:meth:`app.storage.base.EventStore.read_events`), so every event stays
addressable by its seq for export, replay and replicas.

A record holds at most :data:`RECORD_BYTES` of text (an event larger than that is a record of
its own), and an event whose text holds a newline is a record of its own too, so any text the
caller gives comes back as given.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

from .base import StorageError

__all__ = ["RECORD_BYTES", "SEQ_MAX", "Record", "expand", "records", "seq_range", "within"]

#: Most characters of event text in one record (the events of a batch under the default 4 MiB
#: body limit fit in one or two).
RECORD_BYTES = 4 * 2**20

#: The largest seq a store holds (a signed 64-bit integer, as both engines store it).
SEQ_MAX = 2**63 - 1

#: A row of the log: the seq of its first event, how many events it holds, their texts joined by newlines.
Record = tuple[int, int, str]


def records(first_seq: int, events: Sequence[str], size: int = RECORD_BYTES) -> list[Record]:
    """``events`` numbered from ``first_seq`` as records of at most ``size`` characters each.

    >>> records(5, ['{"y":1}', '{"y":2}', '{"y":3}'])
    [(5, 3, '{"y":1}\\n{"y":2}\\n{"y":3}')]
    >>> records(1, ["a", "b\\nc", "d"])
    [(1, 1, 'a'), (2, 1, 'b\\nc'), (3, 1, 'd')]
    """
    if not events:
        return []
    joined = "\n".join(events)
    if len(joined) <= size and joined.count("\n") == len(events) - 1:  # the common case: one record
        return [(first_seq, len(events), joined)]
    out: list[Record] = []
    held: list[str] = []  # the texts of the record being filled
    chars = 0
    for seq, text in enumerate(events, first_seq):
        alone = "\n" in text  # splitting its record on newlines would cut it
        if held and (alone or chars + len(text) > size):
            out.append((seq - len(held), len(held), "\n".join(held)))
            held, chars = [], 0
        if alone:
            out.append((seq, 1, text))
        else:
            held.append(text)
            chars += len(text) + 1
    if held:
        out.append((first_seq + len(events) - len(held), len(held), "\n".join(held)))
    return out


def seq_range(after: int, limit: int) -> tuple[int, int]:
    """The seqs of the first and last event that reading ``limit`` events after ``after`` may
    return, within what a store holds (a read past :data:`SEQ_MAX` finds nothing)."""
    return min(after + 1, SEQ_MAX), min(after + limit, SEQ_MAX)


def within(rows: Iterable[Record], max_bytes: int | None) -> Iterator[Record]:
    """The records of ``rows`` (in seq order) that start within the first ``max_bytes``
    characters of their texts: at least one, so at most ``max_bytes`` plus one record's
    :data:`RECORD_BYTES`; all of them if ``max_bytes`` is None.

    >>> [seq for seq, _, _ in within([(1, 1, "ab"), (2, 1, "cd"), (3, 1, "ef")], 3)]
    [1, 2]
    """
    before = 0
    for row in rows:
        if max_bytes is not None and before >= max_bytes:
            return
        yield row
        before += len(row[2])


def expand(name: str, rows: Iterable[Record], after: int, limit: int) -> list[tuple[int, str]]:
    """Up to ``limit`` events numbered above ``after`` out of ``rows`` (records in seq order), as ``(seq, text)``.

    Raises
    ------
    StorageError
        A record does not hold the number of events written with it (the log is damaged).

    >>> expand("m", [(1, 3, "a\\nb\\nc"), (4, 1, "d")], 1, 2)
    [(2, 'b'), (3, 'c')]
    """
    out: list[tuple[int, str]] = []
    for seq, n, text in rows:
        if seq + n - 1 <= after:
            continue
        texts = text.split("\n") if n > 1 else [text]
        if len(texts) != n:
            raise StorageError(f"model {name!r}: the log's record at seq {seq} holds {len(texts)} events, not {n}")
        skip = max(0, after + 1 - seq)
        out.extend(zip(range(seq + skip, seq + n), texts[skip : skip + limit - len(out)]))
        if len(out) >= limit:
            break
    return out
