"""Every configuration parameter has a bounded range, and a refusal names the parameter."""

from __future__ import annotations

from typing import Any

import pytest

from streamtree import ConfigError, ProbabilityForest, ProbabilityTree
from streamtree.config import CONSTRAINTS, MAX_CATEGORIES_LIMIT, MAX_FEATURES_LIMIT, MIN_BYTES

HUGE = 2**70  # beyond the kernels' 64-bit integers, and as a float 1.2e21
DEFAULTS = ProbabilityTree().get_config()


def test_every_numeric_parameter_refuses_a_huge_number_naming_it() -> None:
    numeric = [
        name
        for name, value in DEFAULTS.items()
        if name not in ("nominal_features",) and (value is None or type(value) in (int, float))
    ]
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


@pytest.mark.parametrize(
    ("name", "highest"),
    [
        ("grace_period", 10**9),
        ("max_depth", 10_000),
        ("max_nodes", 10_000_000),
        ("max_features", MAX_FEATURES_LIMIT),
        ("refit_every", 10**9),
        ("half_life", 10**9),
        ("drift_patience", 10**9),
        ("n_split_points", 1000),
        ("refit_steps", 1000),
    ],
)
def test_integer_parameters_accept_their_whole_range_and_nothing_beyond(name: str, highest: int) -> None:
    assert ProbabilityTree(**{name: highest}).get_config()[name] == highest
    with pytest.raises(ConfigError, match=f"'{name}'.*\\[1, "):
        ProbabilityTree(**{name: highest + 1})


def test_max_features_defaults_to_ten_thousand() -> None:
    assert DEFAULTS["max_features"] == 10_000


@pytest.mark.parametrize(
    ("name", "lowest", "highest"),
    [
        ("max_categories", 1, MAX_CATEGORIES_LIMIT),
        ("max_bytes", MIN_BYTES, 2**50),
    ],
)
def test_growth_bounds_take_their_range_or_none_and_a_refusal_names_them(name: str, lowest: int, highest: int) -> None:
    for value in (lowest, highest, None):
        assert ProbabilityTree(**{name: value}).get_config()[name] == value
    for value in (lowest - 1, highest + 1, 2.5, float(lowest), True, "100", [lowest]):
        with pytest.raises(ConfigError) as err:
            ProbabilityTree(**{name: value})
        assert err.value.param == name
        assert f"The '{name}' parameter of ProbabilityTree must be an int in [{lowest:,}, {highest:,}] or None" in str(
            err.value
        )
    with pytest.raises(ConfigError) as err:
        ProbabilityForest(tree={name: lowest - 1})
    assert err.value.param == f"tree.{name}"


def test_growth_bounds_default_to_256_codes_and_256_mib() -> None:
    assert DEFAULTS["max_categories"] == 255 and DEFAULTS["max_bytes"] == 2**28
