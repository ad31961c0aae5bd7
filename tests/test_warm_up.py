"""``streamtree.warm_up`` compiles every kernel the service calls, before the first event."""

from __future__ import annotations

import subprocess
import sys

# In a fresh interpreter (this one has compiled whatever earlier tests ran): after warm_up,
# every kernel entry point Python calls has a compiled signature, so no live request pays
# for compiling one (a handle is made only for new arrays). Kernels only compiled code calls
# (learn_in_tree_call, for a background tree) come with their callers, from the cache too.
PROGRAM = """
import streamtree
from streamtree.kernels import forest, handle, learn, naive_bayes, predict, route
streamtree.warm_up()
entry_points = [learn.learn_rows, predict.predict_rows, predict.proba_at, handle._tree_handle, handle._drift_handle,
                naive_bayes.nb_loglik, route.route, forest.learn_forest_rows, forest.predict_forest_rows,
                forest.learn_forest, forest.member_list, forest.put_member]
print(",".join(f.__name__ for f in entry_points if not f.signatures))
"""


def test_warm_up_compiles_every_entry_point_including_drift() -> None:
    result = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True, check=True, timeout=600)
    assert result.stdout.strip() == "", f"not compiled by warm_up: {result.stdout.strip()}"


def test_warm_up_reports_each_step_then_the_end() -> None:
    import streamtree

    calls: list[tuple[int, int, str]] = []
    streamtree.warm_up(progress=lambda done, total, step: calls.append((done, total, step)))
    total = calls[0][1]
    assert [c[0] for c in calls] == list(range(total + 1)) and {c[1] for c in calls} == {total}
    assert calls[0][2] == "tree, smoothing='hgs'" and calls[-1][2] == "" and total == 5 + len(streamtree.METHODS)
    assert streamtree.kernels_cached()  # what warm_up compiled is on disk now


def test_kernels_cached_is_false_for_an_empty_cache(tmp_path) -> None:  # type: ignore[no-untyped-def]
    env = {"STREAMTREE_KERNEL_CACHE": str(tmp_path), "PATH": "/usr/bin:/bin"}
    program = "import streamtree; print(streamtree.kernels_cached())"
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True, env=env)
    assert result.stdout.strip() == "False"
