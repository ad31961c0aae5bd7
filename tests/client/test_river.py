"""A remote model in river's evaluation loop scores exactly as the same model in process."""

from __future__ import annotations

import itertools

from river import datasets, evaluate, metrics

from streamtree import ProbabilityTree
from streamtree.client import Client
from tests.client.conftest import fresh_name


def test_progressive_val_score_equals_the_in_process_model(client: Client) -> None:
    """Test-then-train on the first 400 events of Phishing (boolean labels): the remote
    model's log loss is the in-process ``ProbabilityTree``'s, to the last bit. The service's
    default config is the library's."""
    remote = client.model(fresh_name())
    config = remote.create()["config"]
    local = ProbabilityTree()
    # the same parameters; no nominal features named is [] in the service's JSON, None in the library
    assert {k: getattr(local, k) for k in config} == config | {"nominal_features": None}
    dataset = list(itertools.islice(datasets.Phishing(), 400))
    remote_loss = evaluate.progressive_val_score(dataset, remote, metrics.LogLoss())
    local_loss = evaluate.progressive_val_score(dataset, local, metrics.LogLoss())
    assert remote_loss.get() == local_loss.get()
    assert remote.info()["seq"] == 400
    x = dataset[-1][0]
    assert remote.predict_proba_one(x) == local.predict_proba_one(x)
