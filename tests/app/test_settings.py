"""Settings: environment parsing, defaults and validators."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from app.settings import Settings

KEY1, KEY2 = "k" * 16, "secret-key-number-2"


def test_defaults_are_safe() -> None:
    s = Settings()
    assert s.max_body_bytes == 4 * 1024 * 1024
    assert (s.max_header_bytes, s.max_head_bytes, s.max_headers) == (8 * 1024, 64 * 1024, 100)
    assert s.api_keys == [] and s.protect_reads is False
    assert s.host == "127.0.0.1" and s.sync == "full"
    assert s.data_dir == Path("./data")


def test_api_keys_from_comma_separated_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STREAMTREE_API_KEYS", f" {KEY1}, {KEY2} ,")
    monkeypatch.setenv("STREAMTREE_MAX_BATCH", "7")
    s = Settings()
    assert s.api_keys == [KEY1, KEY2]
    assert s.max_batch == 7


def test_api_keys_as_a_json_list(monkeypatch: pytest.MonkeyPatch) -> None:
    # pydantic reads other lists from the environment as JSON: this form was one literal key
    monkeypatch.setenv("STREAMTREE_API_KEYS", f'["{KEY1}", "{KEY2}"]')
    assert Settings().api_keys == [KEY1, KEY2]
    for bad in (f'["{KEY1}", ', f'["{KEY1}", 7]', f'[{{"k": "{KEY1}"}}]'):
        monkeypatch.setenv("STREAMTREE_API_KEYS", bad)
        with pytest.raises(ValidationError, match="JSON list of keys") as info:
            Settings()
        assert info.value.errors()[0]["loc"][0] == "api_keys"


def test_protect_reads_without_keys_is_refused() -> None:
    # it started with every read open, and nothing said so
    with pytest.raises(ValidationError, match="protect_reads needs api_keys"):
        Settings(protect_reads=True)
    assert Settings(protect_reads=True, api_keys=[KEY1]).protect_reads


@pytest.mark.parametrize(
    "field, value",
    [
        ("api_keys", "short"),
        ("api_keys", "a-key-of-sixteen-Ä"),  # no HTTP client could send it
        ("max_batch", 0),
        ("port", 70000),
        ("sync", "off"),
        ("max_body_bytes", 10),
        ("max_answer_values", 10),
        ("send_stall_seconds", 0),
        ("pending_ttl_seconds", 0),
        ("metrics_window", 10**10),  # allocated per model at start: 298 GiB
        ("snapshots_kept", 10**20),  # beyond SQLite's integers: every snapshot failed
        ("data_dir", ""),  # silently the working directory
        ("data_dir", "   "),
        ("history_seconds", "inf"),  # stored in a snapshot as null: no snapshot was read back
        ("pending_ttl_seconds", float("inf")),
        ("history_seconds", float("nan")),
        ("advertise_url", "http://127.0.0.1:99999"),  # forwarding to it was a 500
        ("advertise_url", "http://:8000"),
        ("advertise_url", "http://a:8000/path"),
    ],
)
def test_invalid_settings_are_refused(field: str, value: object) -> None:
    with pytest.raises(ValidationError) as info:
        Settings(**{field: value})
    assert info.value.errors()[0]["loc"][0] == field


def test_data_dir_that_is_a_file_is_refused(tmp_path: Path) -> None:
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(ValidationError, match="not a directory"):
        Settings(data_dir=f)


def test_held_bodies_must_hold_the_largest_body() -> None:
    # a budget under one body: a body of the allowed size would always be refused 503
    with pytest.raises(ValidationError, match="max_held_body_bytes .* must be at least max_body_bytes"):
        Settings(max_held_body_bytes=2 * 1024 * 1024)
    assert Settings(max_body_bytes=1024, max_held_body_bytes=1024).max_held_body_bytes == 1024
