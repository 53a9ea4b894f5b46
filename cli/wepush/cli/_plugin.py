"""``wepush plugin``: publisher keys, signing, verification and the list of installed plugins.

``keygen`` and ``sign`` are for publishers (the private key never leaves their
machine); ``verify`` and ``list`` run the agent's own checks, including
importing a plugin that passed them, against built-in providers installed here.
Heavy imports happen inside the actions so ``wepush version`` stays instant.
"""

from __future__ import annotations

import argparse
import os
import stat
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from wepush.agent.providers.plugins import PluginHealth, PluginLoader

__all__ = ["add_plugin_commands"]

EXIT_FAILED = 1
EXIT_USAGE = 2


def _fail(action: str, message: str, code: int = EXIT_FAILED) -> int:
    sys.stderr.write(f"wepush plugin {action}: {message}\n")
    return code


def _key_texts(values: Sequence[str]) -> list[str]:
    """A ``--trusted-key`` is the key itself (base64 or PEM) or the path of a file that holds it."""
    from wepush.agent.providers.plugins import PublisherKeyError

    texts = []
    for number, value in enumerate(values, start=1):
        path = Path(value)
        if not path.is_file():
            _refuse_a_missing_key_file(number, value)
            texts.append(value)
            continue
        try:
            texts.append(path.read_text(encoding="ascii"))
        except UnicodeDecodeError:
            # Say which file: the codec's own text names neither the file nor what was expected.
            raise PublisherKeyError(
                f"trusted key #{number}: {path} is not ASCII text (a base64 or PEM public key)"
            ) from None
    return texts


def _refuse_a_missing_key_file(number: int, value: str) -> None:
    """A value that is no key and reads as a path (a directory, or one with a dot or a slash, which a
    base64 key only may have) is a key file that is not there: say so, rather than that it is not base64."""
    from wepush.agent.providers.plugins import PublisherKeyError, load_public_key

    path = Path(value)
    if path.is_dir():
        raise PublisherKeyError(f"trusted key #{number}: {path} is a directory, not a public key file")
    if value.lstrip().startswith("-----BEGIN") or not ("." in value or os.sep in value):
        return
    try:
        load_public_key(value)
    except PublisherKeyError:
        raise PublisherKeyError(
            f"trusted key #{number}: {path} does not exist (and is not a base64 or PEM public key)"
        ) from None


def _loader(action: str, args: argparse.Namespace, directory: Path) -> PluginLoader | int:
    from wepush.agent.providers.plugins import PluginLoader, PublisherKeyError

    try:
        return PluginLoader(
            directory, trusted_keys=_key_texts(args.trusted_key), developer_mode=args.developer_mode
        )
    except (PublisherKeyError, OSError) as exc:
        return _fail(action, str(exc), EXIT_USAGE)


def _describe(health: PluginHealth) -> str:
    if health.reason:
        return health.reason
    return f"signed by key {health.key_id}" if health.key_id else ""


def _keygen(args: argparse.Namespace) -> int:
    from wepush.agent.providers.plugins import generate_key_pair

    out: Path = args.out
    name: str = args.name
    if name in ("", ".", "..") or Path(name).name != name:
        return _fail("keygen", f"--name {name!r} must be a file name stem, not a path", EXIT_USAGE)
    private_path, public_path = out / f"{name}.key", out / f"{name}.pub"
    for path in (private_path, public_path):
        # Either file may already be in use: the private key signs published plugins, the public key
        # is what operators trust. A new pair never replaces half of an old one.
        if path.exists() or path.is_symlink():
            return _fail("keygen", f"{path} already exists; choose another --out or --name")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return _fail("keygen", f"cannot create the directory {out}: {exc.strerror or exc}")
    pair = generate_key_pair()
    created: list[Path] = []
    try:
        # O_EXCL: never overwrite a key that may already sign published plugins; 0600 from creation on.
        for path, content, mode in (
            (private_path, pair.private_pem, 0o600),
            (public_path, (pair.public_text + "\n").encode("ascii"), 0o644),
        ):
            descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
            created.append(path)
            with os.fdopen(descriptor, "wb") as handle:
                handle.write(content)
    except OSError as exc:
        # Half a key pair is worse than none: remove what this run wrote.
        for path in created:
            path.unlink(missing_ok=True)
        if isinstance(exc, FileExistsError):
            return _fail("keygen", f"{exc.filename} already exists; choose another --out or --name")
        return _fail("keygen", f"cannot write {exc.filename or out}: {exc.strerror or exc}")
    sys.stdout.write(
        f"private key: {private_path} (mode 0600; keep it secret, it signs your plugins)\n"
        f"public key:  {public_path}\n"
        f"key id:      {pair.key_id}\n"
        f"add to wepush.plugins.trusted-keys: {pair.public_text}\n"
    )
    return 0


