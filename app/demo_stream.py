"""A drifting stream to watch on the dashboard: ``streamtree demo --url http://127.0.0.1:8000``.

River's ``Sine`` generator (two uniform features ``x1``, ``x2``; the label is 1 where
``x1 < sin(x2)``) with a fraction of the labels flipped at random (noise, so
the probabilities are not all near 0 or 1), whose concept reverses abruptly at
``drift_at``: from then on every label is the opposite. The events go to a model of their
own (``drift-demo`` unless told), created if missing, in batches at a steady rate, so the
dashboard shows the log loss fall, jump at the drift and recover once the tree is swapped.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from typing import Any

__all__ = ["events", "main", "run"]

Event = tuple[dict[str, float], int]


def events(n: int, drift_at: int, noise: float = 0.05, seed: int = 7) -> Iterator[Event]:
    """``n`` labelled events whose concept reverses at event ``drift_at`` (0-based index).

    Parameters
    ----------
    n
        Number of events.
    drift_at
        Index of the first event of the reversed concept (``n`` or more: no drift).
    noise
        Probability that a label is flipped at random, before and after the drift.
    seed
        Seeds the generators and the noise: the same arguments give the same events.
    """
    from river.datasets import synth

    rng = random.Random(seed)
    before = synth.Sine(classification_function=0, seed=seed)
    after = synth.Sine(classification_function=1, seed=seed + 1)  # SINE1 reversed
    stream = itertools.chain(itertools.islice(before, max(0, min(n, drift_at))), after)
    for x, y in itertools.islice(stream, n):
        label = int(y)
        if rng.random() < noise:
            label = 1 - label
        yield {"x1": float(x[0]), "x2": float(x[1])}, label


def _call(url: str, method: str, path: str, body: Any, token: str | None) -> tuple[int, Any]:
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    req = urllib.request.Request(url.rstrip("/") + path, data=json.dumps(body).encode(), method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode(errors="replace")
        return exc.code, detail


def run(
    url: str,
    model: str = "drift-demo",
    n: int = 20_000,
    drift_at: int = 10_000,
    batch: int = 100,
    rate: float = 1_000.0,
    noise: float = 0.05,
    seed: int = 7,
    token: str | None = None,
    say: Callable[[str], None] = print,
) -> int:
    """Create ``model`` if needed and post the stream to it; return the last ``seq``.

    ``rate`` is in events per second (0: as fast as the service takes them).

    Raises
    ------
    RuntimeError
        The service refused a request (the message has its status and answer).
    """
    status, out = _call(url, "PUT", f"/models/{model}", {}, token)
    if status not in (200, 201):
        raise RuntimeError(f"PUT /models/{model}: {status} {out}")
    say(f"posting {n} events to model {model!r} at {url} (the concept reverses at event {drift_at + 1})")
    say(f"watch them at {url.rstrip('/')}/dashboard")
    seq = 0
    start = time.monotonic()
    stream = events(n, drift_at, noise, seed)
    sent = 0
    while chunk := list(itertools.islice(stream, batch)):
        body = {"events": [{"features": x, "label": y} for x, y in chunk]}
        status, out = _call(url, "POST", f"/models/{model}/learn", body, token)
        if status != 200:
            raise RuntimeError(f"POST /models/{model}/learn: {status} {out}")
        seq = int(out["seq"])
        sent += len(chunk)
        if sent % 2_000 < batch or sent == n:
            say(f"  {sent} events sent (model seq {seq})")
        if rate > 0:
            time.sleep(max(0.0, start + sent / rate - time.monotonic()))
    return seq


def parser() -> argparse.ArgumentParser:
    """The command line of ``streamtree demo`` (and ``python -m app.demo_stream``)."""
    p = argparse.ArgumentParser(prog="streamtree demo", description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--url", default="http://127.0.0.1:8000", help="The service (default %(default)s).")
    p.add_argument("--model", default="drift-demo", help="Model to learn (created if missing; default %(default)s).")
    p.add_argument("--events", type=int, default=20_000, help="Events to post (default %(default)s).")
    p.add_argument(
        "--drift-at", type=int, default=10_000, help="Events before the concept reverses (default %(default)s)."
    )
    p.add_argument("--batch", type=int, default=100, help="Events per request (default %(default)s).")
    p.add_argument(
        "--rate",
        type=float,
        default=1_000.0,
        help="Events per second; 0 for as fast as possible (default %(default)s).",
    )
    p.add_argument("--noise", type=float, default=0.05, help="Fraction of labels flipped at random.")
    p.add_argument("--seed", type=int, default=7, help="Seed of the stream (default %(default)s).")
    p.add_argument("--token", help="API key, when the service has api_keys set.")
    return p


def main(argv: Sequence[str] | None = None) -> None:
    """Parse the command line and post the stream; exit non-zero with the reason on a refusal."""
    args = parser().parse_args(argv)
    for name in ("events", "batch"):
        if getattr(args, name) < 1:
            raise SystemExit(f"streamtree demo: --{name} must be at least 1")
    if args.drift_at < 0 or args.rate < 0 or not 0 <= args.noise < 0.5:
        raise SystemExit("streamtree demo: --drift-at and --rate must be >= 0, --noise in [0, 0.5)")
    try:
        run(args.url, args.model, args.events, args.drift_at, args.batch, args.rate, args.noise, args.seed, args.token)
    except (RuntimeError, OSError) as exc:
        raise SystemExit(f"streamtree demo: {exc}") from None


if __name__ == "__main__":  # pragma: no cover
    main(sys.argv[1:])
