"""What the operator commands run at the host (``migrate``, ``secrets``, ``token``) share.

Each loads the Service's configuration the same way, and each ends in one line on standard error when it
cannot go on — a precondition to fix, an unreadable key, a database it cannot reach — never a stack
trace, and never the database driver's text, which may quote connection details.
"""

from __future__ import annotations

import argparse
import socket
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

    from wepush.server.domain.secrets import MasterKeyError
    from wepush.server.infra.db import UnknownSchemaRevision

    try:
        report = work()
    except Unhealthy as unhealthy:
        (report_to or sys.stdout).write(unhealthy.report + "\n")
        return EXIT_FAILED
    except (Refused, MasterKeyError, UnknownSchemaRevision) as exc:
        return _failed(command, str(exc))
    except DBAPIError as exc:
        return _failed(
            command, f"cannot use the database ({_driver_error(exc)}); check database.url and its server"
        )
    except (ConnectionError, TimeoutError, socket.gaierror) as exc:
        # What asyncpg raises itself when the server does not answer: an address, never a password.
        return _failed(command, f"cannot reach the database server ({exc}); check database.url")
    except OSError as exc:
        where = f": {exc.filename}" if exc.filename else ""
        return _failed(command, f"{exc.strerror or type(exc).__name__}{where}")
    (report_to or sys.stdout).write(report + "\n")
    return 0


def _driver_error(exc: BaseException) -> str:
    """The driver's own error class (``InvalidCatalogNameError`` …): it says what is wrong, quoting nothing."""
    while exc.__cause__ is not None:
        exc = exc.__cause__
    return type(exc).__name__


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
