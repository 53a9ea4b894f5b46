"""Importing a verified plugin from memory under its own module name prefix.

Each plugin version becomes the package ``wepush_plugins.<slug>``; its modules
and package data are served from the bytes that passed verification (see
``_files``), never re-read from disk. That closes two gaps a plain
path-based import leaves open: a file replaced after its hash was checked,
and a ``__pycache__/*.pyc`` that Python would prefer over the verified
source. Nothing is added to ``sys.path``, so a plugin's modules cannot shadow
another plugin's or the agent's.

This is isolation of *names*, not a sandbox: plugin code runs in the agent's
process with the agent's rights. The signature establishes who published
the code; untrusted code needs a separate process runner.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import io
import re
import sys
import threading
from collections.abc import Iterator, Mapping
from importlib.resources.abc import Traversable, TraversableResources
from types import CodeType, ModuleType
from typing import IO, Any

from ._files import PluginFiles

__all__ = ["PLUGIN_MODULE_ROOT", "import_plugin", "module_name_for", "unload_plugin"]

PLUGIN_MODULE_ROOT = "wepush_plugins"


def module_name_for(plugin_id: str, version: str, manifest: bytes) -> str:
    """Same verified manifest, same module; another version or another build, another module."""
    slug = re.sub(r"[^0-9A-Za-z]", "_", f"{plugin_id}_{version}")
    return f"{PLUGIN_MODULE_ROOT}.{slug}_{hashlib.sha256(manifest).hexdigest()[:12]}"


class _MemoryPath(Traversable):
    """A file or directory inside the verified snapshot, for ``importlib.resources``."""

    def __init__(self, files: Mapping[str, bytes], path: str) -> None:
        self._files = files
        self._path = path

    def _prefix(self) -> str:
        return f"{self._path}/" if self._path else ""

    def iterdir(self) -> Iterator[Traversable]:
        prefix = self._prefix()
        children = sorted(
            {key[len(prefix) :].split("/", 1)[0] for key in self._files if key.startswith(prefix)}
        )
        return iter([_MemoryPath(self._files, f"{prefix}{child}") for child in children])

    def is_dir(self) -> bool:
        prefix = self._prefix()
        return any(key.startswith(prefix) for key in self._files)

    def is_file(self) -> bool:
        return self._path in self._files

    def joinpath(self, *descendants: str) -> Traversable:  # type: ignore[override]
        parts = [self._path] if self._path else []
        for descendant in descendants:
            parts.extend(part for part in str(descendant).split("/") if part and part != ".")
        return _MemoryPath(self._files, "/".join(parts))

    def __truediv__(self, child: str) -> Traversable:  # type: ignore[override]
        return self.joinpath(child)

    def open(self, mode: str = "r", *args: Any, **kwargs: Any) -> IO[Any]:
        if self._path not in self._files:
            raise FileNotFoundError(self._path)
        raw = io.BytesIO(self._files[self._path])
        if mode == "rb":
            return raw
        if mode == "r":
            return io.TextIOWrapper(raw, *args, **kwargs)
        raise ValueError(f"plugin resources are read-only; mode {mode!r} is not supported")

    def read_bytes(self) -> bytes:
        if self._path not in self._files:
            raise FileNotFoundError(self._path)
        return self._files[self._path]

    def read_text(self, encoding: str | None = None) -> str:
        return self.read_bytes().decode(encoding or "utf-8")

    @property
    def name(self) -> str:
        return self._path.rsplit("/", 1)[-1]

    def __repr__(self) -> str:
        return f"<plugin resource {self._path or '.'}>"


class _MemoryResources(TraversableResources):
    def __init__(self, files: Mapping[str, bytes], directory: str) -> None:
        self._root = _MemoryPath(files, directory)

    def files(self) -> Traversable:
        return self._root


class _VerifiedSourceLoader(importlib.abc.InspectLoader):
    """Compiles a module from the verified bytes; writes no bytecode cache."""

    def __init__(self, plugin: PluginFiles, package_name: str) -> None:
        self._plugin = plugin
        self._package_name = package_name

    def _relative(self, fullname: str) -> tuple[str, bool] | None:
        """The snapshot path of ``fullname`` and whether it is a package, or None if absent."""
        if fullname == self._package_name:
            return "__init__.py", True
        tail = fullname[len(self._package_name) + 1 :].replace(".", "/")
        if f"{tail}/__init__.py" in self._plugin.contents:
            return f"{tail}/__init__.py", True
        if f"{tail}.py" in self._plugin.contents:
            return f"{tail}.py", False
        return None

    def spec_for(self, fullname: str) -> importlib.machinery.ModuleSpec | None:
        found = self._relative(fullname)
        if found is None:
            return None
        path, is_package = found
        spec = importlib.machinery.ModuleSpec(
            fullname, self, origin=str(self._plugin.root / path), is_package=is_package
        )
        spec.has_location = True
        if is_package:
            spec.submodule_search_locations = [str((self._plugin.root / path).parent)]
        return spec

    def is_package(self, fullname: str) -> bool:
        found = self._relative(fullname)
        return found is not None and found[1]

    def get_source(self, fullname: str) -> str | None:
        found = self._relative(fullname)
        if found is None:
            raise ImportError(f"no verified source for {fullname}", name=fullname)
        return importlib.util.decode_source(self._plugin.contents[found[0]])

    def get_code(self, fullname: str) -> CodeType | None:
        found = self._relative(fullname)
        if found is None:
            raise ImportError(f"no verified source for {fullname}", name=fullname)
        path, _ = found
        return compile(self._plugin.contents[path], str(self._plugin.root / path), "exec", dont_inherit=True)

    def get_resource_reader(self, fullname: str) -> TraversableResources:
        found = self._relative(fullname)
        directory = found[0].rpartition("/")[0] if found is not None and found[1] else ""
        return _MemoryResources(self._plugin.contents, directory)


class _PluginFinder(importlib.abc.MetaPathFinder):
    """Resolves ``wepush_plugins.*`` names, and only those, from registered snapshots."""

    def __init__(self) -> None:
        self._loaders: dict[str, _VerifiedSourceLoader] = {}
        self._lock = threading.Lock()

    def register(self, package_name: str, loader: _VerifiedSourceLoader) -> None:
        with self._lock:
            self._loaders[package_name] = loader

    def unregister(self, package_name: str) -> None:
        with self._lock:
            self._loaders.pop(package_name, None)

    def find_spec(
        self, fullname: str, path: Any = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if not fullname.startswith(f"{PLUGIN_MODULE_ROOT}."):
            return None
        package_name = ".".join(fullname.split(".", 2)[:2])
        with self._lock:
            loader = self._loaders.get(package_name)
        if loader is None:
            return None
        spec = loader.spec_for(fullname)
        if spec is None:
            # Stop here: falling through to the path finder would import an unverified file from disk.
            raise ModuleNotFoundError(
                f"No module named {fullname!r} among the plugin's verified files", name=fullname
            )
        return spec


_finder = _PluginFinder()
_install_lock = threading.Lock()


def _install() -> None:
    with _install_lock:
        if _finder not in sys.meta_path:
            # First, so no other finder is consulted for plugin names; it ignores every other name.
            sys.meta_path.insert(0, _finder)
        if PLUGIN_MODULE_ROOT not in sys.modules:
            root_spec = importlib.machinery.ModuleSpec(PLUGIN_MODULE_ROOT, None, is_package=True)
            root_spec.submodule_search_locations = []
            sys.modules[PLUGIN_MODULE_ROOT] = importlib.util.module_from_spec(root_spec)


def import_plugin(package_name: str, plugin: PluginFiles) -> ModuleType:
    """Import the plugin's root package (its ``__init__.py``) from the verified snapshot."""
    _install()
    _finder.register(package_name, _VerifiedSourceLoader(plugin, package_name))
    try:
        return importlib.import_module(package_name)
    except BaseException:
        unload_plugin(package_name)
        raise


def unload_plugin(package_name: str) -> None:
    """Forget a plugin that was refused after import (its module-level side effects cannot be undone)."""
    _finder.unregister(package_name)
    for name in [n for n in sys.modules if n == package_name or n.startswith(f"{package_name}.")]:
        del sys.modules[name]
