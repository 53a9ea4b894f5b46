"""A scriptable fake provider for tests (descriptor and schemas shipped as package data)."""

from __future__ import annotations

from ._factory import FakeProviderFactory, FakeSession, Hang, Outcome

__all__ = ["FakeProviderFactory", "FakeSession", "Hang", "Outcome"]
