"""The client guide's sessions (``docs/guides/client.md``, ``pycon`` blocks: doctests) run as
written, in page order, against a fresh service without API keys; the guide's URL
(``http://127.0.0.1:8000``) is replaced by the test service's."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from tests.client.conftest import serve, stop
from tests.docs.blocks import REPO, blocks, run_python

GUIDE = REPO / "docs" / "guides" / "client.md"
URL = "http://127.0.0.1:8000"


def test_the_guides_sessions_run_against_a_service(tmp_path: Path) -> None:
    sessions = [b for b in blocks(GUIDE) if b.lang == "pycon"]
    assert len(sessions) >= 8 and all(URL not in b.body or ">>>" in b.body for b in sessions)
    proc, service = serve(tmp_path / "data")
    try:
        failures = run_python([replace(b, lang="python", body=b.body.replace(URL, service.url)) for b in sessions])
    finally:
        stop(proc)
    assert not failures, "\n".join(failures)
