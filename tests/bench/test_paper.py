"""The paper benchmark's scoring and tables: the definitions the reported numbers rest on."""

from __future__ import annotations

import math

import numpy as np
import pytest

from bench.paper import encode, rmse_terms
from bench.paper_report import paper_key, wdl
from streamtree.datasets import parse_arff


def test_rmse_terms_are_the_papers_per_example_mean_over_classes() -> None:
    proba = np.array([[0.7, 0.2, 0.1], [0.5, 0.5, 0.0]])
    y = np.array([0, 2])
    expected = [((0.3**2) + 0.2**2 + 0.1**2) / 3, (0.5**2 + 0.5**2 + 1.0) / 3]
    np.testing.assert_allclose(rmse_terms(proba, y), expected)


def test_win_draw_loss_rounds_to_the_papers_four_decimals_and_sign_tests() -> None:
    a = np.array([0.10001, 0.2, 0.3] + [0.1] * 13)
    b = np.array([0.10004, 0.1, 0.4] + [0.2] * 13)
    w, d, l, p = wdl(a, b)
    assert (w, d, l) == (14, 1, 1)
    assert p == pytest.approx(2 * (math.comb(15, 0) + math.comb(15, 1)) / 2**15)  # two-tailed, n = 15


def test_nominal_attributes_are_one_hot_with_missing_as_a_value() -> None:
    ds = parse_arff(
        "@relation r\n@attribute x numeric\n@attribute c {a,b}\n@attribute y {p,q}\n@data\n1,a,p\n?,?,q\n2,b,p\n"
    )
    X = encode(ds)
    np.testing.assert_array_equal(X[:, 1:], [[1, 0, 0], [0, 0, 1], [0, 1, 0]])
    assert np.isnan(X[1, 0]) and X[2, 0] == 2.0


def test_dotted_names_find_their_truncated_paper_row() -> None:
    table = {"splice-c4": {}, "iris": {}}
    assert paper_key("splice-c4.5", table) == "splice-c4"
    assert paper_key("iris", table) == "iris" and paper_key("nope", table) is None
