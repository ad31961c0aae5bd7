"""numba's own allocations balance: every array and handle compiled code allocates is freed.

Compiled code allocates through numba's runtime (NRT): the working arrays of the loops, the
handles (:mod:`streamtree.kernels.handle`), a forest's typed lists, arrays returned to Python.
With ``NUMBA_NRT_STATS=1`` the runtime counts allocations and frees (of memory and of the
owner records, *meminfos*); the setting is read when the runtime starts, so the program runs
in a fresh interpreter. It learns, grows, predicts, copies and deletes trees and forests
(docs/architecture/memory.md) twice; once they are gone, every allocation of compiled code has
been freed. The runtime starts with the first compiled call, so the counters are read after
the first round, and again after the second. A reference counted once too few or too many
shows here as an imbalance (or a crash).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

PROGRAM = r"""
import copy, gc, json
import numpy as np
from numba.core.runtime import rtsys
from streamtree import ProbabilityForest, ProbabilityTree

def stream(n, seed):
    rng = np.random.default_rng(seed)
    for i in range(n):
        a, b = rng.random(), rng.random()
        y = (a > b) if i < n // 2 else (a + b > 1.0)  # an abrupt change halfway: drift, a background tree
        yield {"a": a, "b": b, "c": "xyz"[int(rng.integers(3))]}, int(y)

def exercise():
    models = [
        ProbabilityTree(grace_period=10, max_nodes=64),  # grows, then stops at max_nodes
        ProbabilityTree(grace_period=10, naive_bayes=True, splitter="random", drift_delta=0.05, refit_every=50),
        ProbabilityForest(n_trees=3, seed=1, tree={"grace_period": 10, "drift_delta": 0.05}),
    ]
    for model in models:
        rows = list(stream(1200, 7))
        for x, y in rows[:300]:
            model.predict_proba_one(x)
            model.learn_one(x, y)
        X = [x for x, _ in rows[300:]]
        Y = [y for _, y in rows[300:]]
        model.learn_many(X, Y, return_proba=True)
        model.predict_proba(X[:50])
        again = type(model).from_bytes(model.to_bytes())
        again.learn_many(X[:100], Y[:100])
        twin = copy.deepcopy(model)
        twin.learn_one(X[0], Y[0])
        twin.predict_proba_one(X[1])
        del again, twin
    del models
    gc.collect()

def stats():
    s = rtsys.get_allocation_stats()
    return {"alloc": s.alloc, "free": s.free, "mi_alloc": s.mi_alloc, "mi_free": s.mi_free}

exercise()  # compiles (or loads) every kernel, and whatever numba keeps for good
before = stats()
exercise()
after = stats()
print(json.dumps({"before": before, "after": after}))
"""


def test_every_allocation_of_compiled_code_is_freed() -> None:
    env = {**os.environ, "NUMBA_NRT_STATS": "1"}
    result = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True, env=env, timeout=1800)
    assert result.returncode == 0, result.stderr[-3000:]
    counts = json.loads(result.stdout.strip().splitlines()[-1])
    before, after = counts["before"], counts["after"]
    assert after["alloc"] > before["alloc"] > 0  # the counters are on, and each round allocated
    for state in (before, after):  # nothing of the rounds (nor of the warm-up) is left
        assert state["alloc"] == state["free"] and state["mi_alloc"] == state["mi_free"], counts
