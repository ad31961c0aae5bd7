"""MkDocs hook: the committed benchmark results (``bench/results/``) become part of the site.

The pages link the results where they live in the repository (``../bench/results/speed.md``
from ``docs/benchmarks.md``), so the links work on a code host too. This hook adds every file
of ``bench/results/`` to the site under ``bench/results/`` and rewrites such links to point
there, so ``mkdocs build --strict`` checks them like any other link.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files, InclusionLevel

REPO = Path(__file__).resolve().parents[1]
RESULTS = "bench/results"
LINK = re.compile(r"(\]\()([^)\s#]+)([#)\s])")


def on_files(files: Files, config: Any) -> Files:
    for path in sorted((REPO / RESULTS).rglob("*")):
        if path.is_file() and not path.name.endswith(".partial"):
            uri = path.relative_to(REPO).as_posix()
            files.append(
                File(
                    uri,
                    src_dir=str(REPO),
                    dest_dir=config["site_dir"],
                    use_directory_urls=config["use_directory_urls"],
                    inclusion=InclusionLevel.NOT_IN_NAV,
                )
            )  # linked from the pages, not listed
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    src = page.file.src_uri
    if src.startswith(RESULTS + "/"):
        return markdown  # a result's own links are relative to bench/results already
    here = posixpath.dirname(src)
    in_repo = posixpath.join("docs", here)

    def rewrite(m: re.Match[str]) -> str:
        target = posixpath.normpath(posixpath.join(in_repo, m[2]))
        if not target.startswith(RESULTS + "/"):
            return m[0]
        return m[1] + posixpath.relpath(target, here or ".") + m[3]

    return LINK.sub(rewrite, markdown)
