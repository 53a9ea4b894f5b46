"""What the operator commands run at the host (``migrate``, ``secrets``, ``token``) share.

Each loads the Service's configuration the same way, and each ends in one line on standard error when it
cannot go on — a precondition to fix, an unreadable key, a database it cannot reach — never a stack
trace, and never a database server driver's text, which may quote connection details (SQLite's quotes
none, and is what the operator needs: a read-only or missing directory).
"""

from __future__ import annotations

import argparse
import inspect
import socket
import sqlite3
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from wepush.server.config import ConfigError, ServiceConfig, load_config

EXIT_FAILED = 1
EXIT_USAGE = 2


class Refused(Exception):
    """A precondition the operator has to fix; the message says what."""


class Unhealthy(Exception):
    """The report is complete but shows something to fix (a key version missing): printed as any report,
    and the command exits 1 so that a script or a monitoring check notices."""

    def __init__(self, report: str) -> None:
        super().__init__(report)
        self.report = report


def add_config_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", type=Path, help="YAML configuration file")
    parser.add_argument("--data-dir", type=Path, help="data directory (default $WEPUSH_DATA_DIR)")


def operator_config(command: str, args: argparse.Namespace) -> ServiceConfig | None:
    """The configuration the Service would run with, or ``None`` once the error has been written."""
    try:
        return load_config(args.config, data_dir=args.data_dir)
    except ConfigError as exc:
        sys.stderr.write(f"wepush {command}: configuration error: {exc}\n")
        return None


def run_operator(command: str, work: Callable[[], str], *, report_to: TextIO | None = None) -> int:
    """Run ``work``; its report goes to ``report_to`` (standard output unless told), a failure to stderr."""
    from sqlalchemy.exc import DBAPIError

    from wepush.server.domain.secrets import SecretDecryptionError, SecretStoreError
    from wepush.server.infra.db import UnknownSchemaRevision

    try:
        report = work()
    except Unhealthy as unhealthy:
        (report_to or sys.stdout).write(unhealthy.report + "\n")
        return EXIT_FAILED
    except SecretDecryptionError as exc:
        # Says nothing of which secret or why, on purpose; the operator's next step is the status report.
        return _failed(
            command,
            f"{exc} with the master key ring; 'wepush secrets status' shows which key versions it cannot open",
        )
    except (Refused, SecretStoreError, UnknownSchemaRevision) as exc:
        return _failed(command, str(exc))
    except DBAPIError as exc:
        return _failed(command, _database_unusable(exc))
    except TimeoutError as exc:
        # asyncpg's connection attempt gave up; its TimeoutError has no text of its own.
        said = str(exc) or f"no answer within {_connect_timeout():g} s"
        return _failed(command, f"cannot reach the database server ({said}); check database.url")
    except (ConnectionError, socket.gaierror) as exc:
        # What asyncpg raises itself when the server does not answer: an address, never a password.
        return _failed(command, f"cannot reach the database server ({exc}); check database.url")
    except OSError as exc:
        where = f": {exc.filename}" if exc.filename else ""
        return _failed(command, f"{exc.strerror or type(exc).__name__}{where}")
    (report_to or sys.stdout).write(report + "\n")
    return 0


def _database_unusable(exc: BaseException) -> str:
    """Why the database cannot be used, said without quoting a credential.

    A server's driver (asyncpg) may quote the URL's user or host in its text: only its error class is
    named (``InvalidCatalogNameError`` …). SQLite's text names no file and no credential, and it is what
    the operator needs ("attempt to write a readonly database", "unable to open database file")."""
    while exc.__cause__ is not None:
        exc = exc.__cause__
    if isinstance(exc, sqlite3.Error):
        said = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return f"cannot use the SQLite database ({said})"
    return f"cannot use the database ({type(exc).__name__}); check database.url and its server"


def _connect_timeout() -> float:
    """How long asyncpg waits for a server to answer a connection attempt: its own default, since the
    Service sets none (a ``timeout`` in the URL reaches asyncpg as text, which it cannot use)."""
    import asyncpg  # type: ignore[import-untyped]  # no stubs; only its signature is read

    default = inspect.signature(asyncpg.connect).parameters["timeout"].default
    return float(default)


def _failed(command: str, message: str) -> int:
    sys.stderr.write(f"wepush {command}: {message}\n")
    return EXIT_FAILED


async def require_current_schema(url: str) -> None:
    """Refuse a database this release cannot work on, saying which way it is off: behind (migrate it), or
    ahead and not declared fit for this release by the newer one that migrated it."""
    from wepush.server.infra.db import require_usable, schema_state_async

    schema = await schema_state_async(url)
    require_usable(schema)
    if not schema.usable:
        raise Refused("the database schema is not at the current revision; run 'wepush migrate' first")


def ensure_database_file(url: str) -> None:
    """Refuse a SQLite file that is not there: connecting to it would create it empty."""
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite" and parsed.database and not Path(parsed.database).exists():
        raise Refused(
            f"cannot open the database: {parsed.database} does not exist (start the Service once first, "
            "or pass the --data-dir or --config it runs with)"
        )
