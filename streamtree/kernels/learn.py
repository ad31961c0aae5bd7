"""The one learning loop over a tree's arrays.

:func:`learn_rows` serves ``learn_one`` (a batch of one), ``learn_many``, the service's live
path and its replay. For each row in order it does what one example does:

1. route it in the tree (and in the background tree, while one is compared);
2. score it before learning: the tree's prediction (returned when asked, for prequential
   metrics), the drift detector's 0/1 error (is the leaf's most counted class wrong?), both
   trees' probabilities of its label while a background tree is compared, and every
   ``SAMPLE_EVERY``-th example the naive-Bayes factor's fitting sample;
3. learn it in each tree (:func:`learn_in_tree`): score it into the linear component's
   window and take the regression's step (:mod:`streamtree.kernels.linear`), add 1 to its
   class count at every node of its path, add it to the naive-Bayes statistics and to its
   leaf's split statistics, attempt a split when the leaf has seen ``grace_period`` examples
   since its last attempt, and refit the smoothing (and ``gamma``, and forget) every
   ``refit_every`` examples of that tree;
4. feed the error to ADWIN and apply the drift policy (below).

It returns to Python (which orchestrates: growing arrays, making or swapping the background
tree) only when it must: before a row that might need more nodes or slots than the arrays
hold (``GROW``), after a detected change with no background tree (``START``), and after the
background tree won (``ADOPT``: the caller swaps the tree by one assignment). Rows are never
half-applied, so the same rows give the same bits whatever the batch boundaries.

Drift policy (``drift_delta`` in :class:`~streamtree.tree.ProbabilityTree`):

- ADWIN (:mod:`streamtree.kernels.adwin`) reads the tree's 0/1 error on each example, judged
  before the update by the leaf's most counted class. A fall of the error is the tree
  learning; a detected *rise* is a change.
- On a change, a background tree (same configuration, no detector of its own) starts from
  nothing and learns every later example beside the tree. A detection while one is compared
  does not restart it (it is counted and logged, and with naive Bayes zeroes ``gamma`` again).
  ADWIN reports one change once (:mod:`streamtree.kernels.adwin`).
- Both score each example before learning it; ``gap`` sums the tree's log loss minus the
  background tree's, the log likelihood ratio of the two on the same examples. Once at least
  ``MIN_COMPARE`` examples were compared and ``gap > MARGIN`` (the background tree is
  ``e**MARGIN``, about 7.4, times likelier), it becomes the tree and the detector restarts;
  after ``drift_patience`` examples without that, it is dropped.

The small ``MIN_COMPARE`` matters: after an abrupt change the old tree is confidently wrong,
and every example it keeps serving costs; the margin keeps a young tree from winning on a
lucky streak (measured: ``docs/decisions/drift.md``).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from streamtree.kernels.adwin import adwin_update
from streamtree.kernels.borrow import borrow, hold
from streamtree.kernels.codes import (
    ADOPT,
    C_DRIFT,
    C_GRACE,
    C_LINEAR,
    C_NB,
    C_PATIENCE,
    C_REFIT_EVERY,
    C_REPEATS_SEEN,
    DONE,
    GROW,
    START,
)
from streamtree.kernels.drift import adopt, argmax_error, log_event
from streamtree.kernels.grow import attempt_split, has_room
from streamtree.kernels.leaf_stats import unsee, update_stats
from streamtree.kernels.linear_step import learn_linear, serve_to_learn
from streamtree.kernels.naive_bayes import nb_score
from streamtree.kernels.predict import proba_at, tree_loglik
from streamtree.kernels.refit import catch_up, refit
from streamtree.kernels.route import route
from streamtree.state import (
    A_CHANGE,
    D_ACTIVE,
    D_COMPARED,
    D_DETECTIONS,
    D_DROPPED,
    D_GAP,
    DETECTION,
    DROPPED,
    F_GAMMA,
    F_MIX_A,
    F_MIX_B,
    F_MIX_C,
    KIND,
    LAST_ATTEMPT,
    LEAF,
    M_CLASSES,
    M_EXAMPLES,
    M_MIX_SCORED,
    M_NB_SCORED,
    M_NUMERIC,
    MIN_PROBA,
    SEEN,
    SLOT,
)

__all__ = [
    "SCRATCH_ROWS",
    "learn_rows",
    "learn_tree_rows",
    "scratch",
    "scratch_size",
]

SAMPLE_EVERY = 8  # the naive-Bayes factor scores every this many-th example before learning it
MIN_COMPARE = 10  # examples a background tree is compared on before it may replace the tree
MARGIN = 2.0  # nats of log likelihood by which it must beat the tree
SCRATCH_ROWS = 6  # working arrays of the learning loop (scratch): five per class, one for the linear component


@njit(cache=True, inline="always")
def learn_in_tree(
    t,
    cfg_i,
    cfg_f,
    fkeys,
    num_row,
    nom_row,
    k,
    path,
    length,
    smoothed,
    loglik,
    left,
    right,
    z,  # type: ignore[no-untyped-def]
    want_score,
    fresh,
) -> float:
    """Learn one routed example of class ``k`` in one tree (steps 2's naive-Bayes sample and 3
    of the module docstring); ``z`` is scratch of at least three times the tree's numeric columns.

    With ``want_score``, returns the probability of ``k`` the tree served before learning it
    (:func:`proba_at`'s, bit for bit: a forest weighs its members by it); NaN otherwise. The
    linear component computes it on its way (the pool, when no naive-Bayes factor tempers
    it); otherwise it costs a :func:`proba_at`. ``fresh``: ``smoothed``, ``left`` and ``z`` hold
    what :func:`~streamtree.kernels.linear_step.serve_to_learn` kept of this example."""
    n_classes = t.meta[M_CLASSES]
    n_numeric = t.meta[M_NUMERIC]
    linear = cfg_i[C_LINEAR] != 0 and n_numeric > 0
    pool_served = linear and not (cfg_i[C_NB] and t.meta_f[F_GAMMA] != 0.0)
    score = math.nan
    if want_score and not pool_served:
        proba_at(t, cfg_i, cfg_f, path, length, num_row, nom_row, right, smoothed, loglik)
        score = right[k]
    if linear:
        served = learn_linear(
            t,
            cfg_i,
            cfg_f,
            num_row,
            k,
            path,
            length,
            n_classes,
            n_numeric,
            smoothed,
            left,
            z,
            right,
            want_score and pool_served,
            fresh and not (want_score and not pool_served),  # that proba_at overwrote smoothed
        )
        if want_score and pool_served:
            score = served
    if cfg_i[C_NB]:
        if (t.meta[M_EXAMPLES] + 1) % SAMPLE_EVERY == 0:
            # the factor's fitting sample: the untempered prediction and the log likelihoods
            proba_at(t, cfg_i, cfg_f, path, length, num_row, nom_row, left, smoothed, loglik)
            tree_loglik(t, num_row, nom_row, n_classes, loglik)
            nb_score(t.nb_a, t.nb_b, t.nb_y, t.meta[M_NB_SCORED], smoothed, loglik, n_classes, k)
            t.meta[M_NB_SCORED] += 1
        update_stats(t.nb_num, t.nb_range, t.nb_nom, t.nb_seen, t.shift, 0, k, num_row, nom_row)
    for j in range(length):
        t.counts[path[j], k] += 1.0
    t.meta[M_EXAMPLES] += 1
    leaf = path[length - 1]
    slot = t.node[leaf, SLOT]
    if t.node[leaf, KIND] == LEAF and slot >= 0:
        catch_up(t, cfg_i, slot)
        update_stats(t.num_stats, t.num_range, t.nom_stats, t.slot_seen, t.shift, slot, k, num_row, nom_row)
        if t.slot_seen[slot, SEEN] - t.slot_seen[slot, LAST_ATTEMPT] >= cfg_i[C_GRACE]:
            attempt_split(t, cfg_i, cfg_f, fkeys, leaf, left, right)
    if t.meta[M_EXAMPLES] % cfg_i[C_REFIT_EVERY] == 0:
        refit(t, cfg_i)
    return score


@njit(cache=True)
def learn_in_tree_call(  # type: ignore[no-untyped-def]
    t, cfg_i, cfg_f, fkeys, num_row, nom_row, k, path, length, smoothed, loglik, left, right, z, want_score
) -> float:
    """:func:`learn_in_tree` as a call, for the loop's rarer uses (an example learned more
    than once, the background tree): one compiled body for them. The loop inlines
    :func:`learn_in_tree` for each example's first learning, as the prediction loops inline
    :func:`serve`."""
    return learn_in_tree(
        t, cfg_i, cfg_f, fkeys, num_row, nom_row, k, path, length, smoothed, loglik, left, right, z, want_score, False
    )


@njit(cache=True)
def learn_rows(tree, background, drift, cfg_i, cfg_f, num, nom, ks, reps, fkeys, start, total, proba_out, want_proba):  # type: ignore[no-untyped-def]
    """Learn rows ``start, start + 1, ...`` of an encoded batch in order (module docstring).

    Parameters
    ----------
    tree, background
        The handles (:mod:`streamtree.kernels.handle`) of the tree and of the background tree
        (any tree, the tree's own handle say, while ``drift_s[D_ACTIVE] == 0``: it is then not
        read).
    drift
        The handle of the model's ``DriftArrays`` (read only with ``cfg_i[C_DRIFT] == 1``).
    num, nom, ks
        The encoded rows and their class ids; a class id equal to the tree's class count is
        a new class (ids are given in order of first appearance).
    reps
        How many times the tree learns each row (int64): 1 for a single tree; for a forest's
        member, the row's online-bagging weight (Poisson) or 0 for a row meant for another
        member. A row of weight 0 still makes its class known (so a member's classes, and
        everything computed over them, are the forest's at every row whatever the batch
        boundaries) and is still predicted when asked, but is not learned, scored for drift or
        counted in the tree's refit schedule.
    fkeys
        A key per feature (int64; numeric columns, then nominal ones), a hash of its name:
        the randomized splitters draw by feature key, and every splitter breaks a tie in merit
        by it, not by column, so the order in which features first appeared does not change
        the tree (:mod:`streamtree.kernels.grow`, :func:`~streamtree.kernels.split.best_split`).
    total
        Examples the model learned before row ``start`` (drift events are dated by it).
    proba_out, want_proba
        With ``want_proba``, the prediction for row ``r`` before it was learned is *added* to
        ``proba_out[r, :K]`` (``K`` the classes known then): a tree hands zeros, a forest the
        sum of the members before (:mod:`streamtree.kernels.forest`). A row's prediction is
        added exactly once: a row is never half-applied.

    Returns
    -------
    next_row, reason
        The first row not learned and why the loop stopped: ``DONE``, ``GROW`` (the arrays
        need room before ``next_row``), ``START`` (a change was detected: start a background
        tree) or ``ADOPT`` (the background tree won: it becomes the tree).
    """
    # no reference counting in the loop (streamtree.kernels.borrow): the handles' arrays are
    # borrowed, and so are the arguments (the caller's) and the working arrays (held until the
    # loop is done)
    t, bg = tree, background
    held_paths, held_work = scratch(*scratch_size(t, bg))
    no_scores = np.empty(0)  # a tree alone scores nothing
    stop = learn_tree_rows(
        t,
        bg,
        drift,
        borrow(cfg_i),
        borrow(cfg_f),
        borrow(num),
        borrow(nom),
        borrow(ks),
        borrow(reps),
        borrow(fkeys),
        start,
        total,
        borrow(proba_out),
        want_proba,
        no_scores,
        borrow(held_paths),
        borrow(held_work),
    )
    hold(held_paths, held_work)
    return stop


@njit(cache=True)
def scratch(nodes, width):  # type: ignore[no-untyped-def]
    """Working arrays for :func:`learn_tree_rows` on trees of at most ``nodes`` nodes, and rows
    of at least ``width`` entries: ``paths`` (2 rows of ``int64``, a path in the tree and one
    in the background tree) and ``work`` (``SCRATCH_ROWS`` rows of ``float64``: five of a
    value per class, then the linear component's, three per numeric column). A forest keeps
    one pair for all its members, from call to call
    (:func:`~streamtree.kernels.forest.members_scratch`). Beyond their minimum size, their size
    and former contents do not matter: every kernel reads only what it wrote, up to the
    logical sizes."""
    return np.empty((2, nodes), dtype=np.int64), np.empty((SCRATCH_ROWS, width))


@njit(cache=True)
def scratch_size(t, bg):  # type: ignore[no-untyped-def]
    """``(nodes, width)`` of the working arrays (:func:`scratch`) for learning in tree ``t``
    and background tree ``bg`` (handles)."""
    nodes = max(t.node.shape[0], bg.node.shape[0])
    width = max(t.counts.shape[1], bg.counts.shape[1], 3 * t.lr_scale.shape[0], 3 * bg.lr_scale.shape[0], 1)
    return nodes, width


@njit(cache=True, inline="always")
def learn_tree_rows(
    t,
    bg,
    d,
    cfg_i,
    cfg_f,
    num,
    nom,
    ks,
    reps,
    fkeys,
    start,
    total,
    proba_out,
    want_proba,
    scores,  # type: ignore[no-untyped-def]
    paths,
    work,
):
    """:func:`learn_rows` on handles (:mod:`streamtree.kernels.handle`) and
    working arrays (:func:`scratch`): the loop itself, for the entry points above and for a
    forest's members (:func:`streamtree.kernels.forest.learn_forest_rows`).

    ``scores`` is empty, or ``(n,)``: then ``scores[r]`` receives, for each row the tree
    learns (``reps[r] > 0``), the probability it served the row's class before learning it
    (0 for a class new at that row, which it could not predict); rows it does not learn are
    left as they are. A forest weighs its members by these (``weigh_rows``)."""
    path, bg_path = paths[0], paths[1]
    out, smoothed, loglik, left, right = work[0], work[1], work[2], work[3], work[4]
    z = work[5]  # the linear component's: the standardised values, then lr_learn's (twice as many)
    drift = cfg_i[C_DRIFT] == 1
    n = num.shape[0]
    for r in range(start, n):
        w = reps[r]
        active = drift and d.drift_s[D_ACTIVE] != 0.0
        if not has_room(t.meta, t.node.shape[0], w) or (active and not has_room(bg.meta, bg.node.shape[0], w)):
            return r, GROW
        k = ks[r]
        known = t.meta[M_CLASSES]
        at = total + (r - start) + 1
        num_row, nom_row = num[r], nom[r]  # one view of each a row (a view takes and releases a reference)
        length, fresh = 0, False  # fresh: what learn_linear reads, kept by serve_to_learn
        if want_proba:
            length = route(t.node, t.thr, num_row, nom_row, path)
            fresh = serve_to_learn(
                t, cfg_i, cfg_f, path, length, num_row, nom_row, out, smoothed, left, z, right, loglik
            )
            for c in range(known):
                proba_out[r, c] += out[c]
        if k >= known:  # a new class: every tree counts it from now on
            fresh = False
            t.meta[M_CLASSES] = k + 1
            if active:
                bg.meta[M_CLASSES] = k + 1
        if w == 0:  # not learned (a forest member's row: bagging's 37%, DST's others) and not routed for it
            continue
        if not want_proba:
            length = route(t.node, t.thr, num_row, nom_row, path)
        n_classes = t.meta[M_CLASSES]
        error = 0.0
        if drift:
            error = argmax_error(t.counts, path[length - 1], n_classes, k)
            if active:  # both trees score the example before either learns it (over fresh values)
                fresh = False
                proba_at(t, cfg_i, cfg_f, path, length, num_row, nom_row, out, smoothed, loglik)
                p_tree = out[k]
                bg_length = route(bg.node, bg.thr, num_row, nom_row, bg_path)
                proba_at(bg, cfg_i, cfg_f, bg_path, bg_length, num_row, nom_row, out, smoothed, loglik)
                p_bg = out[k]
                d.drift_s[D_GAP] += math.log(max(p_bg, MIN_PROBA)) - math.log(max(p_tree, MIN_PROBA))
                d.drift_s[D_COMPARED] += 1.0
        scored = scores.shape[0] > 0
        served = learn_in_tree(
            t, cfg_i, cfg_f, fkeys, num_row, nom_row, k, path, length, smoothed, loglik, left, right, z, scored, fresh
        )
        if scored:
            scores[r] = 0.0 if k >= known else served
        for _ in range(1, w):  # again, on the path as it is now (the leaf may have split)
            length = route(t.node, t.thr, num_row, nom_row, path)
            if not cfg_i[C_REPEATS_SEEN]:
                unsee(t, path, length)
            learn_in_tree_call(
                t, cfg_i, cfg_f, fkeys, num_row, nom_row, k, path, length, smoothed, loglik, left, right, z, False
            )
        if active:
            for rep in range(w):
                bg_length = route(bg.node, bg.thr, num_row, nom_row, bg_path)
                if rep > 0 and not cfg_i[C_REPEATS_SEEN]:
                    unsee(bg, bg_path, bg_length)
                learn_in_tree_call(
                    bg,
                    cfg_i,
                    cfg_f,
                    fkeys,
                    num_row,
                    nom_row,
                    k,
                    bg_path,
                    bg_length,
                    smoothed,
                    loglik,
                    left,
                    right,
                    z,
                    False,
                )
        if not drift:
            continue
        detected = adwin_update(d.adwin_b, d.adwin_n, d.adwin_s, error) and d.adwin_s[A_CHANGE] > 0.0
        if detected:
            if cfg_i[C_NB]:
                # the feature models describe the concept that just failed: until the next
                # refit (or a swap), predict from the counts alone
                t.meta_f[F_GAMMA] = 0.0
            if cfg_i[C_LINEAR]:  # likewise the regression: the pool restarts from the tree alone
                t.meta_f[F_MIX_A] = 1.0
                t.meta_f[F_MIX_B] = 0.0
                t.meta_f[F_MIX_C] = 0.0
                t.meta[M_MIX_SCORED] = 0
            d.drift_s[D_DETECTIONS] += 1.0
            log_event(d, DETECTION, at)
            if not active:
                return r + 1, START
        if active:
            if d.drift_s[D_COMPARED] >= MIN_COMPARE and d.drift_s[D_GAP] > MARGIN:
                adopt(d, bg, at)
                return r + 1, ADOPT
            if d.drift_s[D_COMPARED] >= cfg_i[C_PATIENCE]:
                d.drift_s[D_ACTIVE] = 0.0
                d.drift_s[D_DROPPED] += 1.0
                log_event(d, DROPPED, at)
    return n, DONE
