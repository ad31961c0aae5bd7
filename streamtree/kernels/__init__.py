"""Compiled kernels: pure functions of a tree's arrays (:mod:`streamtree.state`).

Every kernel is ``@numba.njit(cache=True)`` (compiled once, cached on disk), takes and mutates
only numpy arrays and scalars, and has its formula in its docstring and a test against a slow
pure-Python reference (``tests/reference``). No fastmath and no parallel loops: the same
inputs give the same bits.
"""
