"""A client or remote model is a handle to a service: copied shallowly, never pickled."""

from __future__ import annotations

import copy
import pickle

import pytest

from streamtree.client import AsyncClient, Client

TOKEN = "a-secret-token-of-16"


@pytest.mark.parametrize(
    "make, remade_by",
    [
        (lambda: Client("http://127.0.0.1:9", TOKEN), "Client('http://127.0.0.1:9', token=...)"),
        (lambda: Client("http://127.0.0.1:9").model("m"), "Client('http://127.0.0.1:9', token=...).model('m')"),
        (lambda: AsyncClient("http://127.0.0.1:9"), "AsyncClient('http://127.0.0.1:9', token=...)"),
        (
            lambda: AsyncClient("http://127.0.0.1:9").model("m"),
            "AsyncClient('http://127.0.0.1:9', token=...).model('m')",
        ),
    ],
)
def test_a_handle_refuses_pickle_and_deepcopy_saying_how_to_remake_it(make, remade_by) -> None:  # type: ignore[no-untyped-def]
    handle = make()
    for copier in (pickle.dumps, copy.deepcopy):  # both failed on a lock, naming nothing of ours
        with pytest.raises(TypeError, match="is a handle to a streamtree service") as info:
            copier(handle)
        assert str(info.value).endswith(f"make one with {remade_by}") and TOKEN not in str(info.value)
    same = copy.copy(handle)  # another handle to the same
    assert type(same) is type(handle) and vars(same) == vars(handle)
