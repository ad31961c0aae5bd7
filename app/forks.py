"""Forks: a model of its own config that learns another model's logged events, in order.

A fork is created with ``PUT /models/{name} {"config": ..., "from": source}``; its stored
config holds ``"from": source`` (:data:`app.learning.FORK_FIELD`), so the store needs nothing
more to know it. On the writer, :class:`Forks` copies the source's log into the fork's, a
page at a time: each page is learned by the fork's model through
:meth:`app.hosting.ModelHost.apply_logged` (the replay's predict-then-learn step, so the
fork's prequential metrics score its own predictions on the source's events, arrival times
included), then appended to the fork's own log at the same seqs, one transaction per page.
Event ``n`` of the fork's log is event ``n`` of the source's, so whatever rebuilds a model
(snapshot + log: at start, after a failure, on a replica) rebuilds a fork unchanged, and after
a restart the fork resumes after the last event its log holds: none is learned twice or
skipped (an append that does not follow the log is refused by the store).

A fork learns only through its source (:class:`ForkHost` refuses direct learning with 409
naming it), and a model that forks follow cannot be deleted before them (:func:`followers`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Any

import orjson

from .background import LoopTask
from .exceptions import Conflict, InvalidInput, Loc
from .hosting import ModelHost
from .learning import FORK_FIELD, REPLAY_PAGE
from .pacing import stretch_events
from .settings import Settings
from .storage import LeaseLost, Snapshot, seal_state
from .storage.thread import StoreThread
from .validation import field_error

__all__ = ["FOLLOW_POLL", "FORK_SLICE", "ForkHost", "Forks", "differences", "followers", "progress", "source_of"]

log = logging.getLogger("streamtree.app")

#: Seconds between two looks at the sources' seqs while every fork is caught up (only memory
#: is read then; the store is read once a source holds events its fork has not learned).
FOLLOW_POLL = 0.05

#: Most events a fork learns in one library call; the loop serves requests between two
#: (fewer for a forest: :func:`app.pacing.stretch_events`).
FORK_SLICE = 50


def source_of(config: dict[str, Any]) -> str | None:
    """The model a config's fork follows, or None for an ordinary model."""
    source = config.get(FORK_FIELD)
    return source if isinstance(source, str) else None


