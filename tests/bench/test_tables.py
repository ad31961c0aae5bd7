"""The comparison tables in bench/results are what bench.tables makes from the committed runs."""

from __future__ import annotations

import pytest

from bench.forests import RESULTS
from bench.tables import TABLES, best_peer


@pytest.mark.parametrize("name", sorted(TABLES))
def test_a_committed_table_is_the_one_its_runs_give(name: str) -> None:
    assert TABLES[name]() == (RESULTS / f"{name}.md").read_text()


def test_best_peer_is_the_least_log_loss_of_the_targets_peers_only() -> None:
    losses = {
        "river-HT-nba": 0.5,
        "river-HAT": 0.4,
        "river-ARF-10": 0.3,
        "river-AMF-10": 0.35,
        "river-LR": 0.6,
        "streamtree-tree": 0.1,
        "river-AMF-1": 0.2,
    }
    assert best_peer(losses) == ("ARF-10", 0.3)
