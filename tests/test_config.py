"""Every configuration parameter has a bounded range, and a refusal names the parameter."""

from __future__ import annotations

from typing import Any

import pytest

from streamtree import ConfigError, ProbabilityTree
from streamtree.config import CONSTRAINTS, MAX_FEATURES_LIMIT

HUGE = 2**70  # beyond the kernels' 64-bit integers, and as a float 1.2e21
DEFAULTS = ProbabilityTree().get_config()


def test_every_numeric_parameter_refuses_a_huge_number_naming_it() -> None:
    numeric = [name for name, value in DEFAULTS.items()
               if name not in ("nominal_features",) and (value is None or type(value) in (int, float))]
    assert len(numeric) >= 14
    for name in numeric:
        for value in (HUGE, -HUGE, 10**400):
            with pytest.raises(ConfigError) as err:
                ProbabilityTree(**{name: value})
            assert err.value.param == name
            assert "Got " in str(err.value) and len(str(err.value)) < 300  # a 400-digit value is not echoed


def test_every_parameter_is_constrained() -> None:
    assert set(CONSTRAINTS) == set(DEFAULTS)


@pytest.mark.parametrize("value", ["abc", b"ab", {"a": 1}, ["a", 1.5], ["a", True], ["a", None]])
def test_nominal_features_is_a_list_of_names_not_a_string(value: Any) -> None:
    with pytest.raises(ConfigError) as err:
        ProbabilityTree(nominal_features=value)
    assert err.value.param == "nominal_features"


def test_nominal_features_are_at_most_max_features() -> None:
    assert ProbabilityTree(nominal_features=["a", "b"], max_features=2).get_config()["nominal_features"] == ["a", "b"]
    with pytest.raises(ConfigError, match="max_features=2") as err:
        ProbabilityTree(nominal_features=["a", "b", "c"], max_features=2)
    assert err.value.param == "nominal_features"
    with pytest.raises(ConfigError) as err:
        ProbabilityTree(nominal_features=list(range(MAX_FEATURES_LIMIT + 1)))
    assert err.value.param == "nominal_features"


@pytest.mark.parametrize(("name", "highest"), [
    ("grace_period", 10**9), ("max_depth", 10_000), ("max_nodes", 10_000_000), ("max_features", MAX_FEATURES_LIMIT),
    ("refit_every", 10**9), ("half_life", 10**9), ("drift_patience", 10**9), ("n_split_points", 1000),
    ("refit_steps", 1000),
])
def test_integer_parameters_accept_their_whole_range_and_nothing_beyond(name: str, highest: int) -> None:
    assert ProbabilityTree(**{name: highest}).get_config()[name] == highest
    with pytest.raises(ConfigError, match=f"'{name}'.*\\[1, "):
        ProbabilityTree(**{name: highest + 1})


def test_max_features_defaults_to_ten_thousand() -> None:
    assert DEFAULTS["max_features"] == 10_000
