"""Watching the files of a running SQLite store: what the server must notice and SQLite does not.

In WAL mode SQLite keeps committing into the files it opened, whatever happens to them on the
disk. :class:`FileWatch` tells the store (:mod:`app.storage.sqlite`) when the database or its
WAL is not the file it opened any more (removed, replaced), when the WAL was cut short
(truncated in place), and when another program wrote into the database file (a backup copied
over it keeps the file): commits would then be lost, or would go into a database the next
start finds malformed. :func:`why_not_writable` names the reason a database could not be opened
when it is its directory's.
"""

from __future__ import annotations

import logging
import math
import os
import time
from pathlib import Path

from .base import StorageError

__all__ = ["WAL_CHECK_EVERY", "WAL_MAGIC", "FileWatch", "refused_access", "why_not_writable"]

log = logging.getLogger("streamtree.app")

#: Seconds between two checks of the WAL file's identity (the database file's is checked at
#: every call): a stat of the WAL under steady commits cost a quarter of the commit rate.
WAL_CHECK_EVERY = 1.0

#: How the message of a file removed, replaced or written by another program ends.
_STOPPED = "nothing more can be stored or read; restore it, or restart the server"

#: The first four bytes of a WAL file SQLite wrote (big- and little-endian checksums).
WAL_MAGIC = (b"\x37\x7f\x06\x82", b"\x37\x7f\x06\x83")


def _stat(path: str) -> os.stat_result | None:
    """The file at ``path``, None if there is none."""
    try:
        return os.stat(path)
    except FileNotFoundError:
        return None


def _identity(st: os.stat_result | None) -> tuple[int, int] | None:
    """``(device, inode)``: which file is at a path."""
    return None if st is None else (st.st_dev, st.st_ino)


def _written(st: os.stat_result | None) -> tuple[int, int] | None:
    """``(size, mtime)`` (nanoseconds): what changes when anything writes into a file (not its
    ctime, which a chmod or a hard link moves too; ``cp -p`` sets the mtime to the copy's,
    another time)."""
    return None if st is None else (st.st_size, st.st_mtime_ns)


def _wal_size(path: str) -> int | None:
    """The size of the WAL at ``path``, or None when it is not a WAL SQLite wrote: its first
    bytes are not a WAL header (cut to nothing, then written past the cut by the next commit)."""
    try:
        with open(path, "rb") as wal:
            size = os.fstat(wal.fileno()).st_size
            return size if size == 0 or wal.read(4) in WAL_MAGIC else None
    except FileNotFoundError:
        return None


def refused_access(path: Path | str, exc: OSError) -> str:
    """One line for a file or directory this process may not use: what, why, and whose it is
    against who we are (a volume left by another user, a private directory mounted in)."""
    try:
        owner = f"owned by uid {os.stat(path).st_uid}"
    except OSError:
        owner = f"in {Path(path).parent}, owned by uid {_owner(Path(path).parent)}"
    return f"cannot use {path}: {exc.strerror or exc} (this process runs as uid {os.getuid()}; {owner})"


def _owner(path: Path) -> str:
    try:
        return str(os.stat(path).st_uid)
    except OSError:
        return "?"


def why_not_writable(directory: Path) -> str | None:
    """Why SQLite could not open or set up a database in ``directory`` when the reason is the
    directory's (SQLite says "unable to open database file" or "disk I/O error"), or None."""
    try:
        if directory.is_dir() and not os.access(directory, os.W_OK):
            return f"the data directory {directory} is not writable (SQLite makes its -wal and -shm files there)"
        st = os.statvfs(directory)
    except OSError:
        return None
    if st.f_bavail * st.f_frsize < 1 << 20:
        return f"the disk holding {directory} is full"
    return None


class FileWatch:
    """The database file at ``path`` and its WAL, as the store opened and left them.

    Only the store's own transactions write into the database file (their checkpoints: the
    server holds the database's lock), so a change of its size or times seen between two of
    its calls was made by another program.
    """

    def __init__(self, path: str) -> None:
        self.lost: str | None = None  # why nothing more can be stored, once something happened
        st = _stat(path)
        self._database = (path, _identity(st))
        self._wal = (f"{path}-wal", _identity(_stat(f"{path}-wal")))  # None until SQLite creates it
        self._left = _written(st)
        self._wal_checked = -math.inf
        # SQLite never shrinks the WAL while this connection is open (no journal_size_limit; the
        # truncating checkpoint only at close): a WAL found smaller than before was cut
        self._wal_size = 0

    def wrote(self) -> None:
        """The store's transaction ended: the database file is as it left it."""
        self._left = _written(_stat(self._database[0]))

    def check(self) -> None:
        """Raise :class:`StorageError` once the database (or its WAL: checked every
        :data:`WAL_CHECK_EVERY` seconds) is not the file at its path any more (removed,
        replaced), the WAL was cut short (truncated), or another program wrote into the
        database file: what the store commits would then be lost with the unlinked file, past
        a hole that the next open takes for the WAL's end, or into a database the next open
        finds malformed, and SQLite does not notice (in WAL mode commits touch only the WAL).
        From then on every call fails: the models are served as unavailable until a restart."""
        if self.lost is None:
            self.lost = self._trouble()
            if self.lost is not None:
                log.error("%s", self.lost)
        if self.lost is not None:
            raise StorageError(self.lost)

    def _trouble(self) -> str | None:
        """What happened to the files since the last call, or None (one stat of the database,
        and of the WAL when its check is due)."""
        path, known = self._database
        st = _stat(path)
        if _identity(st) != known:
            return f"{path} was removed or replaced while this server ran: {_STOPPED}"
        if _written(st) != self._left:
            return f"{path} was written by another program while this server ran (a copy over it?): {_STOPPED}"
        now = time.monotonic()
        if now - self._wal_checked < WAL_CHECK_EVERY:
            return None
        self._wal_checked = now
        wal, known = self._wal
        st = _stat(wal)
        if known is None:  # created by SQLite after the open: its first identity
            self._wal = (wal, known := _identity(st))
            if known is None:
                return None
        if _identity(st) != known:
            return f"{wal} was removed or replaced while this server ran: {_STOPPED}"
        size = _wal_size(wal)
        if size is None or size < self._wal_size:
            return (
                f"{wal} was cut short while this server ran: what it held since the last checkpoint is lost "
                "from the disk; restore the database, or restart the server"
            )
        self._wal_size = size
        return None
