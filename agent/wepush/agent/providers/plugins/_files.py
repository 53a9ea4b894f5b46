"""The files of one plugin version directory: listing them, hashing them, and holding what was verified.

Verification reads every listed file exactly once into memory and the importer
later executes and serves those same bytes, so a file swapped on disk after the
check is never the one that runs.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

from ._manifest import MANIFEST_NAME, SIGNATURE_NAME, PluginFileEntry, PluginManifest

__all__ = ["PluginFiles", "PluginFilesError", "describe_files", "read_verified_files"]

# Paths the manifest never lists: the manifest itself and the signature over it.
_CONTROL_FILES = frozenset({MANIFEST_NAME, SIGNATURE_NAME})
_MAX_REPORTED = 5


class PluginFilesError(ValueError):
    """The directory does not hold exactly the files the manifest describes."""


@dataclass(frozen=True, slots=True)
class PluginFiles:
    """The verified content of a plugin version, by manifest path."""

    root: Path
    contents: Mapping[str, bytes]


def _walk(root: Path) -> tuple[list[str], list[str]]:
    """Regular files below ``root`` (posix paths, sorted) and entries that can never be part of a plugin."""
    files: list[str] = []
    refused: list[str] = []
    for directory, subdirectories, names in os.walk(root, followlinks=False):
        base = Path(directory).relative_to(root)
        for name in list(subdirectories):
            if (Path(directory) / name).is_symlink():
                refused.append(f"{(base / name).as_posix()} (symbolic link)")
                subdirectories.remove(name)
        for name in names:
            relative = (base / name).as_posix()
            mode = (Path(directory) / name).lstat().st_mode
            if stat.S_ISLNK(mode):
                refused.append(f"{relative} (symbolic link)")
            elif not stat.S_ISREG(mode):
                refused.append(f"{relative} (not a regular file)")
            elif relative not in _CONTROL_FILES:
                files.append(relative)
    return sorted(files), sorted(refused)


def _summary(items: list[str]) -> str:
    shown = ", ".join(items[:_MAX_REPORTED])
    return shown if len(items) <= _MAX_REPORTED else f"{shown} and {len(items) - _MAX_REPORTED} more"


def _read_regular(path: Path) -> bytes:
    # O_NOFOLLOW: a listed path replaced by a link between the walk and the read is refused, not followed.
    descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    with os.fdopen(descriptor, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise OSError(f"{path.name} is not a regular file")
        return handle.read()


def read_verified_files(root: Path, manifest: PluginManifest) -> PluginFiles:
    """Read every listed file and check its size and SHA-256; refuse unlisted files and links."""
    present, refused = _walk(root)
    problems: list[str] = []
    if refused:
        problems.append(f"not allowed in a plugin: {_summary(refused)}")
    listed = {entry.path for entry in manifest.files}
    unlisted = [path for path in present if path not in listed]
    if unlisted:
        problems.append(f"unlisted file(s) not covered by the manifest: {_summary(unlisted)}")
    contents: dict[str, bytes] = {}
    mismatched: list[str] = []
    for entry in manifest.files:
        try:
            data = _read_regular(root / entry.path)
        except FileNotFoundError:
            mismatched.append(f"{entry.path} is missing")
            continue
        except OSError as exc:
            mismatched.append(f"{entry.path} cannot be read ({exc.strerror or exc})")
            continue
        if len(data) != entry.size:
            mismatched.append(f"{entry.path}: size {len(data)} differs from the manifest's {entry.size}")
        elif hashlib.sha256(data).hexdigest() != entry.sha256:
            mismatched.append(f"{entry.path}: SHA-256 mismatch (manifest {entry.sha256[:12]}...)")
        else:
            contents[entry.path] = data
    if mismatched:
        problems.append(f"file hash check failed: {_summary(mismatched)}")
    if "__init__.py" not in listed:
        problems.append(
            "the manifest lists no __init__.py: a plugin is a Python package rooted at its directory"
        )
    if any(path.split("/", 1)[0] == "wepush" for path in listed):
        problems.append("the plugin bundles a 'wepush' package: the SPI and engine come from the agent")
    if problems:
        raise PluginFilesError("; ".join(problems))
    return PluginFiles(root, MappingProxyType(contents))


def describe_files(root: Path) -> list[PluginFileEntry]:
    """Manifest entries for every file of a plugin directory being signed (publisher side)."""
    present, refused = _walk(root)
    unsignable = refused + [
        path
        for path in present
        if any(part.startswith(".") or part == "__pycache__" for part in path.split("/"))
        or path.endswith((".pyc", ".pyo"))
    ]
    if unsignable:
        raise PluginFilesError(
            f"remove these before signing, they cannot be part of a plugin: {_summary(sorted(unsignable))}"
        )
    if not present:
        raise PluginFilesError(f"{root} holds no files besides {MANIFEST_NAME}")
    entries = []
    for path in present:
        data = _read_regular(root / path)
        entries.append(PluginFileEntry(path, hashlib.sha256(data).hexdigest(), len(data)))
    return entries
