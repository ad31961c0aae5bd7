"""The requests one group commit has learned and not yet stored (:mod:`app.group_commit`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from .admission import LearnRequest
from .pending import PendingIds, Taken

__all__ = ["LearnedGroup"]


@dataclass
class LearnedGroup:
    """The requests of one group commit learned so far, with their log texts and the pending
    ids their delayed labels took."""

    pending: PendingIds
    texts: list[str] = field(default_factory=list)
    acks: list[tuple[LearnRequest, int, int]] = field(default_factory=list)  # (request, learned, last seq)
    taken: list[Taken] = field(default_factory=list)

    def fail(self, exc: BaseException) -> None:
        """Answer every learned request with ``exc`` (none of them is durable) and give their
        ids back: a retry of a label that was not stored finds its prediction still pending."""
        self.pending.restore(self.taken)
        self.taken = []
        for request, _, _ in self.acks:
            request.fail(exc)

    def clear(self) -> None:
        """Hold nothing again, once every request held is answered (committed, or failed): the
        group learns on from empty."""
        self.texts, self.acks, self.taken = [], [], []
