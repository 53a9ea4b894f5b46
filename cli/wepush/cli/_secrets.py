"""``wepush secrets init|status|rotate|rewrap|retire``: the master key, for the operator.

* ``init`` creates the key file a server-mode Service reads (standalone creates its own on first start):
  one random version, mode 0600. It never replaces a file that is there.
* ``rotate`` adds a new random master key version to the key file, makes it active, keeps every older
  version, then re-wraps every secret's DEK under it. Running Services adopt the new version from the
  key file the first time they meet a secret wrapped by it, so no restart is needed — as long as their
  key file holds it: with instances on several hosts, each reading its own copy of the file, a rotation
  on one host left every other host unable to open any secret until the file was copied over.
* ``add`` and ``activate VERSION`` are that rotation in two steps for several hosts: ``add`` puts a new
  version in the key file without activating it; once the file is copied to every host, ``activate``
  makes the version active and re-wraps every secret under it, which every host can then open.
* ``rewrap`` re-wraps what is not yet under the active version (after an interrupted ``rotate``, or when
  the key ring comes from the environment and the operator changed it there and restarted).
* ``retire VERSION`` removes an old version from the key file once no secret uses it any more.
* ``status`` lists the versions and how many secrets each wraps.

Nothing here prints or logs key material or secret values.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING

from wepush.cli._operator import (
    EXIT_USAGE,
    Refused,
    Unhealthy,
    add_config_arguments,
    ensure_database_file,
    operator_config,
    require_current_schema,
    run_operator,
)
from wepush.server.config import ServiceConfig

if TYPE_CHECKING:
    from pathlib import Path

    from wepush.server.application.master_key import MasterKeyRewrap
    from wepush.server.infra.secrets import MasterKeyRing


def add_secrets_commands(parser: argparse.ArgumentParser) -> None:
    commands = parser.add_subparsers(dest="secrets_command", required=True, metavar="ACTION")
    for name, help_text in (
        ("init", "create the master key file with one random key version (never replaces one)"),
        ("status", "list master key versions and how many secrets each wraps"),
        ("rotate", "add and activate a new master key version, then re-wrap every secret"),
        ("add", "add a new master key version without activating it (copy the file, then 'activate')"),
        ("activate", "make a master key version of the key file active, then re-wrap every secret"),
        ("rewrap", "re-wrap every secret not yet under the active master key version"),
        ("retire", "remove a master key version that no secret uses any more"),
    ):
        command = commands.add_parser(name, help=help_text)
        add_config_arguments(command)
        if name == "retire":
            command.add_argument("version", type=int, help="the key version to remove")
        if name == "activate":
            command.add_argument("version", type=int, help="the key version to activate")
        command.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    config = operator_config("secrets", args)
    if config is None:
        return EXIT_USAGE
    action = _ACTIONS[args.secrets_command]
    from wepush.server.infra.db import run_database_task

    return run_operator(f"secrets {args.secrets_command}", lambda: run_database_task(action(config, args)))


def _key_file(config: ServiceConfig) -> Path:
    if config.secrets.master_key_env:
        raise Refused(
            f"the master key ring comes from the environment variable {config.secrets.master_key_env}; "
            "change it where it is kept, restart the Service, then run 'wepush secrets rewrap'"
        )
    if not config.secrets.master_key_file.exists():
        raise Refused(f"master key file {config.secrets.master_key_file} does not exist")
    return config.secrets.master_key_file


def load_ring(config: ServiceConfig) -> MasterKeyRing:
    from wepush.server.composition._service import load_key_ring

    if config.secrets.master_key_env is None and not config.secrets.master_key_file.exists():
        # Creating a key here would hide a lost one: secrets sealed under it could never be opened.
        raise Refused(
            f"master key file {config.secrets.master_key_file} does not exist (standalone creates it on "
            "its first start, 'wepush secrets init' for server mode; restore it from a backup if it was lost)"
        )
    return load_key_ring(config)


async def require_ring_opens_secrets(config: ServiceConfig, ring: MasterKeyRing, outcome: str) -> None:
    """Refuse a key ring that cannot open the database's secrets (a version missing, or another key under
    a version's number), in one line ending with ``outcome``: what the refusal left as it was."""
    from wepush.server.composition._service import oldest_sealed_secrets, ring_mismatch

    mismatch = ring_mismatch(config, ring, await oldest_sealed_secrets(config.database.url))
    if mismatch:
        raise Refused(f"{mismatch}; {outcome}")


async def _with_rewrap(
    config: ServiceConfig,
    ring: MasterKeyRing,
    work: Callable[[MasterKeyRewrap], Coroutine[object, object, str]],
    *,
    refuse_mismatch: bool = True,
) -> str:
    from wepush.server.application.master_key import MasterKeyRewrap
    from wepush.server.domain import utc_now
    from wepush.server.infra.db import SqlUnitOfWorkFactory, create_database
    from wepush.server.infra.secrets import LocalEnvelopeSecretStore

    ensure_database_file(config.database.url)
    await require_current_schema(config.database.url)
    if refuse_mismatch:
        # Before anything changes: a rotation under a key that cannot open the secrets would add a
        # version to the file and then fail on the first secret it tried to re-wrap.
        await require_ring_opens_secrets(config, ring, "nothing was changed")
    engine = create_database(config.database.url)
    try:
        store = LocalEnvelopeSecretStore(ring)
        return await work(MasterKeyRewrap(SqlUnitOfWorkFactory(engine), store, utc_now))
    finally:
        await engine.dispose()


