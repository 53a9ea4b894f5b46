"""The installed distribution's version."""

from __future__ import annotations

from importlib import metadata


def product_version() -> str:
    try:
        return metadata.version("wepush-next")
    except metadata.PackageNotFoundError:
        return "0.0.0+unknown"
