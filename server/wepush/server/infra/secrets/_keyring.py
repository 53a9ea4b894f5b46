"""The master key ring: versioned AES-256 keys that wrap per-secret DEKs and never enter the database.

Key file format (the same text is accepted from the ``WEPUSH_MASTER_KEY`` environment variable):

* JSON::

      {"active": 2, "keys": {"1": "<base64 of 32 bytes>", "2": "<base64 of 32 bytes>"}, "retired": [3]}

  ``retired`` (optional) lists the versions ``wepush secrets retire`` removed: a new version never takes
  one of their numbers again.

* or lines of ``<version>:<base64 of 32 bytes>``; blank lines and lines starting with ``#`` are ignored;
  an optional ``active:<version>`` line selects the active version, otherwise the highest version is
  active (keeping an older version active is how an operator rolls a rotation back).

Versions are positive integers. Base64 may be standard or URL-safe, padded or not. Generate a key with
``openssl rand -base64 32``.

Every failure raises :class:`MasterKeyError` whose message names the file and the problem but never any
part of the key text.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import os
import secrets
import stat
import struct
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Final

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from wepush.server.domain.secrets import MasterKeyError, SecretDecryptionError

__all__ = ["MASTER_KEY_ENV", "MasterKeyRing"]

MASTER_KEY_ENV: Final = "WEPUSH_MASTER_KEY"

_KEY_BYTES: Final = 32
_NONCE_BYTES: Final = 12
_TAG_BYTES: Final = 16
_MAX_KEY_FILE_BYTES: Final = 64 * 1024
_WRAP_AAD_PREFIX: Final = b"wepush/dek-wrap/v1"
#: The largest version a secret can record: ``secret_record.key_version`` is a 32-bit integer column.
_MAX_VERSION: Final = 2**31 - 1
_FILE_FORMAT: Final = "wepush-master-key-ring/v1"


class MasterKeyRing:
    """An active master key version plus retained older versions (kept until rotation is verified).

    Key bytes stay inside this object: callers wrap and unwrap DEKs through it and never see a master key.
    ``rotate`` and ``retire`` mutate the ring in place; a lock keeps a concurrent wrap consistent.
    """

    __slots__ = ("_active", "_keys", "_lock", "_retired")

    def __init__(
        self, keys: Mapping[int, bytes], active_version: int, *, retired: Iterable[int] = ()
    ) -> None:
        if not keys:
            raise MasterKeyError("master key ring is empty")
        for version, key in keys.items():
            if isinstance(version, bool) or not isinstance(version, int) or version < 1:
                raise MasterKeyError("master key versions must be positive integers")
            if version > _MAX_VERSION:
                raise MasterKeyError(f"master key versions must be at most {_MAX_VERSION}")
            if len(key) != _KEY_BYTES:
                raise MasterKeyError(f"master key version {version} is not {_KEY_BYTES} bytes (AES-256)")
        if active_version not in keys:
            raise MasterKeyError(f"active master key version {active_version} is not in the key ring")
        self._keys: dict[int, bytes] = {v: bytes(k) for v, k in keys.items()}
        self._active = active_version
        #: Versions removed from the ring: their numbers are never issued again, so a copy of an older
        #: key file cannot hold a different key under a number the secrets use.
        self._retired: set[int] = set(retired) - set(keys)
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"MasterKeyRing(active_version={self._active}, versions={self.versions})"

    # ----------------------------------------------------------------- construction

    @classmethod
    def generate(cls) -> MasterKeyRing:
        """A fresh single-version ring held only in memory (tests, ephemeral embedded use)."""
        return cls({1: secrets.token_bytes(_KEY_BYTES)}, 1)

    @classmethod
    def create_standalone(cls, path: str | os.PathLike[str]) -> MasterKeyRing:
        """Load the standalone key file, creating it with mode 0600 on first start.

        Creation writes a private temporary file, fsyncs it and hard-links it into place, so the key file
        appears complete or not at all and an existing file is never overwritten (a concurrent first start
        simply loads the winner's file). An existing file gets the same checks as in server mode.
        """
        target = Path(path)
        if target.exists():
            return cls._load_file(target)
        try:
            return cls.create_file(target)
        except FileExistsError:
            return cls._load_file(target)

    @classmethod
    def create_file(cls, path: str | os.PathLike[str]) -> MasterKeyRing:
        """Write a new single-version key file with mode 0600 (its directory 0700 when made here).

        Raises :class:`FileExistsError` when the file is there, even when it appears concurrently: an
        existing key is never replaced, since secrets sealed under it could not be opened again.
        """
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        ring = cls.generate()
        _write_file(target, ring._serialize(), overwrite=False)
        return ring

    @classmethod
    def load_server(
        cls,
        path: str | os.PathLike[str] | None = None,
        *,
        environ: Mapping[str, str] | None = None,
        env_var: str = MASTER_KEY_ENV,
    ) -> MasterKeyRing:
        """Load the ring in server mode, failing closed; never generates a key.

        With ``path`` the key file is the only source (normally a read-only mount). Without it the ring is
        read from ``env_var`` in ``environ`` (default ``os.environ``), which is allowed but not recommended.
        The file must not be accessible by group or others (a Kubernetes secret volume needs
        ``defaultMode: 0400``); a symlink is followed and the target is checked.
        """
        if path is not None:
            return cls._load_file(Path(path))
        env = os.environ if environ is None else environ
        text = env.get(env_var)
        if text is None or not text.strip():
            raise MasterKeyError(
                f"no master key configured: set the master key file or the {env_var} environment variable; "
                "server mode never generates a master key"
            )
        return cls._parse(text, source=f"environment variable {env_var}")

    @classmethod
    def _load_file(cls, path: Path) -> MasterKeyRing:
        flags = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)
        try:
            fd = os.open(path, flags)
        except FileNotFoundError:
            raise MasterKeyError(
                f"master key file {path} does not exist; server mode never generates a master key "
                "(create one with 'wepush secrets init', or restore it from a backup)"
            ) from None
        except OSError as exc:
            raise MasterKeyError(f"master key file {path} cannot be opened: {exc.strerror}") from None
        try:
            # fstat on the opened descriptor: the checked file is the file we read.
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise MasterKeyError(f"master key file {path} is not a regular file")
            # POSIX only: on Windows access is governed by the service account's ACL, not mode bits.
            if os.name == "posix" and info.st_mode & 0o077:
                raise MasterKeyError(
                    f"master key file {path} is accessible by group or others "
                    f"(mode {stat.S_IMODE(info.st_mode):04o}); restrict it to the owner with chmod 600"
                )
            if info.st_size > _MAX_KEY_FILE_BYTES:
                raise MasterKeyError(f"master key file {path} is too large to be a key ring")
            raw = bytearray()
            while chunk := os.read(fd, _MAX_KEY_FILE_BYTES):
                raw += chunk
                if len(raw) > _MAX_KEY_FILE_BYTES:
                    raise MasterKeyError(f"master key file {path} is too large to be a key ring")
        finally:
            os.close(fd)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise MasterKeyError(f"master key file {path} is not UTF-8 text") from None
        return cls._parse(text, source=f"master key file {path}")

    @classmethod
    def _parse(cls, text: str, *, source: str) -> MasterKeyRing:
        stripped = text.strip()
        if not stripped:
            raise MasterKeyError(f"{source} is empty")
        retired: set[int] = set()
        if stripped.startswith("{"):
            keys, active, retired = _parse_json(stripped, source)
        else:
            keys, active = _parse_lines(stripped, source)
        if not keys:
            raise MasterKeyError(f"{source} contains no keys")
        if active is None:
            active = max(keys)
        if active not in keys:
            raise MasterKeyError(f"{source} names active version {active} which it does not contain")
        return cls(keys, active, retired=retired)

    # ----------------------------------------------------------------- inspection and rotation

    @property
    def active_version(self) -> int:
        return self._active

    @property
    def versions(self) -> tuple[int, ...]:
        return tuple(sorted(self._keys))

    def rotate(self) -> int:
        """Add a new random key as the active version, keep every older version; return the new version."""
        version = self.add_version()
        self.activate(version)
        return version

    def add_version(self) -> int:
        """Add a new random key without activating it; return its version. Staged so, a rotation can
        reach every host's key file before any secret is wrapped under the new version."""
        with self._lock:
            version = max(self._keys.keys() | self._retired) + 1
            if version > _MAX_VERSION:
                raise MasterKeyError(f"master key versions must be at most {_MAX_VERSION}")
            self._keys[version] = secrets.token_bytes(_KEY_BYTES)
            return version

    def activate(self, version: int) -> None:
        """Wrap new DEKs under ``version``, a version the ring already holds."""
        with self._lock:
            if version not in self._keys:
                raise MasterKeyError(f"master key version {version} is not in the key ring")
            self._active = version

    def adopt(self, newer: MasterKeyRing) -> None:
        """Take the versions and the active version of a freshly loaded ring (after a rotation by another
        process), keeping every version this ring already holds: nothing readable becomes unreadable."""
        with newer._lock:
            keys, active, retired = dict(newer._keys), newer._active, set(newer._retired)
        with self._lock:
            for version, key in keys.items():
                known = self._keys.get(version)
                if known is not None and known != key:
                    raise MasterKeyError(
                        f"master key version {version} changed in the key ring's source; refusing to continue"
                    )
            self._keys.update(keys)
            self._active = active
            self._retired |= retired - self._keys.keys()

    def retire(self, version: int) -> None:
        """Drop a retained version once every secret has been re-wrapped and the rollback window is over."""
        with self._lock:
            if version == self._active:
                raise MasterKeyError(f"master key version {version} is active and cannot be retired")
            if version not in self._keys:
                raise MasterKeyError(f"master key version {version} is not in the key ring")
            del self._keys[version]
            self._retired.add(version)

    def save(self, path: str | os.PathLike[str]) -> None:
        """Atomically write the ring (mode 0600), replacing an existing file: the rotation hand-off."""
        _write_file(Path(path), self._serialize(), overwrite=True)

    def _serialize(self) -> bytes:
        document: dict[str, Any] = {
            "format": _FILE_FORMAT,
            "active": self._active,
            "keys": {str(v): base64.b64encode(k).decode("ascii") for v, k in sorted(self._keys.items())},
        }
        if self._retired:
            document["retired"] = sorted(self._retired)
        return (json.dumps(document, indent=2) + "\n").encode("ascii")

    # ----------------------------------------------------------------- DEK wrapping

    def wrap_dek(self, dek: bytes | bytearray) -> tuple[int, bytes, bytes]:
        """Encrypt a DEK under the active version: ``(key_version, dek_nonce, encrypted_dek)``."""
        with self._lock:
            version = self._active
            key = self._keys[version]
        nonce = secrets.token_bytes(_NONCE_BYTES)
        return version, nonce, AESGCM(key).encrypt(nonce, dek, _wrap_aad(version))

    def unwrap_dek(self, version: int, nonce: bytes, encrypted_dek: bytes) -> bytearray:
        """Decrypt a DEK into a fresh ``bytearray`` the caller zeroes after use."""
        with self._lock:
            key = self._keys.get(version)
        if key is None:
            raise MasterKeyError(
                f"master key version {version} is not in the key ring "
                f"(available: {', '.join(map(str, self.versions))}); refusing to continue"
            )
        return open_aes_gcm(key, nonce, encrypted_dek, _wrap_aad(version))

    def opens(self, version: int, nonce: bytes, encrypted_dek: bytes) -> bool:
        """Whether this ring's key ``version`` is the one that wrapped ``encrypted_dek`` (checked by
        unwrapping it; the DEK is wiped at once). A key under the right number but from another file —
        a fresh key made after the real one was lost, say — answers ``False``."""
        try:
            dek = self.unwrap_dek(version, nonce, encrypted_dek)
        except SecretDecryptionError:
            return False
        dek[:] = bytes(len(dek))
        return True


def open_aes_gcm(key: bytes | bytearray, nonce: bytes, sealed: bytes, aad: bytes) -> bytearray:
    """AES-256-GCM decryption straight into a ``bytearray`` (no immutable plaintext copy).

    ``decrypt_into`` leaves unauthenticated plaintext in the buffer when the tag check fails, so the
    buffer is zeroed before the failure is reported.
    """
    if len(nonce) != _NONCE_BYTES or len(sealed) < _TAG_BYTES:
        raise SecretDecryptionError()
    buffer = bytearray(len(sealed) - _TAG_BYTES)
    try:
        AESGCM(key).decrypt_into(nonce, sealed, aad, buffer)
    except InvalidTag:
        buffer[:] = bytes(len(buffer))
        raise SecretDecryptionError() from None
    return buffer


def _wrap_aad(version: int) -> bytes:
    # Binding the version stops a wrapped DEK from being relabelled with another version number.
    return _WRAP_AAD_PREFIX + struct.pack(">I", version)


def _decode_key(text: str, version: int, source: str) -> bytes:
    cleaned = text.strip().replace("-", "+").replace("_", "/")
    cleaned += "=" * (-len(cleaned) % 4)
    try:
        key = base64.b64decode(cleaned, validate=True)
    except (binascii.Error, ValueError):
        raise MasterKeyError(f"{source}: key version {version} is not valid base64") from None
    if len(key) != _KEY_BYTES:
        raise MasterKeyError(f"{source}: key version {version} is not {_KEY_BYTES} bytes (AES-256)")
    return key


def _parse_version(text: str, source: str, where: str) -> int:
    candidate = text.strip()
    if not candidate.isascii() or not candidate.isdigit() or int(candidate) < 1:
        raise MasterKeyError(f"{source}: {where} has a key version that is not a positive integer")
    if int(candidate) > _MAX_VERSION:
        # Loaded, it sealed nothing: the version did not fit the wrapped DEK's associated data (past
        # 2**32) or the database's column (past 2**31 - 1), and saving a secret failed with a 500.
        raise MasterKeyError(f"{source}: {where} has a key version above {_MAX_VERSION}")
    return int(candidate)


class _DuplicateMember(Exception):
    pass


def _unique_members(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object whose member names are unique (``json`` keeps the last of two silently)."""
    members: dict[str, Any] = {}
    for name, value in pairs:
        if name in members:
            raise _DuplicateMember(f"member {name[:20]!r}")
        members[name] = value
    return members


def _parse_json(text: str, source: str) -> tuple[dict[int, bytes], int | None, set[int]]:
    try:
        document = json.loads(text, object_pairs_hook=_unique_members)
    except _DuplicateMember as duplicate:
        raise MasterKeyError(f"{source}: {duplicate} appears twice") from None
    except ValueError:
        raise MasterKeyError(f"{source} is not valid JSON") from None
    if not isinstance(document, dict) or not isinstance(document.get("keys"), dict):
        raise MasterKeyError(f'{source} must be a JSON object with a "keys" object')
    keys: dict[int, bytes] = {}
    for raw_version, raw_key in document["keys"].items():
        version = _parse_version(str(raw_version), source, "the keys object")
        if version in keys:
            # "1" and "01" name one version; taking either silently could seal under the wrong key.
            raise MasterKeyError(f"{source}: key version {version} appears twice")
        if not isinstance(raw_key, str):
            raise MasterKeyError(f"{source}: key version {version} must be a base64 string")
        keys[version] = _decode_key(raw_key, version, source)
    retired = _parse_retired(document.get("retired", []), source)
    active = document.get("active")
    if active is None:
        return keys, None, retired
    if isinstance(active, bool) or not isinstance(active, int):
        raise MasterKeyError(f'{source}: "active" must be an integer key version')
    return keys, active, retired


def _parse_retired(value: Any, source: str) -> set[int]:
    if not isinstance(value, list) or any(isinstance(v, bool) or not isinstance(v, int) for v in value):
        raise MasterKeyError(f'{source}: "retired" must be a list of integer key versions')
    return set(value)


def _parse_lines(text: str, source: str) -> tuple[dict[int, bytes], int | None]:
    keys: dict[int, bytes] = {}
    active: int | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        entry = line.strip()
        if not entry or entry.startswith("#"):
            continue
        head, sep, tail = entry.partition(":")
        if not sep:
            raise MasterKeyError(f"{source}: line {number} is not '<version>:<base64 key>'")
        if head.strip().lower() == "active":
            active = _parse_version(tail, source, f"line {number}")
            continue
        version = _parse_version(head, source, f"line {number}")
        if version in keys:
            raise MasterKeyError(f"{source}: key version {version} appears twice")
        keys[version] = _decode_key(tail, version, source)
    return keys, active


def _write_file(target: Path, data: bytes, *, overwrite: bool) -> None:
    """Write ``data`` to ``target`` with mode 0600 so that readers never observe a partial file."""
    temp = target.with_name(f".{target.name}.{secrets.token_hex(8)}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(temp, flags, 0o600)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if overwrite:
            os.replace(temp, target)
        else:
            # link() fails with FileExistsError instead of replacing: first start never clobbers a key.
            os.link(temp, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
    _fsync_directory(target.parent)


def _fsync_directory(directory: Path) -> None:
    if os.name != "posix":
        return
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
