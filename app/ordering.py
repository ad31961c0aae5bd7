"""Learn requests that name the request they follow (``Idempotency-After``), held back until it is learned.

A learn request with the headers ``Idempotency-Key: B`` and ``Idempotency-After: A`` is
learned only once the request with key ``A`` (to the same model) has been committed. A client
can then keep two requests in flight, so that the second one's transfer, parsing and checks
overlap the first one's learning and commit, and still have its events learned in the order
it sent them (``streamtree learn`` does; what it gains: ``docs/guides/bulk.md``).

At the start of each group the writer looks ``A`` up in the log with the group's own keys and
asks :meth:`Ordering.place` what to do with the request:

- ``A`` is logged (within the idempotency window): the request is learned now;
- ``A`` is pending here (queued, in this group, or itself held): the request is held, and goes
  back to the head of the queue once the group that holds ``A`` is done;
- ``A`` was submitted to this writer, or refused before it reached it, and is settled without
  being logged (refused, failed, its client gone): the request is refused, 409
  :data:`AFTER_NOT_LEARNED` (and so are the requests that follow it);
- ``A`` was never seen (the request overtook it on the way): it is held until ``A`` arrives,
  and refused the same way if ``A`` has not arrived within :data:`AFTER_WAIT_SECONDS`;
- ``A`` is held, and waits (directly or through other held requests) for this request: their
  headers form a cycle, and this request is refused the same way (then ``A`` in turn).

A refused request is not learned and records nothing, so it can be sent again once ``A`` is
learned. A writer holds at most :data:`MAX_HELD` requests: one more is refused, 429
(:class:`~app.exceptions.TooManyHeld`), as are those that follow it. When the model closes (deleted, or the service stopping) held requests get what a learn
arriving then gets (:class:`~app.exceptions.NotAvailable`, 404).
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Callable, Iterable

from .admission import LearnRequest
from .exceptions import Conflict, TooManyHeld

__all__ = ["AFTER_NOT_LEARNED", "AFTER_WAIT_SECONDS", "MAX_HELD", "SEEN_KEYS", "Ordering", "after_not_learned"]

#: How long a request waits for the request it follows to reach the writer.
AFTER_WAIT_SECONDS = 10.0
#: Keys of submitted requests remembered (to tell a settled request from one not arrived yet).
SEEN_KEYS = 10_000
#: The most requests one writer holds for the requests they follow; one more is refused (429).
MAX_HELD = 1_000
#: The ``type`` of the 409 refusing a request whose predecessor was not learned.
AFTER_NOT_LEARNED = "after_not_learned"


def after_not_learned(why: str) -> Conflict:
    """The 409 of a request whose predecessor (``Idempotency-After``) was not learned."""
    return Conflict(
        f"The request named by Idempotency-After was not learned ({why}); send that request first, then this one again",
        type=AFTER_NOT_LEARNED,
    )


class Ordering:
    """The requests of one writer held for the request they follow.

    Held requests are indexed both by the key they follow and by their own key, so placing
    one costs the length of its chain of held predecessors, not a scan of all held requests
    (which made N requests following keys that never come cost N**2 on the event loop).

    Parameters
    ----------
    requeue
        Puts requests back at the head of the writer's queue, in the order given, and wakes
        the writer.
    """

    def __init__(self, requeue: Callable[[list[LearnRequest]], None]) -> None:
        self._requeue = requeue
        # by the key each request follows, then by identity (in the order they were held)
        self._held: dict[str, dict[int, LearnRequest]] = {}
        self._keyed: dict[str, list[LearnRequest]] = {}  # the held requests with each own key
        self._n_held = 0
        self._seen: OrderedDict[str, None] = OrderedDict()

    def saw(self, key: str) -> None:
        """Remember that a request with this key was submitted (the newest :data:`SEEN_KEYS`)."""
        self._seen[key] = None
        self._seen.move_to_end(key)
        if len(self._seen) > SEEN_KEYS:
            self._seen.popitem(last=False)

    def refused(self, key: str) -> None:
        """A request with this key was refused before it reached the writer: the requests
        that follow it are placed again (and refused)."""
        self.saw(key)
        self._release([key])

    def place(self, request: LearnRequest, logged: bool, pending: bool) -> bool:
        """Whether ``request`` (which has ``after``) is learned now; if not, it is held or refused.

        ``logged``: the request it follows is in the log; ``pending``: it is queued or in the
        writer's current group.
        """
        after = request.after
        assert after is not None
        if logged:
            return True
        if self._waits_for(after, request.key):
            # the request it follows waits, directly or through others, for this one: none of
            # them would ever be learned
            self._refuse(
                request, after_not_learned("it waits for this request: their Idempotency-After headers form a cycle")
            )
        elif pending or after in self._keyed:
            self._hold(request, None)
        elif after in self._seen:
            request.fail(after_not_learned("it was refused or failed"))
        else:
            self._hold(request, AFTER_WAIT_SECONDS)
        return False

    def release(self, group: Iterable[LearnRequest]) -> None:
        """After a group is done: the requests held for any of its requests go back to the
        head of the queue, to be placed again."""
        self._release([r.key for r in group if r.key is not None])

    def _release(self, keys: Iterable[str]) -> None:
        out: list[LearnRequest] = []
        for key in keys:
            for request in self._held.pop(key, {}).values():
                self._unkey(request)
                out.append(request)
        if out:
            self._requeue(out)

    def close(self, error: Exception) -> None:
        """Answer every held request with ``error`` (the writer is closing)."""
        held, self._held, self._keyed, self._n_held = self._held, {}, {}, 0
        for requests in held.values():
            for request in requests.values():
                request.fail(error)

    def _refuse(self, request: LearnRequest, error: Exception) -> None:
        """Answer ``request`` with ``error``; the requests that follow it are refused in turn."""
        request.fail(error)
        if request.key is not None:
            self._release([request.key])

    def _waits_for(self, after: str, key: str | None) -> bool:
        """Whether the held request with key ``after`` follows, through held requests, the one with ``key``."""
        seen = set()
        while after in self._keyed and after not in seen:
            seen.add(after)
            after = self._keyed[after][-1].after  # type: ignore[assignment]
            if after == key:
                return True
        return False

    def _hold(self, request: LearnRequest, wait: float | None) -> None:
        if self._n_held >= MAX_HELD:
            self._refuse(request, TooManyHeld(MAX_HELD))
            return
        after = request.after
        assert after is not None
        self._held.setdefault(after, {})[id(request)] = request
        if request.key is not None:
            self._keyed.setdefault(request.key, []).append(request)
        self._n_held += 1
        if wait is not None:
            asyncio.get_running_loop().call_later(wait, self._expire, request)

    def _unkey(self, request: LearnRequest) -> None:
        """Forget ``request``'s own key (it is no longer held)."""
        self._n_held -= 1
        if request.key is not None:
            same = self._keyed[request.key]
            same[:] = [r for r in same if r is not request]  # one request per key, but for retries
            if not same:
                del self._keyed[request.key]

    def _expire(self, request: LearnRequest) -> None:
        """Refuse ``request`` if what it follows has still not arrived."""
        after = request.after
        assert after is not None
        held = self._held.get(after)
        if after in self._seen or held is None or held.get(id(request)) is not request:
            return  # it arrived (the request goes back to the queue with its group), or was released
        del held[id(request)]
        if not held:
            del self._held[after]
        self._unkey(request)
        self._refuse(request, after_not_learned(f"it did not reach the writer within {AFTER_WAIT_SECONDS:g} s"))
