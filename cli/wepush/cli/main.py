"""Entry point of the ``wepush`` console script.

Each sub-command composes the processes described in ARCHITECTURE.md; the heavy imports happen inside the
command so ``wepush version`` stays instant.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path

from wepush.cli._operator import add_config_arguments
from wepush.cli._plugin import add_plugin_commands
from wepush.cli._secrets import add_secrets_commands
from wepush.cli._tokens import add_token_commands
from wepush.cli._version import product_version

EXIT_USAGE = 2
EXIT_UNAVAILABLE = 3
#: 128 + SIGINT, what a shell reports for a command stopped with Ctrl-C.
EXIT_INTERRUPTED = 130


def _serve(args: argparse.Namespace) -> int:
    from wepush.cli._serve import serve

    return serve(config_file=args.config, host=args.host, port=args.port, data_dir=args.data_dir)


def _migrate(args: argparse.Namespace) -> int:
    from wepush.cli._migrate import migrate

    return migrate(args)


def _agent(_args: argparse.Namespace) -> int:
    sys.stderr.write(
        "wepush agent: the remote agent (enrollment, gRPC Connect stream, lease supervisor) has not landed "
        "yet; the standalone Service runs an embedded agent instead. See the project issues.\n"
    )
    return EXIT_UNAVAILABLE


def _version(_args: argparse.Namespace) -> int:
    sys.stdout.write(f"wepush-next {product_version()}\n")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="wepush", description="WePush Next: self-hosted bulk message sending."
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve = commands.add_parser("serve", help="run the Service (standalone by default)")
    serve.add_argument("--config", type=Path, help="YAML configuration file")
    serve.add_argument("--host", help="bind address (default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="HTTP port (default 18990)")
    serve.add_argument("--data-dir", type=Path, help="data directory (default $WEPUSH_DATA_DIR)")
    serve.set_defaults(handler=_serve)

    migrate = commands.add_parser("migrate", help="upgrade the database schema (the single migration job)")
    add_config_arguments(migrate)
    migrate.set_defaults(handler=_migrate)

    agent = commands.add_parser("agent", help="run a remote agent")
    agent.add_argument("--config", type=Path, help="agent configuration file")
    agent.set_defaults(handler=_agent)

    plugin = commands.add_parser("plugin", help="sign, verify and list provider plugins")
    add_plugin_commands(plugin)

    secrets = commands.add_parser("secrets", help="rotate the master key and re-wrap secrets")
    add_secrets_commands(secrets)

    token = commands.add_parser("token", help="issue a SYSTEM_ADMIN API token at the host")
    add_token_commands(token)

    version = commands.add_parser("version", help="print the version")
    version.set_defaults(handler=_version)
    return parser


#: Connexion imports Starlette's test client at import time, and Starlette warns there about a test
#: dependency; an operator starting the Service should not be told to install one.
_TEST_CLIENT_WARNING = r"Using `httpx` with `starlette\.testclient` is deprecated"


def main(argv: Sequence[str] | None = None) -> int:
    warnings.filterwarnings("ignore", message=_TEST_CLIENT_WARNING)
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.handler(args)
    except KeyboardInterrupt:
        # Ctrl-C is the operator's decision, not a crash: no traceback. ``serve`` arrives here after
        # uvicorn's graceful shutdown (it re-raises the signal once done); an operator command that was
        # interrupted has undone what it must (a token not yet committed is never delivered).
        sys.stderr.write(f"wepush {args.command}: interrupted\n")
        return EXIT_INTERRUPTED
    return code


if __name__ == "__main__":
    raise SystemExit(main())