def _flat(config: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """A config with nested parameters (a forest's ``tree``) as dotted names: ``tree.grace_period``."""
    out: dict[str, Any] = {}
    for key, value in config.items():
        if isinstance(value, dict) and key != "costs":  # a cost matrix is one parameter
            out |= _flat(value, f"{prefix}{key}.")
        else:
            out[f"{prefix}{key}"] = value
    return out


def differences(stored: dict[str, Any], requested: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each parameter whose value differs between two complete configs: ``{name: {"stored",
    "requested"}}``, nested ones dotted (``tree.grace_period``); a parameter one of them lacks
    is ``None`` there."""
    a, b = _flat(stored), _flat(requested)
    return {
        name: {"stored": a.get(name), "requested": b.get(name)}
        for name in sorted(a.keys() | b.keys())
        if a.get(name) != b.get(name)
    }


class ForkHost(ModelHost):
    """A hosted fork: a model learned from its source's log only (see the module).

    Attributes
    ----------
    source
        The model it follows.
    following
        True once it has reached the end of its source's log (since this instance hosts it):
        it then learns each new event of the source as it is logged.
    error
        Why it stopped following (an event of the source its config's model refuses), if so.
    """

    def __init__(self, *args: Any, source: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.source = source
        self.following = False
        self.error: str | None = None

    async def learn(self, *args: Any, **kwargs: Any) -> tuple[int, int]:
        """Refused, whatever the request: a fork learns its source's events only.

        Raises
        ------
        Conflict
            Always (409 naming the source).
        """
        raise Conflict(
            f"Model {self.name!r} is a fork: it learns only the events of the model it follows. "
            f"Learn into {self.source!r}; {self.name!r} follows it",
            source=self.source,
        )

    def predict_one(self, x: dict[str, Any], key: str | int | None = None, trusted: bool = True) -> dict[str, float]:
        """:meth:`ModelHost.predict_one`, refusing an ``id`` (:meth:`remember`)."""
        if key is not None:
            raise self._keeps_no_id(("body", "id"))
        return super().predict_one(x, None, trusted)

    def remember(self, xs: list[dict[str, Any]], keys: Sequence[tuple[int, str | int]], trusted: bool) -> None:
        """Refused: a fork keeps no id for a delayed label, as it learns no label sent to it
        (422 at the first instance sent with an id)."""
        if keys:
            raise self._keeps_no_id(("body", "instances", keys[0][0], "id"))

    def _keeps_no_id(self, loc: Loc) -> InvalidInput:
        return field_error(
            loc,
            f"Model {self.name!r} is a fork: it learns only the events of the model it follows, so it keeps "
            f"no id for a delayed label. Predict with the id on {self.source!r}, and label it there",
            "fork_keeps_no_id",
        )


def followers(hosts: Sequence[ModelHost], name: str) -> list[str]:
    """The forks among ``hosts`` that follow model ``name``."""
    return sorted(h.name for h in hosts if isinstance(h, ForkHost) and h.source == name)


def progress(fork: ForkHost, source: ModelHost | None) -> dict[str, Any]:
    """A fork's progress as ``GET /models`` shows it: ``{"from", "seq", "source_seq", "state"}``
    and, when it stopped, ``"error"``. ``state`` is ``replaying`` until the fork first reached
    its source's log end, then ``following``; ``stopped`` after an event it could not learn."""
    caught_up = fork.following or (source is not None and fork.seq >= source.seq)  # a replica: by the seqs
    state = "stopped" if fork.error is not None else ("following" if caught_up else "replaying")
    out: dict[str, Any] = {
        "from": fork.source,
        "seq": fork.seq,
        "source_seq": source.seq if source is not None else None,
        "state": state,
    }
    if fork.error is not None:
        out["error"] = fork.error
    return out


class Forks(LoopTask):
    """Makes every fork learn its source's new logged events, while this instance is the writer.

    One page (at most :data:`~app.learning.REPLAY_PAGE` events) per fork and round, so that
    several forks advance together; between two library calls the loop serves requests.

    Parameters
    ----------
    hosts
        The hosted models (the forks among them are followed).
    get
        The hosted model of a name, if any (a fork's source).
    db
        The store's thread (the source's log is read from it, the fork's appended to it).
    is_writer
        Whether this instance is the writer now (a replica follows the forks' own logs instead).
    on_fenced
        Called when the store refused an append because another instance holds the lease.
    settings
        Service settings (``snapshot_every``, ``snapshots_kept``).
    """

    task_name = "forks"

    def __init__(
        self,
        hosts: Callable[[], Sequence[ModelHost]],
        get: Callable[[str], ModelHost | None],
        db: Callable[[], StoreThread],
        is_writer: Callable[[], bool],
        on_fenced: Callable[[], None],
        settings: Settings,
    ) -> None:
        self._hosts, self._get, self._db = hosts, get, db
        self.is_writer, self.on_fenced, self.settings = is_writer, on_fenced, settings
        self._stopping = False
        self._wake = asyncio.Event()
        self._saving: dict[str, asyncio.Task[None]] = {}
        self._running: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Start following the forks on the running loop."""
        self._stopping = False
        self._running = asyncio.get_running_loop().create_task(self.run(), name=self.task_name)

    async def stop(self) -> None:
        """Finish the page under way (its events learned and logged), then stop; snapshots in
        flight are awaited. Never cancelled mid-page: a fork's model is never left ahead of its log."""
        self._stopping = True
        self._wake.set()
        if self._running is not None:
            await self._running
            self._running = None
        for task in list(self._saving.values()):
            await task
        self._saving.clear()

    async def run(self) -> None:
        while not self._stopping:
            busy = False
            if self.is_writer():
                for fork in [h for h in self._hosts() if isinstance(h, ForkHost)]:
                    if self._stopping:
                        return
                    try:
                        busy = await self.step(fork) or busy
                    except Exception:  # keep following the others; this one is tried again next round
                        log.exception("fork %r: following %r failed", fork.name, fork.source)
            if not busy:
                self._wake.clear()
                try:
                    await asyncio.wait_for(self._wake.wait(), FOLLOW_POLL)
                except TimeoutError:
                    pass

    async def step(self, fork: ForkHost) -> bool:
        """Learn and log one page of the source's events after the fork's seq; False if there was none."""
        if fork.error is not None or fork.recovering or fork.writer.closing:
            return False
        source = self._get(fork.source)
        if source is None or source.seq <= fork.seq:  # nothing new (in memory: no store read)
            if source is not None and source.seq == fork.seq:
                fork.following = True
            return False
        db = self._db()
        page = await db.run(db.store.read_events, fork.source, fork.seq, REPLAY_PAGE)
        if not page:  # the source's events are learned but not committed yet
            return False
        await self._learn(fork, page)
        if len(page) < REPLAY_PAGE and fork.seq >= page[-1][0]:  # learned up to the log's end as read
            fork.following = True
        return True

    async def _learn(self, fork: ForkHost, page: list[tuple[int, str]]) -> None:
        """Learn ``page`` (in slices, the loop free in between), then append it to the fork's log."""
        db = self._db()
        async with fork.apply_lock:
            if fork.recovering or page[0][0] != fork.seq + 1:  # rebuilt meanwhile: the next round reads again
                return
            size = stretch_events(fork.model, FORK_SLICE)
            done = 0
            for i in range(0, len(page), size):
                try:
                    fork.apply_logged(page[i : i + size])
                except RuntimeError:  # the fork's config refuses an event its source learned
                    done = self._learn_up_to_refused(fork, page, i, min(i + size, len(page)))
                    break
                done = i + len(page[i : i + size])
                await asyncio.sleep(0)  # predictions and writes between two slices
            if not done:
                return
            if fork.writer.closing:  # being deleted: its log goes with it
                return
            try:
                await db.run(db.store.append, fork.name, page[0][0], [text for _, text in page[:done]])
            except Exception as exc:
                if isinstance(exc, LeaseLost):
                    log.warning("fork %r: events not logged: this instance lost the writer's lease", fork.name)
                    self.on_fenced()
                else:
                    log.exception("fork %r: logging events %d..%d failed", fork.name, page[0][0], fork.seq)
                fork.error = None  # the rebuild goes back to the durable state, from which it resumes
                await fork.rebuild()
                return
        fork.telemetry.learned.labels(fork.name).inc(done)
        if fork.seq - fork.snapshot_seq >= self.settings.snapshot_every:
            self._snapshot(fork)

    def _learn_up_to_refused(self, fork: ForkHost, page: list[tuple[int, str]], start: int, stop: int) -> int:
        """After the library refused slice ``page[start:stop]`` whole: learn its events one at a
        time up to the one refused, so the fork stops where a fresh model of its config would,
        and say why it stopped; returns how many events of ``page`` are learned."""
        for j in range(start, stop):
            try:
                fork.apply_logged(page[j : j + 1])
            except RuntimeError as exc:
                log.exception("fork %r: cannot learn the events of %r after seq %d", fork.name, fork.source, fork.seq)
                fork.error = f"it cannot learn the events of {fork.source!r} after seq {fork.seq} ({exc})"
                return j
        return stop  # (not reached: the slice held a refused event)

    def _snapshot(self, fork: ForkHost) -> None:
        """Save a snapshot of the fork at its (durable) seq in the background, unless one is under way."""
        saving = self._saving.get(fork.name)
        if saving is not None and not saving.done():
            return
        try:
            seq, captured, state = fork.seq, fork.model.capture(), {"prequential": fork.prequential.state()}
        except Exception:
            log.exception("fork %r: snapshot at seq %d failed (the log still has every event)", fork.name, fork.seq)
            return

        async def save() -> None:
            try:
                data = await asyncio.to_thread(captured.to_bytes)
                snap = Snapshot(seq, data, seal_state(seq, orjson.dumps(state).decode()))
                db = self._db()
                if fork.writer.closing:  # being deleted (a stop awaits this task before closing models)
                    return
                await db.run(db.store.save_snapshot, fork.name, snap, self.settings.snapshots_kept)
            except Exception:  # a lost lease included: the log has every event
                log.warning("fork %r: no snapshot at seq %d", fork.name, seq, exc_info=True)
                return
            if seq > fork.snapshot_seq:
                fork.snapshot_seq, fork.snapshot_bytes = seq, len(data)

        self._saving[fork.name] = asyncio.get_running_loop().create_task(save(), name=f"snapshot:{fork.name}")
