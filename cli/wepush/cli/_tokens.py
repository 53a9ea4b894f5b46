"""``wepush token issue-system-admin``: a SYSTEM_ADMIN API token, issued by the operator at the host.

The API issues workspace roles only, and the bootstrap token written at first start is the one
SYSTEM_ADMIN the Service makes itself. When that file is lost, or the token has to be replaced (it
leaked, or it was shared once too often), the operator issues another here and revokes the old one
through the API (``DELETE …/api-tokens/{id}``). The command needs what the Service needs to open its
sealed token pepper: the configuration, the database and the master key.

The token is written to ``--output`` (created with mode 0600, never over an existing file), or to
standard output with ``--output -``; it is never logged. It is committed only once written, so a token
that could not be delivered never works. The audit trail records ``token.create`` by the actor
``SYSTEM`` / ``wepush-cli``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from datetime import UTC, datetime
from pathlib import Path

from wepush.cli._operator import (
    EXIT_USAGE,
    Refused,
    add_config_arguments,
    ensure_database_file,
    operator_config,
    require_current_schema,
    run_operator,
)
from wepush.cli._secrets import load_ring, require_ring_opens_secrets
from wepush.server.config import ServiceConfig

_STDOUT = "-"
_MAX_NAME_CHARS = 200


def add_token_commands(parser: argparse.ArgumentParser) -> None:
    commands = parser.add_subparsers(dest="token_command", required=True, metavar="ACTION")
    issue = commands.add_parser(
        "issue-system-admin", help="issue a SYSTEM_ADMIN API token (to replace or recover the bootstrap one)"
    )
    # Argument values are checked as argparse reads them: a bad one is a usage error (exit 2, as a
    # missing --name is), which a script can tell from a database that cannot be reached (exit 1).
    issue.add_argument("--name", required=True, type=_name, help="the token's name, shown in the token list")
    issue.add_argument("--output", required=True, help="file to create (mode 0600), or - for standard output")
    issue.add_argument(
        "--expires-at", type=_expiry, help="RFC 3339 instant after which the token stops working"
    )
    add_config_arguments(issue)
    issue.set_defaults(handler=_run)


def _expiry(text: str) -> datetime:
    try:
        instant = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text[:40]!r} is not an RFC 3339 instant (2027-01-31T00:00:00Z)"
        ) from None
    if instant.tzinfo is None:
        raise argparse.ArgumentTypeError("needs a time zone (Z or an offset such as +08:00)")
    if instant <= datetime.now(UTC):
        raise argparse.ArgumentTypeError("is in the past: the token would never work")
    return instant


def _name(text: str) -> str:
    name = text.strip()
    if not 1 <= len(name) <= _MAX_NAME_CHARS or not name.isprintable():
        raise argparse.ArgumentTypeError(f"must be 1..{_MAX_NAME_CHARS} printable characters")
    return name


class _Delivery:
    """Writes the plaintext where the operator asked, before the token is committed."""

    def __init__(self, output: str) -> None:
        self.path = None if output == _STDOUT else Path(output)
        self._created = False
        if self.path is not None and (self.path.exists() or self.path.is_symlink()):
            raise Refused(
                f"{self.path} already exists; name a new file (the token is never written over one)"
            )

    def __call__(self, token: str) -> None:
        if self.path is None:
            sys.stdout.write(token + "\n")
            sys.stdout.flush()
            return
        # Never through a symbolic link, and never over a file created since the check above.
        flags = (
            os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
        )
        try:
            fd = os.open(self.path, flags, 0o600)
        except OSError as exc:
            raise Refused(f"cannot create {self.path}: {exc.strerror}") from None
        self._created = True
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(token + "\n")

    def undo(self) -> None:
        """Remove a written token that was never committed (only a file this delivery created)."""
        if self.path is not None and self._created:
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()


async def _issue(config: ServiceConfig, args: argparse.Namespace) -> str:
    from wepush.server.application.auth import Principal, PrincipalType
    from wepush.server.application.bootstrap import SystemBootstrap
    from wepush.server.application.credentials import TokenHasher
    from wepush.server.domain import utc_now
    from wepush.server.infra.db import SqlUnitOfWorkFactory, create_database
    from wepush.server.infra.secrets import LocalEnvelopeSecretStore

    name: str = args.name
    expires_at: datetime | None = args.expires_at
    delivery = _Delivery(args.output)
    ensure_database_file(config.database.url)
    await require_current_schema(config.database.url)
    ring = load_ring(config)
    # The token pepper is a sealed secret: a key file that cannot open it (a key made anew after the real
    # one was lost, another database's file) is said in one line, as rotate says it, not as a traceback.
    await require_ring_opens_secrets(config, ring, "no token was issued")
    engine = create_database(config.database.url)
    try:
        uow = SqlUnitOfWorkFactory(engine)
        bootstrap = SystemBootstrap(uow, LocalEnvelopeSecretStore(ring), utc_now)
        workspace = await bootstrap.find_default_workspace()
        if workspace is None:
            raise Refused("the Service has not started against this database yet: start it once first")
        keys = await bootstrap.server_keys(workspace.id)
        try:
            token = await bootstrap.issue_system_admin(
                workspace.id,
                TokenHasher(keys.token_pepper),
                delivery,
                name=name,
                expires_at=expires_at,
                actor=Principal(type=PrincipalType.SYSTEM, id="wepush-cli"),
            )
        except BaseException:
            delivery.undo()
            raise
    finally:
        await engine.dispose()
    where = "standard output" if delivery.path is None else f"{delivery.path} (mode 0600)"
    return f"SYSTEM_ADMIN token {token.id} ({token.name}) written to {where}"


def _run(args: argparse.Namespace) -> int:
    config = operator_config("token", args)
    if config is None:
        return EXIT_USAGE
    from wepush.server.infra.db import run_database_task

    # The report goes to standard error: standard output may be carrying the token itself.
    return run_operator(
        f"token {args.token_command}", lambda: run_database_task(_issue(config, args)), report_to=sys.stderr
    )
