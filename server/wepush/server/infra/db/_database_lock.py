"""One Service process per standalone SQLite database.

A standalone Service holds an exclusive advisory lock (``flock``) on ``<database file>.lock`` for as long
as it runs. Two things follow from it. A second Service started on the same database (a second
``make run``, a service manager starting the unit twice) is refused at once, naming the holder's process
id, instead of serving beside the first. And a Service that gets the lock knows that no other process
runs an embedded agent on this database, so a fresh heartbeat under its agent name can only be the last
one of a predecessor that crashed: its runs are recovered at once instead of after a lease TTL.

The kernel drops the lock when its process dies, ``kill -9`` included, so a crash never leaves it held.
The lock is advisory and local to the machine, as standalone is (a database on a network file system is
not a supported set-up). Server mode (PostgreSQL) runs several instances on purpose and takes no lock.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

from sqlalchemy import make_url

__all__ = ["DatabaseInUse", "DatabaseLock", "sqlite_database_file"]


class DatabaseInUse(RuntimeError):
    """Another live process holds the database's lock."""

    def __init__(self, database: Path, holder_pid: int | None) -> None:
        who = f"process {holder_pid}" if holder_pid is not None else "another process"
        super().__init__(
            f"another WePush Service ({who}) is running on the database {database}; stop it first, or give "
            "this one another data directory"
        )
        self.database = database
        self.holder_pid = holder_pid


def sqlite_database_file(url: str) -> Path | None:
    """The file of a SQLite database URL; ``None`` for PostgreSQL and in-memory databases."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or not parsed.database or parsed.database == ":memory:":
        return None
    return Path(parsed.database)


class DatabaseLock:
    """The held lock on one database file; :meth:`release` (or process exit) gives it up."""

    def __init__(self, database: Path, fd: int) -> None:
        self.database = database
        self._fd: int | None = fd

    @property
    def path(self) -> Path:
        return lock_path(self.database)

    @classmethod
    def acquire(cls, database: Path) -> DatabaseLock:
        """Take the lock without waiting; raise :class:`DatabaseInUse` when a live process holds it."""
        flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
        fd = os.open(lock_path(database), flags, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_pid(fd)
            os.close(fd)
            raise DatabaseInUse(database, holder) from None
        except BaseException:
            os.close(fd)
            raise
        # The holder's pid, for the message a second process gets; the lock itself is the flock.
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        return cls(database, fd)

    @staticmethod
    def check(database: Path) -> None:
        """Raise :class:`DatabaseInUse` when a live process holds the lock; take nothing."""
        if not lock_path(database).exists():
            return
        DatabaseLock.acquire(database).release()

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        # Closing the descriptor releases the flock; the file stays (removing it would race a newcomer
        # that opened it already and would then lock an unlinked file).
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
        os.close(fd)


def lock_path(database: Path) -> Path:
    return database.with_name(database.name + ".lock")


def _read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None
