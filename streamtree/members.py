"""The forest's members' arrays as one compiled call takes them (:mod:`streamtree.kernels.forest`).

The members' states (:class:`~streamtree.tree_state.TreeState`) own the arrays; a
:class:`MemberArrays` only follows them in numba typed lists, rebuilt entry by entry when a
member's state replaced an array (the ownership rules: ``docs/architecture/memory.md``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from streamtree.kernels.codes import DONE
from streamtree.kernels.event import ONCE
from streamtree.kernels.forest import member_list, members_scratch, put_member
from streamtree.state import DriftArrays, TreeArrays
from streamtree.tree_state import NO_DRIFT, TreeState

if TYPE_CHECKING:
    from streamtree.tree import ProbabilityTree

__all__ = ["MemberArrays", "member_entry"]


class MemberArrays:
    """The members' arrays as :mod:`streamtree.kernels.forest` takes them: a typed list of
    each member's tree and detector, one of its background tree (its tree while it has
    none), and the members' configurations stacked (one row each).

    The members' states own the arrays; these lists only follow them: :meth:`sync`, before
    every kernel call, compares each member's state and arrays with the ones held (identity)
    and replaces an entry only where a member replaced them (growth, a background tree
    started, adopted or dropped, a loaded model), so the common call rebuilds nothing, and a
    member changed from outside the forest (its own ``learn_one``, a restore) is followed."""

    def __init__(self, members: list[ProbabilityTree]) -> None:
        self.members = members
        self.cfg_i = np.stack([m.state.cfg_i for m in members])
        self.cfg_f = np.stack([m.state.cfg_f for m in members])
        first = members[0].state
        self.trees = member_list(member_entry(first))
        self.backgrounds = member_list(first.handle(first.tree))
        n = len(members)
        self._totals = np.zeros(n, dtype=np.int64)
        #: :func:`~streamtree.kernels.forest.learn_forest`'s arrays for one event whose
        #: predictions are not asked for (``learn_one``), reused event after event (the kernel
        #: fills what it reads): the draws, the members' predictions (none), their scores (with
        #: weighing, and without) and the forest's predictions (none).
        self.one_event = (
            np.empty((n, 1), dtype=np.int64),
            np.empty((n, 0, 0)),
            np.empty((n, 1)),
            np.empty((n, 0)),
            np.empty((0, 0)),
        )
        self._held: list[tuple[TreeState | None, TreeArrays | None, TreeArrays | None, DriftArrays | None]] = [
            (None, None, None, None)
        ] * n
        for i in range(n):
            self._put(i)
        #: the kernels' working arrays, sized for every member's arrays (and background tree's)
        #: whenever an entry is replaced: not made again on every call
        self.paths, self.work = members_scratch(self.trees, self.backgrounds)

    def _put(self, i: int) -> None:
        s = self.members[i].state
        put_member(self.trees, i, member_entry(s))
        put_member(self.backgrounds, i, s.handle(s.background if s.background is not None else s.tree))
        self.cfg_i[i], self.cfg_f[i] = s.cfg_i, s.cfg_f
        self._held[i] = (s, s.tree, s.background, s.drift)

    def sync(self) -> None:
        """Replace the entry of every member whose state is not the one held, or whose arrays
        are not (identity: a few attribute reads a member, inlined, as this runs on every call)."""
        held = self._held
        replaced = False
        for i, m in enumerate(self.members):
            state, tree, background, drift = held[i]
            s = m.state
            if s is not state or s.tree is not tree or s.background is not background or s.drift is not drift:
                self._put(i)
                replaced = True
        if replaced:
            self.paths, self.work = members_scratch(self.trees, self.backgrounds)

    def prepare(self, first_values: dict[int, float], shapes: tuple[int, ...]) -> np.ndarray:
        """Before learning: each member makes room for the registry's ``shapes``
        (``TreeState.make_room``) and is followed (:meth:`sync`); returns the examples each
        had learned (the kernel's ``totals``)."""
        totals = self._totals
        for i, m in enumerate(self.members):
            if shapes != m.state.shapes:
                m.state.make_room(m.registry, first_values, shapes)
            totals[i] = m.n_examples
        self.sync()
        return totals

    def finish(self, n: int) -> None:
        """After learning ``n`` rows: each member counts them and lets go of a background
        tree the loop dropped (``TreeState.resolve`` with ``DONE``; the lists let go of it at
        the next :meth:`sync`)."""
        for m in self.members:
            m.n_examples += n
            if m.state.background is not None:
                m.state.resolve(DONE, ONCE, 0)


def member_entry(s: TreeState) -> tuple[Any, Any]:
    """A member's entry in :attr:`MemberArrays.trees`: the handles of its tree's and its
    detector's arrays (:mod:`streamtree.kernels.handle`)."""
    return s.handle(s.tree), s.handle(s.drift if s.drift is not None else NO_DRIFT)
