"""The console script: flags over environment over defaults, one worker, bad settings refused."""

from __future__ import annotations

import socket
from typing import Any

import pytest
import uvicorn

from app import cli, node
from app.storage.sqlite import SQLiteStore

LISTENS = cli._cannot_listen


@pytest.fixture(autouse=True)
def any_address(monkeypatch: pytest.MonkeyPatch) -> None:
    """The ports these tests name may be in use here: no check that ``serve`` could listen
    (but in the test of that check)."""
    monkeypatch.setattr(cli, "_cannot_listen", lambda host, port: None)


@pytest.fixture
def no_store(monkeypatch: pytest.MonkeyPatch) -> None:
    """``serve`` opens the store before uvicorn starts: none here (the app is not started)."""
    monkeypatch.setattr(node, "open_owned_store", lambda settings: None)


@pytest.mark.usefixtures("no_store")
def test_serve_flags_override_environment(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:  # type: ignore[no-untyped-def]
    seen: dict[str, Any] = {}
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: seen.update(kw, app=app))
    monkeypatch.setenv("STREAMTREE_PORT", "9001")
    monkeypatch.setenv("STREAMTREE_HOST", "127.0.0.2")
    cli.main(["serve", "--data-dir", str(tmp_path), "--port", "9002"])
    assert seen["port"] == 9002 and seen["host"] == "127.0.0.2" and seen["workers"] == 1
    assert seen["app"].state.settings.data_dir == tmp_path
    # uvicorn's default believed X-Forwarded-* from 127.0.0.1: any local client chose its address
    assert seen["proxy_headers"] is False and seen["forwarded_allow_ips"] is None
    monkeypatch.setenv("STREAMTREE_FORWARDED_ALLOW_IPS", "10.0.0.7")
    cli.main(["serve", "--data-dir", str(tmp_path)])
    assert seen["proxy_headers"] is True and seen["forwarded_allow_ips"] == "10.0.0.7"


