"""The benchmark streams: river's bundled datasets that load offline and seeded generators.

Every stream is a function returning a fresh iterator of ``(x, y)``; seeds are fixed so each
run sees the same examples. Drifting streams record where their drifts are, when known: river's
``ConceptDriftStream`` draws from the new concept with probability ``sigmoid(4 (t - p) / w)``
at example ``t``, so a drift has a position ``p`` (half the examples from each concept) and a
width ``w`` (the change runs over about ``p - w .. p + w``). Nested drift streams count their
own examples, which start when the outer stream first draws from them, so a second drift at
inner position ``q`` falls at about ``p + q`` (the positions below are these global estimates).

A drift's kind follows from its width: ``abrupt`` up to :data:`ABRUPT_WIDTH` (100: river's
sigmoid overflows for ``|t - p| > 177 w``, so ``w`` must be at least ``4 p / 709``, 57 for a
drift at 10,000, and 100 is our "abrupt": the old concept is gone about 60 examples after
``p``), ``fast gradual`` up to 1,000, ``gradual`` beyond. Streams marked ``drifting`` without
positions (RandomRBFDrift, Hyperplane) drift continuously.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from river import datasets
from river.datasets import synth

N = 20_000
ABRUPT_WIDTH = 100
FAST_GRADUAL_WIDTH = 1_000


def drift_kind(width: int) -> str:
    """``abrupt`` (width <= 100), ``fast gradual`` (<= 1,000) or ``gradual``."""
    if width <= ABRUPT_WIDTH:
        return "abrupt"
    return "fast gradual" if width <= FAST_GRADUAL_WIDTH else "gradual"


@dataclass(frozen=True)
class Stream:
    name: str
    make: Callable[[], Iterator[tuple[dict, object]]]
    drifting: bool = False
    drifts: tuple[int, ...] = field(default=())
    widths: tuple[int, ...] = field(default=())  # one per drift: the ConceptDriftStream width

    def __post_init__(self) -> None:
        if len(self.widths) != len(self.drifts):
            raise ValueError(f"{self.name}: one width per drift position")
        if self.drifts and not self.drifting:
            raise ValueError(f"{self.name}: drift positions on a stream not marked drifting")

    def take(self, n: int = N) -> list[tuple[dict, object]]:
        return list(itertools.islice(self.make(), n))

    def known_drifts(self) -> list[tuple[int, int, str]]:
        """``(position, width, kind)`` of each drift at a known position."""
        return [(p, w, drift_kind(w)) for p, w in zip(self.drifts, self.widths, strict=True)]


def _drift(first, second, position: int, width: int, seed: int = 42):  # type: ignore[no-untyped-def]
    # river's sigmoid overflows for |t - position| > ~177 width: width 100 is our "abrupt"
    return synth.ConceptDriftStream(first, second, position=position, width=width, seed=seed)


def _chain(concepts: list, every: int, width: int):  # type: ignore[no-untyped-def]
    """One concept after another: each drift ``every`` examples of the stream before it
    (nested streams count their own examples, so drift i is near ``i * every``)."""
    stream = concepts[-1]
    for concept in reversed(concepts[:-1]):
        stream = _drift(concept, stream, every, width)
    return stream


def _switching(name: str, concepts: Callable[[], list], every: int, width: int) -> Stream:
    """A stream through ``concepts()`` in turn, a drift every ``every`` examples; its known
    drift positions and widths come from the same numbers that build it."""
    n = len(concepts()) - 1
    return Stream(
        name,
        lambda: iter(_chain(concepts(), every, width)),
        drifting=True,
        drifts=tuple(every * i for i in range(1, n + 1)),
        widths=(width,) * n,
    )


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
                    seed_model=42,
                    seed_sample=42,
                    n_classes=5,
                    n_features=10,
                    n_centroids=50,
                    change_speed=0.001,
                    n_drift_centroids=25,
                )
            ),
            drifting=True,
        ),
        Stream(
            "Hyperplane",
            lambda: iter(
                synth.Hyperplane(seed=42, n_features=10, n_drift_features=2, mag_change=0.001, noise_percentage=0.05)
            ),
            drifting=True,
        ),
        Stream("LED", lambda: iter(synth.LED(seed=42, noise_percentage=0.1, irrelevant_features=True))),
        Stream("Waveform", lambda: iter(synth.Waveform(seed=42, has_noise=True))),
        _switching(
            "SEA-drift",
            lambda: [synth.SEA(variant=v, noise=0.1, seed=42 + i) for i, v in enumerate((0, 2))],
            10_000,
            1_000,
        ),
        _switching(
            "Agrawal-drift",
            lambda: [synth.Agrawal(classification_function=f, seed=42 + i) for i, f in enumerate((0, 2))],
            10_000,
            1_000,
        ),
        _switching(
            "STAGGER-drift",
            lambda: [synth.STAGGER(classification_function=f, seed=42 + f) for f in range(3)],
            6_667,
            100,
        ),
        # abrupt: the four Sine concepts in turn (1 and 3 are 0 and 2 with the labels flipped)
        _switching(
            "Sine-abrupt", lambda: [synth.Sine(classification_function=f, seed=42 + f) for f in range(4)], 5_000, 100
        ),
        _switching(
            "Agrawal-gradual",
            lambda: [synth.Agrawal(classification_function=f, seed=42 + i) for i, f in enumerate((1, 4))],
            10_000,
            4_000,
        ),
        # abrupt and recurring: Mixed's concept, its label flip, and back
        _switching(
            "Mixed-abrupt",
            lambda: [synth.Mixed(classification_function=f % 2, seed=42 + f) for f in range(3)],
            7_000,
            100,
        ),
    ]
}