def _usage(ring: MasterKeyRing, usage: dict[int, int], unopened: frozenset[int] = frozenset()) -> str:
    versions = sorted(set(ring.versions) | set(usage))
    lines = [f"active master key version: {ring.active_version}"]
    for version in versions:
        if version not in ring.versions:
            held = "MISSING from the key ring"
        elif version in unopened:
            held = "in the key ring under a DIFFERENT key: it cannot open them"
        else:
            held = "in the key ring"
        lines.append(f"  version {version}: {usage.get(version, 0)} secrets ({held})")
    return "\n".join(lines)


async def _init(config: ServiceConfig, _args: argparse.Namespace) -> str:
    from wepush.server.infra.secrets import MasterKeyRing

    if config.secrets.master_key_env:
        raise Refused(
            f"the master key ring comes from the environment variable {config.secrets.master_key_env}; "
            "put a key there instead (for example '1:' followed by the output of openssl rand -base64 32)"
        )
    path = config.secrets.master_key_file
    try:
        ring = MasterKeyRing.create_file(path)
    except FileExistsError:
        raise Refused(f"master key file {path} already exists; it is left as it is") from None
    return (
        f"created master key file {path} (mode 0600) with key version {ring.active_version}; "
        "back it up with the database, since secrets sealed under it cannot be opened without it"
    )


async def _status(config: ServiceConfig, _args: argparse.Namespace) -> str:
    from wepush.server.composition._service import oldest_sealed_secrets, unopened_versions

    ring = load_ring(config)

    async def report(rewrap: MasterKeyRewrap) -> str:
        unopened = unopened_versions(ring, await oldest_sealed_secrets(config.database.url))
        usage = await rewrap.usage()
        text = _usage(ring, usage, frozenset(unopened))
        if unopened or any(count and version not in ring.versions for version, count in usage.items()):
            raise Unhealthy(text)
        return text

    return await _with_rewrap(config, ring, report, refuse_mismatch=False)


async def _rewrap(config: ServiceConfig, _args: argparse.Namespace) -> str:
    ring = load_ring(config)

    async def run(rewrap: MasterKeyRewrap) -> str:
        done = await rewrap.rewrap_all(ring.active_version)
        return f"re-wrapped {done.rewrapped} secrets\n" + _usage(ring, done.by_version)

    return await _with_rewrap(config, ring, run)


async def _rotate(config: ServiceConfig, _args: argparse.Namespace) -> str:
    path = _key_file(config)
    ring = load_ring(config)

    async def run(rewrap: MasterKeyRewrap) -> str:
        # Only once the database answers, so a refused rotation leaves the key file as it was; and the
        # file before any secret, so every one re-wrapped below is readable with what the file holds.
        return await _switch_to(ring, path, ring.add_version(), rewrap, " (older versions kept)")

    return await _with_rewrap(config, ring, run)


async def _switch_to(
    ring: MasterKeyRing, path: Path, version: int, rewrap: MasterKeyRewrap, note: str
) -> str:
    """Activate ``version``, save the key file, then re-wrap every secret under the version."""
    ring.activate(version)
    ring.save(path)
    done = await rewrap.rewrap_all(version)
    return (
        f"master key version {version} is now active in {path}{note}\n"
        f"re-wrapped {done.rewrapped} secrets\n" + _usage(ring, done.by_version)
    )


async def _add(config: ServiceConfig, _args: argparse.Namespace) -> str:
    path = _key_file(config)
    ring = load_ring(config)

    async def run(rewrap: MasterKeyRewrap) -> str:
        version = ring.add_version()
        ring.save(path)
        return (
            f"master key version {version} added to {path}; version {ring.active_version} stays active\n"
            f"copy {path} to every host that runs an instance (keeping its mode 0600), then run "
            f"'wepush secrets activate {version}'\n" + _usage(ring, await rewrap.usage())
        )

    # Checked against the database first, like rotate: a file that cannot open the secrets is not spread.
    return await _with_rewrap(config, ring, run)


async def _activate(config: ServiceConfig, args: argparse.Namespace) -> str:
    path = _key_file(config)
    ring = load_ring(config)
    version = int(args.version)
    if version not in ring.versions:
        raise Refused(f"master key version {version} is not in {path}; run 'wepush secrets add' first")

    async def run(rewrap: MasterKeyRewrap) -> str:
        return await _switch_to(ring, path, version, rewrap, "")

    return await _with_rewrap(config, ring, run)


async def _retire(config: ServiceConfig, args: argparse.Namespace) -> str:
    path = _key_file(config)
    ring = load_ring(config)
    retired = int(args.version)
    if retired == ring.active_version:
        raise Refused(f"master key version {retired} is active; rotate to a new version first")

    async def run(rewrap: MasterKeyRewrap) -> str:
        usage = await rewrap.usage()
        if usage.get(retired, 0):
            raise Refused(
                f"{usage[retired]} secrets are still wrapped by master key version {retired}; "
                "run 'wepush secrets rewrap' first"
            )
        ring.retire(retired)
        ring.save(path)
        return f"master key version {retired} removed from {path}\n" + _usage(ring, usage)

    # Retiring a version nothing uses opens no secret, so it does not need the others to open.
    return await _with_rewrap(config, ring, run, refuse_mismatch=False)


_ACTIONS: dict[str, Callable[[ServiceConfig, argparse.Namespace], Coroutine[object, object, str]]] = {
    "init": _init,
    "status": _status,
    "rotate": _rotate,
    "add": _add,
    "activate": _activate,
    "rewrap": _rewrap,
    "retire": _retire,
}
