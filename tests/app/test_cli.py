"""The console script: flags over environment over defaults, one worker, bad settings refused."""

from __future__ import annotations

from typing import Any

import pytest
import uvicorn

from app import cli


def test_serve_flags_override_environment(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:  # type: ignore[no-untyped-def]
    seen: dict[str, Any] = {}
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: seen.update(kw, app=app))
    monkeypatch.setenv("STREAMTREE_PORT", "9001")
    monkeypatch.setenv("STREAMTREE_HOST", "127.0.0.2")
    cli.main(["serve", "--data-dir", str(tmp_path), "--port", "9002"])
    assert seen["port"] == 9002 and seen["host"] == "127.0.0.2" and seen["workers"] == 1
    assert seen["app"].state.settings.data_dir == tmp_path


def test_invalid_settings_exit_with_a_message(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit, match="invalid settings") as info:
        cli.main(["serve", "--port", "70000"])
    assert "port" in str(info.value)


def test_a_command_is_required() -> None:
    with pytest.raises(SystemExit) as info:
        cli.main([])
    assert info.value.code == 2
