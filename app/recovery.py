"""Models that could not be rebuilt from the store: why, what stands in for them, and retries.

A model is rebuilt from the store at start (and after a failed commit) from its newest
readable snapshot and the log after it, or from the log alone (:func:`app.learning.restore`).
When even that fails (the log cannot be read, has a gap, or holds an event the library
refuses), the service still starts: the model is hosted *unavailable*, every one of its
routes answers 503 with :func:`reason_of` the failure (:class:`~app.exceptions.ModelUnavailable`),
the other models serve as usual, and :class:`Recovery` tries the rebuild again, first after
:data:`FIRST_RETRY` seconds, then at doubling intervals up to :data:`MAX_RETRY`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from .background import LoopTask
from .history import History
from .learning import Restored, split_config
from .prequential import Prequential
from .settings import Settings
from .storage import StorageError

__all__ = ["FIRST_RETRY", "MAX_RETRY", "Rebuildable", "Recovery", "placeholder", "reason_of"]

log = logging.getLogger("streamtree.app")

#: Seconds before the first retry of an unavailable model's rebuild.
FIRST_RETRY = 5.0

#: Longest interval between two retries, in seconds (a retry replays the model's whole log).
MAX_RETRY = 300.0


def reason_of(exc: BaseException) -> str:
    """Why a rebuild failed, in the service's words: a client may read it, so no driver's text
    (host names, SQL) is passed on; the service's log has the whole exception."""
    if isinstance(exc, StorageError):
        return "its event log could not be read from the store"
    if isinstance(exc, MemoryError):
        return "rebuilding it from its log ran out of memory"
    if isinstance(exc, RuntimeError):  # app.learning.apply_logged: the log itself (gap, refused event)
        return f"its event log cannot be replayed ({exc})"
    return f"rebuilding it from its log failed ({type(exc).__name__})"


def placeholder(config: dict[str, Any], model_cls: Any, settings: Settings) -> Restored:
    """What an unavailable model's host holds meanwhile: a new model of its config (None if
    even that cannot be built) and empty metrics, at seq 0. Nothing reads them: every route
    of an unavailable model answers 503 before touching its state."""
    params, service = split_config(config)
    try:
        model = model_cls(**params)
    except Exception:  # e.g. a config this version cannot build: the 503 says why the model is out
        model = None
    history = History(settings.history_every, settings.history_seconds, settings.history_points)
    prequential = Prequential(settings.metrics_window, settings.metrics_bins, history, costs=service.get("costs"))
    return Restored(model, prequential, 0, 0)


class Rebuildable(Protocol):
    """What the retries read and call of a hosted model (:class:`app.hosting.ModelHost`)."""

    name: str
    unavailable: str | None  # why it could not be rebuilt (None: it was)

    async def resync(self) -> None:
        """Rebuild the model from the store; raises if that fails again."""
        ...


class Recovery(LoopTask):
    """Retries the rebuild of every unavailable model, with a doubling interval.

    Parameters
    ----------
    hosts
        The hosted models, called at each round (those with ``unavailable`` set are retried).
    first, longest
        The first interval and the longest one, in seconds (default :data:`FIRST_RETRY` and
        :data:`MAX_RETRY`, as they are when the retries start).
    """

    task_name = "recovery"

    def __init__(
        self, hosts: Callable[[], Sequence[Rebuildable]], first: float | None = None, longest: float | None = None
    ) -> None:
        self._hosts = hosts
        self._first, self._longest = first, longest

    async def run(self) -> None:
        first = FIRST_RETRY if self._first is None else self._first
        longest = MAX_RETRY if self._longest is None else self._longest
        wait = first
        while True:
            await asyncio.sleep(wait)
            broken = [h for h in self._hosts() if h.unavailable is not None]
            failed = False
            for host in broken:
                log.warning("model %r: trying again to rebuild it from the store", host.name)
                try:
                    await host.resync()
                except Exception:  # logged by the host; the next round tries again
                    failed = True
            wait = min(longest, wait * 2) if failed else first
