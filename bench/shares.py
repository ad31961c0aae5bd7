"""Tables of configurations timed against a default: each cell a time and its share of the default's.

Shared by the benches that switch one part of a model off at a time (:mod:`bench.batch_cost`,
:mod:`bench.forest_cost`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["share_table", "write"]


def share_table(res: dict[str, Any], title: str, command: str, names: Sequence[str], digits: int = 2) -> str:
    """The run ``res`` (``run_header`` fields and ``streams``: per stream, a time per
    configuration of ``names``, the first being the default) as markdown: the title line with
    the run's date, commit and load, the ``command`` paragraph, then a row per stream whose
    cells read ``time (share of the default's)``.

    >>> res = {"date_utc": "now", "commit": "c", "streams": {"SEA": {"a": 2.0, "b": 1.5}},
    ...        "machine": {"cpus": 2, "loadavg_before": (0.5, 0, 0), "loadavg_after": (1.0, 0, 0)}}
    >>> print(share_table(res, "T", "Command: `x`.", ["a", "b"]).splitlines()[-1])
    | SEA | 2.00 (1.00) | 1.50 (0.75) |
    """
    m = res["machine"]
    default = names[0]
    lines = [
        f"# {title} ({res['date_utc']}, commit {res['commit']}, {m['cpus']} CPUs, "
        f"load average {m['loadavg_before'][0]:.2f} before, {m['loadavg_after'][0]:.2f} after)",
        "",
        command,
        "",
        "| stream | " + " | ".join(names) + " |",
        "|---|" + "---:|" * len(names),
    ]
    for stream, r in res["streams"].items():
        cells = [f"{r[k]:.{digits}f} ({r[k] / r[default]:.2f})" for k in names]
        lines.append(f"| {stream} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def write(results: Path, out: str, res: dict[str, Any], markdown: str) -> None:
    """Save the run as ``<out>.json`` and ``<out>.md`` under ``results``, and print the table."""
    (results / f"{out}.json").write_text(json.dumps(res, indent=2) + "\n")
    (results / f"{out}.md").write_text(markdown)
    print(markdown)
