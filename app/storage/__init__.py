"""Durable storage: the :class:`EventStore` interface, one module per engine, one factory.

The engine is chosen by the scheme of a URL, as SQLAlchemy and Django do:
``sqlite:///path/to/file`` (the default, under the data directory) or
``postgresql://user@host:port/dbname``. Engine modules are imported only when their scheme is
used, so a driver is loaded only where its engine is.
"""

from __future__ import annotations

import importlib
import re
import urllib.parse
from pathlib import Path

from .base import (
    Coordinator,
    EventStore,
    IdempotentAnswer,
    Lease,
    LeaseLost,
    ModelExists,
    SeqConflict,
    Snapshot,
    StorageError,
    StoredModel,
    Sync,
    open_state,
    seal_state,
)

__all__ = [
    "DB_NAME",
    "ENGINES",
    "Coordinator",
    "EventStore",
    "IdempotentAnswer",
    "Lease",
    "LeaseLost",
    "ModelExists",
    "SeqConflict",
    "Snapshot",
    "StorageError",
    "StoredModel",
    "Sync",
    "check_url",
    "open_state",
    "open_store",
    "redact",
    "scrub",
    "seal_state",
]

#: URL scheme -> ``module:class`` of its engine, the module relative to this package (the
#: server is importable as ``app`` in the repo and as ``streamtree_server`` when installed).
ENGINES = {
    "sqlite": ".sqlite:SQLiteStore",
    "postgresql": ".postgres:PostgresStore",
    "postgres": ".postgres:PostgresStore",  # libpq accepts both
}

#: The SQLite database file's name under a data directory (``sqlite:///<data_dir>/streamtree.sqlite3``).
DB_NAME = "streamtree.sqlite3"


def redact(url: str) -> str:
    """The URL without its password (``scheme://user:***@host/...?password=***``), for messages and logs."""
    scheme, sep, rest = url.partition("://")
    authority, slash, path = rest.partition("/")
    userinfo, at, host = authority.rpartition("@")
    if sep and at and ":" in userinfo:
        url = f"{scheme}://{userinfo.partition(':')[0]}:***@{host}{slash}{path}"
    return re.sub(r"([?&]password=)[^&]*", r"\1***", url)


def scrub(text: str, url: str) -> str:
    """``text`` (a driver's message about ``url``) with the URL's password replaced by ``***``,
    as written in the URL and percent-decoded: libpq quotes a malformed URL, or a bad part of it."""
    authority = url.partition("://")[2].partition("/")[0]
    userinfo, at, _ = authority.rpartition("@")
    found = [userinfo.partition(":")[2]] if at and ":" in userinfo else []
    found += re.findall(r"[?&]password=([^&]*)", url)
    for secret in {v for raw in found for v in (raw, urllib.parse.unquote(raw)) if v}:
        text = text.replace(secret, "***")
    return text


def check_url(url: str) -> str:
    """Return ``url`` if its scheme names an engine, else raise ``ValueError`` listing the schemes.

    The URL is echoed without its password, if it has one.
    """
    scheme, sep, _ = url.partition("://")
    if not sep or scheme not in ENGINES:
        raise ValueError(
            f"A database URL starts with one of {', '.join(f'{s}://' for s in ENGINES)}; got {redact(url)!r}"
        )
    return url


def open_store(target: str | Path, sync: Sync = "full") -> EventStore:
    """Open the store a URL names, or the SQLite database under a data directory.

    Parameters
    ----------
    target
        A URL such as ``sqlite:///data/streamtree.sqlite3`` or
        ``postgresql://user@host:5432/dbname``, or a data directory (a
        :class:`~pathlib.Path`), whose database is ``<dir>/streamtree.sqlite3``.
    sync
        Durability of each commit: ``"full"`` survives a power cut, ``"normal"`` a killed
        process only.

    Raises
    ------
    StorageError
        The store cannot be opened.
    ValueError
        The URL's scheme names no engine.
    """
    url = f"sqlite:///{Path(target) / DB_NAME}" if isinstance(target, Path) else check_url(target)
    module, _, name = ENGINES[url.partition("://")[0]].partition(":")
    engine: type[EventStore] = getattr(importlib.import_module(module, __name__), name)
    return engine.from_url(url, sync)
