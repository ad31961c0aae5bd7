"""The factory: one URL (or a data directory) picks the engine."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from app.settings import Settings
from app.storage import DB_NAME, check_url, open_store
from app.storage.sqlite import SQLiteStore


def test_a_data_directory_means_sqlite_under_it(tmp_path: Path) -> None:
    s = open_store(tmp_path / "data")
    assert isinstance(s, SQLiteStore) and s.path == str(tmp_path / "data" / DB_NAME)
    s.close()
    assert (tmp_path / "data" / DB_NAME).exists()


def test_a_url_picks_the_engine(tmp_path: Path) -> None:
    s = open_store(f"sqlite:///{tmp_path}/x.sqlite3", sync="normal")
    assert isinstance(s, SQLiteStore)
    s.close()


@pytest.mark.parametrize("url", ["mysql://h/db", "/just/a/path", "sqlite:/x"])
def test_unknown_schemes_are_refused(url: str) -> None:
    with pytest.raises(ValueError, match="sqlite://"):
        check_url(url)
    with pytest.raises(ValueError):
        open_store(url)
    with pytest.raises(ValidationError, match="database_url"):
        Settings(database_url=url)