def test_invalid_settings_exit_with_one_line_naming_each(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(SystemExit) as info:
        cli.main(["serve", "--port", "70000"])
    assert str(info.value) == "streamtree serve: invalid settings: port: Input should be less than or equal to 65535"
    monkeypatch.setenv("STREAMTREE_MAX_BATCH", "0")
    with pytest.raises(SystemExit) as info:
        cli.main(["serve", "--port", "70000"])
    assert str(info.value).count("\n") == 0 and "; max_batch: Input should be greater than" in str(info.value)
    monkeypatch.delenv("STREAMTREE_MAX_BATCH")
    monkeypatch.setenv("STREAMTREE_PROTECT_READS", "true")  # a check of two settings: named in its sentence
    with pytest.raises(SystemExit) as info:
        cli.main(["serve"])
    assert str(info.value) == (
        "streamtree serve: invalid settings: protect_reads needs api_keys: without a key every read would stay open"
    )


def test_a_command_is_required() -> None:
    with pytest.raises(SystemExit) as info:
        cli.main([])
    assert info.value.code == 2


@pytest.mark.usefixtures("no_store")
def test_database_url_from_flag_or_environment(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:  # type: ignore[no-untyped-def]
    seen: dict[str, Any] = {}
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: seen.update(app=app))
    monkeypatch.setenv("STREAMTREE_DATABASE_URL", "postgresql://env@127.0.0.1:5432/a")
    cli.main(["serve", "--data-dir", str(tmp_path)])
    assert seen["app"].state.settings.database_url == "postgresql://env@127.0.0.1:5432/a"
    cli.main(["serve", "--data-dir", str(tmp_path), "--database-url", "postgresql://flag@127.0.0.1:5432/b"])
    assert seen["app"].state.settings.database_url == "postgresql://flag@127.0.0.1:5432/b"
    assert seen["app"].state.settings.data_dir == tmp_path  # still accepted beside a PostgreSQL URL


def test_a_bad_database_url_is_refused_without_its_password() -> None:
    with pytest.raises(SystemExit, match="database_url") as info:
        cli.main(["serve", "--database-url", "mysql://user:s3cret@host/db"])
    assert "postgresql://" in str(info.value) and "s3cret" not in str(info.value)


def test_a_store_that_cannot_be_opened_stops_the_start_in_one_line(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: pytest.fail("the server started"))
    held = SQLiteStore(tmp_path / "streamtree.sqlite3")
    held.own()
    try:
        with pytest.raises(SystemExit) as info:
            cli.main(["serve", "--data-dir", str(tmp_path)])
        message = str(info.value)
        assert message.startswith(f"streamtree serve: cannot open the store at {tmp_path}: another streamtree server")
        assert "\n" not in message
    finally:
        held.close()
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(SystemExit) as info:
        cli.main(["serve", "--database-url", f"postgresql://me:s3cret@127.0.0.1:{port}/db"])
    message = str(info.value)
    assert message.startswith(f"streamtree serve: cannot open the store at postgresql://me:***@127.0.0.1:{port}/db: ")
    assert "s3cret" not in message and "\n" not in message


def test_a_corrupt_database_stops_the_start_in_one_line(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    # a page of the event log overwritten: it failed inside the lifespan, in uvicorn's traceback
    import sqlite3

    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: pytest.fail("the server started"))
    store = SQLiteStore(tmp_path / "streamtree.sqlite3")
    store.create_model("default", "{}")
    for seq in range(1, 2001):
        store.append("default", seq, [f'{{"features": {{"a": {seq}}}, "label": "x"}}'])
    store.close()
    with sqlite3.connect(tmp_path / "streamtree.sqlite3") as db:
        root = db.execute("SELECT rootpage FROM sqlite_master WHERE name = 'events'").fetchone()[0]
        page = db.execute("PRAGMA page_size").fetchone()[0]
    with open(tmp_path / "streamtree.sqlite3", "r+b") as f:
        f.seek((root - 1) * page)
        f.write(b"\xff" * page)
    with pytest.raises(SystemExit) as info:
        cli.main(["serve", "--data-dir", str(tmp_path)])
    assert str(info.value) == (
        f"streamtree serve: cannot open the store at {tmp_path}: DatabaseError: database disk image is malformed"
    )


def test_a_data_dir_that_cannot_be_made_stops_the_start_in_one_line(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    # its parent a file: mkdir's NotADirectoryError ended the start in a traceback
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: pytest.fail("the server started"))
    (tmp_path / "file").write_text("x")
    with pytest.raises(SystemExit) as info:
        cli.main(["serve", "--data-dir", str(tmp_path / "file" / "data")])
    assert str(info.value) == (
        f"streamtree serve: cannot open the store at {tmp_path / 'file' / 'data'}: "
        f"cannot make the directory {tmp_path / 'file' / 'data'}: Not a directory"
    )


@pytest.mark.usefixtures("no_store")
def test_an_address_the_server_cannot_listen_on_stops_the_start_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    # it was found by uvicorn after the kernels loaded: "[Errno -2] Name or service not known", exit 3
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: pytest.fail("the server started"))
    monkeypatch.setattr(cli, "_cannot_listen", LISTENS)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        for host, reason in [("no such host!", "not known"), ("192.0.2.1", "assign"), ("127.0.0.1", "in use")]:
            with pytest.raises(SystemExit) as info:
                cli.main(["serve", "--host", host, "--port", str(port)])
            message = str(info.value)
            assert message.startswith(f"streamtree serve: cannot listen on host {host!r}, port {port}: ")
            assert reason in message and "\n" not in message


def test_the_services_logger_is_on_uvicorns_handler_at_the_level_asked() -> None:
    config = cli.log_config("warning")
    assert config["loggers"]["streamtree"] == {"handlers": ["default"], "level": "WARNING", "propagate": False}
    assert "uvicorn" in config["loggers"]  # uvicorn's own kept
