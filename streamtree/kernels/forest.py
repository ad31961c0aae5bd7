"""A forest's members in one compiled call: learning, prediction and the sampling's draws.

One call serves every member of a :class:`~streamtree.forest.ProbabilityForest`, not one
round trip from Python per member (why: ``docs/decisions/forest-one-call.md``):

- the members' arrays are held in numba typed lists (:func:`member_list`, :func:`put_member`)
  of their handles (:mod:`streamtree.kernels.handle`), one entry per member (the handles of
  its tree and of its detector), and the background trees' in another; every entry has the
  same numba type. A typed list costs O(1) to hand over (it is passed as one pointer), and a
  handle O(1) to fetch from it (a tuple of arrays cost time per array).
  Entries are replaced one by one, only when Python replaces a member's arrays (growth, a
  background tree started, adopted or dropped: rare);
- :func:`learn_forest_rows` runs each member, in order, through the very loop a tree runs
  (:func:`~streamtree.kernels.learn.learn_tree_rows`) on all the rows, and returns to Python
  at the first member that needs it (``GROW``, ``START``, ``ADOPT``), saying which member
  and row: Python handles that member exactly as a tree handles its own stop and calls again
  from that member and row. Members are independent given the rows (each has its own
  arrays, detector and repetitions), so running them one after the other, rather than row by
  row, gives each member the same sequence of rows and the same bits as before, and resuming
  needs nothing but ``(member, row)``;
- :func:`predict_forest_rows` and :func:`weigh_rows` weigh the members' probabilities;
- :func:`draw_reps` draws every member's repetitions of the next rows at once;
- :func:`learn_forest` is what a batch (an event: a batch of one) costs when no member stops:
  the draws, every member's learning and the weighing in one call, on working arrays a
  forest keeps for single events (one call through numba's dispatcher, not three, and no
  arrays made in Python per event).

The members' probabilities are weighted by their recent log loss relative to the forest's
(:func:`weigh_rows`, :func:`member_weights`; all weights 1.0 while the losses are equal). Sums
are taken member by member in order (``((w_0 p_0 + w_1 p_1) + w_2 p_2) + ...``, then divided by
the weights' sum), as the per-member reference does, so the forest's probabilities are the
same bits.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit
from numba.typed import List

from streamtree.kernels.borrow import borrow, hold
from streamtree.kernels.codes import DONE
from streamtree.kernels.learn import learn_tree_rows, scratch, scratch_size
from streamtree.kernels.predict import serve
from streamtree.kernels.randomness import uniform
from streamtree.kernels.route import route
from streamtree.state import D_ACTIVE, M_CLASSES

__all__ = [
    "ALL",
    "BAGGING",
    "BAGGING_STREAM",
    "DISJOINT",
    "DISJOINT_STREAM",
    "draw_reps",
    "learn_forest",
    "learn_forest_rows",
    "member_list",
    "member_weights",
    "members_scratch",
    "predict_forest_rows",
    "put_member",
    "weigh_rows",
]

ALL, BAGGING, DISJOINT = range(3)  # the samplings (draw_reps)
BAGGING_STREAM, DISJOINT_STREAM = 1, 2  # the streams of draws (the third key of each hash)


@njit(cache=True)
def member_list(first):  # type: ignore[no-untyped-def]
    """A typed list holding ``first`` (a tuple of arrays, or of tuples of arrays): the list's
    item type is its type.

    Built in compiled code, as is every change (:func:`put_member`): from Python, a typed
    list's ``append`` or ``__setitem__`` of a tuple of arrays is slow
    (``docs/decisions/forest-one-call.md``)."""
    out = List()
    out.append(first)
    return out


@njit(cache=True)
def put_member(members, i, item):  # type: ignore[no-untyped-def]
    """``members[i] = item``, or append it when ``i == len(members)``."""
    if i == len(members):
        members.append(item)
    else:
        members[i] = item


@njit(cache=True)
def members_scratch(members, backgrounds):  # type: ignore[no-untyped-def]
    """Working arrays (:func:`~streamtree.kernels.learn.scratch`) large enough for every
    member's tree and its entry in ``backgrounds``. A forest makes them when a member's arrays
    change and hands them to every call (:func:`learn_forest_rows`,
    :func:`predict_forest_rows`), which makes larger ones only for a member that outgrew them
    (:func:`_fitting`)."""
    nodes, width = 1, 1
    for m in range(len(members)):
        member_nodes, member_width = scratch_size(members[m][0], backgrounds[m])
        nodes, width = max(nodes, member_nodes), max(width, member_width)
    return scratch(nodes, width)


@njit(cache=True)
def _fitting(held_paths, held_work, t, bg):  # type: ignore[no-untyped-def]
    """``held_paths, held_work`` when they fit trees ``t`` and ``bg`` (handles), else larger
    ones (:func:`~streamtree.kernels.learn.scratch_size`): a member grown since they were
    made still gets working arrays of its size."""
    nodes, width = scratch_size(t, bg)
    if held_paths.shape[1] >= nodes and held_work.shape[1] >= width:
        return held_paths, held_work
    return scratch(max(nodes, held_paths.shape[1]), max(width, held_work.shape[1]))


@njit(cache=True)
def learn_forest_rows(
    members,
    backgrounds,
    cfg_is,
    cfg_fs,
    num,
    nom,
    ks,
    reps,
    fkeys,
    start_row,
    start_member,
    totals,
    proba_out,
    want_proba,
    scores,
    paths,
    work,
):  # type: ignore[no-untyped-def]
    """Learn the rows in every member, member after member, from ``(start_member, start_row)``.

    Parameters
    ----------
    members
        Typed list of the handles of each member's tree and detector (its detector read only
        with drift detection on).
    backgrounds
        Typed list of the handle of each member's background tree, read only while the
        member's detector has one (``drift_s[D_ACTIVE]``): any tree otherwise.
    cfg_is, cfg_fs
        Each member's configuration, one row per member (members differ in their seed).
    num, nom, ks, fkeys, want_proba
        As in :func:`~streamtree.kernels.learn.learn_rows`, shared by the members.
    reps
        ``(members, rows)``: how many times each member learns each row.
    start_row, start_member
        Where to resume: members before ``start_member`` are done, it resumes at
        ``start_row``, later members start at row 0.
    totals
        Examples each member had learned before row 0 (its drift events are dated by it).
    proba_out
        With ``want_proba``, ``(members, rows, classes)``: member ``m``'s prediction of each
        row before it was learned is added to ``proba_out[m]`` (zeros to start with;
        :func:`weigh_rows` combines them).
    scores
        ``(members, rows)`` (NaN to start with), or ``(members, 0)``: each member's
        probability of each row's class, for the rows it learns (see
        :func:`~streamtree.kernels.learn.learn_tree_rows`).
    paths, work
        Working arrays (:func:`members_scratch`; larger ones are made for a member that
        outgrew them).

    Returns
    -------
    member, next_row, reason
        The first member that stopped, its first row not learned and why
        (``GROW``, ``START``, ``ADOPT``: see ``learn_rows``); ``DONE`` once every
        member has learned every row.
    """
    n = num.shape[0]
    held_paths, held_work = paths, work
    # no reference counting in the members' loops (streamtree.kernels.borrow): the handles'
    # arrays are borrowed, and so are the arguments and the working arrays (held until the end)
    num, nom, ks, reps, fkeys = borrow(num), borrow(nom), borrow(ks), borrow(reps), borrow(fkeys)
    cfg_is, cfg_fs, proba_out, scores = borrow(cfg_is), borrow(cfg_fs), borrow(proba_out), borrow(scores)
    member, row, reason = len(members), n, DONE
    for m in range(start_member, len(members)):
        t, d = members[m]
        bg = backgrounds[m] if d.drift_s[D_ACTIVE] != 0.0 else t
        held_paths, held_work = _fitting(held_paths, held_work, t, bg)
        first = start_row if m == start_member else 0
        stop, why = learn_tree_rows(
            t,
            bg,
            d,
            cfg_is[m],
            cfg_fs[m],
            num,
            nom,
            ks,
            reps[m],
            fkeys,
            first,
            totals[m] + first,
            proba_out[m],
            want_proba,
            scores[m],
            borrow(held_paths),
            borrow(held_work),
        )
        if why != DONE:
            member, row, reason = m, stop, why
            break
    hold(held_paths, held_work)
    return member, row, reason


@njit(cache=True)
def learn_forest(
    members,
    backgrounds,
    cfg_is,
    cfg_fs,
    num,
    nom,
    ks,
    fkeys,
    totals,
    sampling,
    seed,
    first,
    poisson_cdf,
    loss,
    eta,
    decay,
    floor,
    reps,
    member_proba,
    scores,
    proba,
    want_proba,
    paths,
    work,
):  # type: ignore[no-untyped-def]
    """Learn a batch in every member from its first row: the draws for rows ``first ..`` (the
    forest's examples so far) into ``reps`` (:func:`draw_reps`), :func:`learn_forest_rows`
    from member 0 and row 0, and, when every member learned every row, :func:`weigh_rows`.

    ``reps``, ``member_proba`` and ``scores`` are :func:`learn_forest_rows`' arrays, filled
    here (the draws; zeros; NaN), so their former contents do not matter: a forest reuses
    one set for every event; ``paths`` and ``work`` are its working arrays. ``loss``, ``eta``,
    ``decay``, ``floor`` and ``proba`` (the forest's prequential predictions, with
    ``want_proba``) are :func:`weigh_rows`'.

    Returns
    -------
    member, next_row, reason
        As :func:`learn_forest_rows`. Unless ``reason`` is ``DONE``, the caller handles the
        member that stopped, resumes with :func:`learn_forest_rows` on the same arrays and
        then weighs with :func:`weigh_rows`.
    """
    draw_reps(sampling, seed, first, poisson_cdf, reps)
    member_proba[:] = 0.0
    scores[:] = np.nan
    member, row, reason = learn_forest_rows(
        members,
        backgrounds,
        cfg_is,
        cfg_fs,
        num,
        nom,
        ks,
        reps,
        fkeys,
        0,
        0,
        totals,
        member_proba,
        want_proba,
        scores,
        paths,
        work,
    )
    if reason == DONE:
        weigh_rows(loss, eta, decay, floor, scores, member_proba, proba, want_proba)
    return member, row, reason


@njit(cache=True)
def member_weights(loss, eta, out):  # type: ignore[no-untyped-def]
    """``out[m] = exp(-eta (loss[m] - min loss))``, the members' weights (unnormalised);
    all 1.0 when the losses are equal (or ``eta`` is 0), so the weighted mean is then the
    plain mean, bit for bit. Returns their sum, added in member order."""
    low = loss[0]
    for m in range(loss.shape[0]):
        if loss[m] < low:
            low = loss[m]
    total = 0.0
    for m in range(loss.shape[0]):
        out[m] = math.exp(-eta * (loss[m] - low))
        total += out[m]
    return total


@njit(cache=True)
def weigh_rows(loss, eta, decay, floor, scores, member_proba, proba_out, want_proba):  # type: ignore[no-untyped-def]
    """After the members learned a batch: row after row, the forest's prequential prediction
    (with ``want_proba``) from the members' weights before the row, then each member's loss
    updated by its score of the row.

    With ``p_m`` member ``m``'s probability of a row's class (``scores``, NaN for a row it did
    not learn, which leaves its loss as it was) and ``q`` the weighted mean of the ``p_m`` of
    the members that learned the row (weights before the row), each of those members' loss is
    an exponential moving average of its log loss *relative to* ``q``, capped:

    .. math::

        L_m \\leftarrow \\lambda L_m + (1 - \\lambda)\\,\\bigl(-\\ln \\max(p_m / q,\\ \\phi)\\bigr),

    ``lambda = decay``, ``phi = floor`` (``q`` floored at ``1e-15``). Every member that learned
    a row shares its ``q``, so the members' losses differ as their log losses do, except that
    a member confidently wrong where the others were right pays at most ``ln(1 / phi)`` nats
    for the row. The forest serves ``sum_m w_m p_m(y|x) / sum_m w_m`` with
    ``w_m = exp(-eta (L_m - min_j L_j))`` (:func:`member_weights`): an exponentially weighted
    average forecaster whose memory is about ``1 / (1 - decay)`` rows. Members summed in member
    order, as :func:`predict_forest_rows` does.
    """
    n_members = loss.shape[0]
    weights = np.empty(n_members)
    for r in range(proba_out.shape[0] if want_proba else scores.shape[1]):
        if want_proba:
            total = member_weights(loss, eta, weights)
            for c in range(proba_out.shape[1]):
                acc = 0.0
                for m in range(n_members):
                    acc += weights[m] * member_proba[m, r, c]
                proba_out[r, c] = acc / total
        if scores.shape[1] == 0:  # an unweighted forest keeps no losses
            continue
        if not want_proba:
            member_weights(loss, eta, weights)
        acc = 0.0
        learned = 0.0
        for m in range(n_members):
            p = scores[m, r]
            if p == p:
                acc += weights[m] * p
                learned += weights[m]
        if learned == 0.0:  # no member learned the row
            continue
        q = max(acc / learned, 1e-15)
        for m in range(n_members):
            p = scores[m, r]
            if p == p:
                loss[m] = decay * loss[m] + (1.0 - decay) * -math.log(max(p / q, floor))


@njit(cache=True)
def predict_forest_rows(members, cfg_is, cfg_fs, num, nom, loss, eta, out, paths, work):  # type: ignore[no-untyped-def]
    """``out[r, :]``: the members' probabilities for each encoded row (as
    :func:`~streamtree.kernels.predict.predict_rows` serves them), weighted by
    :func:`member_weights` of their ``loss`` (summed in member order, then divided by the
    weights' sum: with equal losses, the plain mean). ``out`` starts at zeros; its width is
    the model's classes (a member's columns beyond it are not read). ``paths`` and ``work``
    are the forest's working arrays (:func:`members_scratch`; larger ones are made for a
    member that outgrew them)."""
    n_rows, width = out.shape
    held_paths, held_work = paths, work
    # no reference counting in the loop (streamtree.kernels.borrow), as learn_forest_rows
    num, nom, out, cfg_is, cfg_fs = borrow(num), borrow(nom), borrow(out), borrow(cfg_is), borrow(cfg_fs)
    weights = np.empty(len(members))
    total = member_weights(loss, eta, weights)
    for m in range(len(members)):
        t = members[m][0]
        held_paths, held_work = _fitting(held_paths, held_work, t, t)
        path, scratch_rows = borrow(held_paths)[0], borrow(held_work)
        member_out, smoothed, loglik = scratch_rows[0], scratch_rows[1], scratch_rows[2]
        k = t.meta[M_CLASSES]
        for r in range(n_rows):
            num_row, nom_row = num[r], nom[r]
            length = route(t.node, t.thr, num_row, nom_row, path)
            serve(t, cfg_is[m], cfg_fs[m], path, length, num_row, nom_row, member_out, smoothed, loglik)
            for c in range(min(k, width)):
                out[r, c] += weights[m] * member_out[c]
    for r in range(n_rows):
        for c in range(width):
            out[r, c] /= total
    hold(held_paths, held_work)


@njit(cache=True)
def draw_reps(sampling, seed, first, poisson_cdf, reps):  # type: ignore[no-untyped-def]
    """``reps[t, i]``: how many times member ``t`` learns row ``first + i``.

    ``ALL``: once each. ``BAGGING``: member ``t`` learns row ``i`` ``w`` times, ``w`` the
    number of ``poisson_cdf`` entries at most ``u = uniform(seed, t + 1, i, BAGGING_STREAM)``
    (a Poisson draw of the forest's ``poisson_rate``). ``DISJOINT``: only member
    ``min(floor(u T), T - 1)`` learns it, once, ``u = uniform(seed, 0, i, DISJOINT_STREAM)``.
    Every draw is a hash of the seed, the member and the row's position
    (:mod:`streamtree.kernels.randomness`)."""
    n_members, n = reps.shape
    for i in range(n):
        if sampling == ALL:
            for t in range(n_members):
                reps[t, i] = 1
        elif sampling == DISJOINT:
            for t in range(n_members):
                reps[t, i] = 0
            owner = int(uniform(seed, 0, first + i, DISJOINT_STREAM) * n_members)
            reps[min(owner, n_members - 1), i] = 1
        else:
            for t in range(n_members):
                u = uniform(seed, t + 1, first + i, BAGGING_STREAM)
                w = 0
                while w < poisson_cdf.shape[0] and poisson_cdf[w] <= u:
                    w += 1
                reps[t, i] = w