def _sign(args: argparse.Namespace) -> int:
    from wepush.agent.providers.plugins import ManifestError, PublisherKeyError, load_private_key, sign_plugin

    key_path: Path = args.key
    try:
        mode = key_path.stat().st_mode
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            return _fail(
                "sign",
                f"{key_path} is accessible by other users (mode {mode & 0o777:04o}); chmod 600 it first",
            )
        private_key = load_private_key(key_path.read_bytes())
        manifest = sign_plugin(args.directory, private_key)
    except (PublisherKeyError, ManifestError) as exc:
        return _fail("sign", str(exc))
    except OSError as exc:
        return _fail("sign", f"{exc.filename or key_path}: {exc.strerror or exc}")
    sys.stdout.write(
        f"signed {manifest.plugin_id}@{manifest.version}: {len(manifest.files)} files, "
        f"key id {manifest.key_id}\n"
    )
    return 0


def _manifest(args: argparse.Namespace) -> int:
    from wepush.agent.providers.plugins import ManifestError, refresh_manifest

    try:
        manifest = refresh_manifest(args.directory)
    except ManifestError as exc:
        return _fail("manifest", str(exc))
    except OSError as exc:
        return _fail("manifest", f"{exc.filename}: {exc.strerror or exc}")
    sys.stdout.write(
        f"updated {manifest.plugin_id}@{manifest.version}: {len(manifest.files)} files, UNSIGNED "
        "(loads only in developer mode)\n"
    )
    return 0


def _verify(args: argparse.Namespace) -> int:
    from wepush.agent.providers.catalog import ProviderCatalog
    from wepush.agent.providers.plugins import PluginStatus

    directory: Path = args.directory
    loader = _loader("verify", args, directory)
    if isinstance(loader, int):
        return loader
    if not directory.is_dir():
        return _fail("verify", f"{directory} is not a directory")
    # Against the installed built-ins, so a duplicate provider id fails here rather than on the agent.
    health = loader.load_version(directory, ProviderCatalog.from_entry_points())
    name = f"{health.plugin_id}@{health.version}" if health.version else health.plugin_id
    sys.stdout.write(f"{name}: {health.status}: {_describe(health)}\n")
    return EXIT_FAILED if health.status is PluginStatus.REJECTED else 0


def _list(args: argparse.Namespace) -> int:
    from wepush.agent.providers.catalog import ProviderCatalog

    loader = _loader("list", args, args.plugins_dir)
    if isinstance(loader, int):
        return loader
    results = loader.load_into(ProviderCatalog.from_entry_points())
    if args.developer_mode:
        sys.stdout.write("developer mode: unsigned plugins are loaded; never use this in production\n")
    if not results:
        sys.stdout.write(f"no plugins in {args.plugins_dir}\n")
        return 0
    rows = [("PLUGIN", "VERSION", "STATUS", "PROVIDERS", "DETAIL")]
    rows += [
        (h.plugin_id, h.version or "-", str(h.status), ",".join(h.providers) or "-", _describe(h))
        for h in results
    ]
    widths = [max(len(row[column]) for row in rows) for column in range(4)]
    for row in rows:
        cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=False)]
        sys.stdout.write("  ".join([*cells, row[4]]).rstrip() + "\n")
    return 0


def _trust_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--trusted-key",
        action="append",
        default=[],
        metavar="KEY",
        help="trusted publisher public key (base64 or PEM, or a file holding it); repeatable",
    )
    parser.add_argument(
        "--developer-mode", action="store_true", help="also load unsigned plugins (never in production)"
    )


def add_plugin_commands(parser: argparse.ArgumentParser) -> None:
    """The ``keygen``/``sign``/``manifest``/``verify``/``list`` actions under ``wepush plugin``."""
    actions = parser.add_subparsers(dest="plugin_action", required=True, metavar="ACTION")

    keygen = actions.add_parser("keygen", help="create a publisher Ed25519 key pair")
    keygen.add_argument("--out", type=Path, required=True, help="directory for NAME.key (0600) and NAME.pub")
    keygen.add_argument("--name", default="publisher", help="file name stem (default: publisher)")
    keygen.set_defaults(handler=_keygen)

    sign = actions.add_parser("sign", help="hash every file into plugin.json and sign it (publishers)")
    sign.add_argument("directory", type=Path, help="the plugin directory holding plugin.json")
    sign.add_argument("--key", type=Path, required=True, help="the publisher's private key file (0600)")
    sign.set_defaults(handler=_sign)

    manifest = actions.add_parser(
        "manifest", help="hash every file into plugin.json without signing (developer mode only)"
    )
    manifest.add_argument("directory", type=Path, help="the plugin directory holding plugin.json")
    manifest.set_defaults(handler=_manifest)

    verify = actions.add_parser("verify", help="run the agent's checks on one plugin version directory")
    verify.add_argument("directory", type=Path, help="the plugin directory holding plugin.json")
    _trust_options(verify)
    verify.set_defaults(handler=_verify)

    listing = actions.add_parser("list", help="show every installed plugin and its status")
    listing.add_argument("--plugins-dir", type=Path, required=True, help="the plugins/ directory")
    _trust_options(listing)
    listing.set_defaults(handler=_list)
