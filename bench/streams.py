"""The benchmark streams: river's bundled datasets that load offline and seeded generators.

Every stream is a function returning a fresh iterator of ``(x, y)``; seeds are fixed so each
run sees the same examples. Drifting streams record where their drifts are.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from river import datasets
from river.datasets import synth

N = 20_000


@dataclass(frozen=True)
class Stream:
    name: str
    make: Callable[[], Iterator[tuple[dict, object]]]
    drifting: bool = False
    drifts: tuple[int, ...] = field(default=())

    def take(self, n: int = N) -> list[tuple[dict, object]]:
        return list(itertools.islice(self.make(), n))


def _drift(first, second, position: int, width: int, seed: int = 42):  # type: ignore[no-untyped-def]
    # river's sigmoid overflows for |t - position| > ~177 width: width 100 is our "abrupt"
    return synth.ConceptDriftStream(first, second, position=position, width=width, seed=seed)


STREAMS: dict[str, Stream] = {
    s.name: s
    for s in [
        Stream("Phishing", lambda: iter(datasets.Phishing())),
        Stream("Bananas", lambda: iter(datasets.Bananas())),
        Stream("ImageSegments", lambda: iter(datasets.ImageSegments())),
        Stream("Shuttle", lambda: iter(datasets.Shuttle())),
        Stream("SEA", lambda: iter(synth.SEA(variant=0, noise=0.1, seed=42))),
        Stream("Agrawal", lambda: iter(synth.Agrawal(classification_function=0, seed=42))),
        Stream(
            "RandomRBF",
            lambda: iter(synth.RandomRBF(seed_model=42, seed_sample=42, n_classes=5, n_features=10, n_centroids=50)),
        ),
        Stream(
            "RandomRBFDrift",
            lambda: iter(
                synth.RandomRBFDrift(
                    seed_model=42, seed_sample=42, n_classes=5, n_features=10, n_centroids=50,
                    change_speed=0.001, n_drift_centroids=25,
                )
            ),
            drifting=True,
        ),
        Stream(
            "Hyperplane",
            lambda: iter(synth.Hyperplane(seed=42, n_features=10, n_drift_features=2, mag_change=0.001, noise_percentage=0.05)),
            drifting=True,
        ),
        Stream("LED", lambda: iter(synth.LED(seed=42, noise_percentage=0.1, irrelevant_features=True))),
        Stream("Waveform", lambda: iter(synth.Waveform(seed=42, has_noise=True))),
        Stream(
            "SEA-drift",
            lambda: iter(_drift(synth.SEA(variant=0, noise=0.1, seed=42), synth.SEA(variant=2, noise=0.1, seed=43), 10_000, 1_000)),
            drifting=True,
            drifts=(10_000,),
        ),
        Stream(
            "Agrawal-drift",
            lambda: iter(
                _drift(
                    synth.Agrawal(classification_function=0, seed=42),
                    synth.Agrawal(classification_function=2, seed=43),
                    10_000,
                    1_000,
                )
            ),
            drifting=True,
            drifts=(10_000,),
        ),
        Stream(
            "STAGGER-drift",
            lambda: iter(
                _drift(
                    synth.STAGGER(classification_function=0, seed=42),
                    _drift(
                        synth.STAGGER(classification_function=1, seed=43),
                        synth.STAGGER(classification_function=2, seed=44),
                        6_667,
                        100,
                    ),
                    6_667,
                    100,
                )
            ),
            drifting=True,
            drifts=(6_667, 13_334),
        ),
    ]
}
