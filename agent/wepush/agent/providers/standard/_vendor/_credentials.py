"""Secrets resolved for one provider session.

Every ``SecretValue`` is closed as soon as its text is copied out. Python strings
cannot be wiped, so the copies live exactly as long as the session and ``forget``
drops them at close. The same literals mask any echo of a credential (and any
access token the vendor issued) out of diagnostics and previews.
"""

from __future__ import annotations

from collections.abc import Mapping

from wepush.agent.providers.spi import SecretRef, SecretResolver

__all__ = ["MASK", "Credentials"]

MASK = "******"


class Credentials:
    """Named secret texts for a session; ``repr`` shows only the names."""

    __slots__ = ("_extra", "_values")

    def __init__(self, values: Mapping[str, str]) -> None:
        self._values = dict(values)
        self._extra: set[str] = set()

    @classmethod
    async def resolve(cls, resolver: SecretResolver, refs: Mapping[str, SecretRef | None]) -> Credentials:
        values: dict[str, str] = {}
        for name, ref in refs.items():
            if ref is None:
                continue
            secret = await resolver.resolve(ref)
            try:
                values[name] = secret.copy_str()
            finally:
                secret.close()
        return cls(values)

    def get(self, name: str) -> str:
        return self._values[name]

    def optional(self, name: str) -> str | None:
        return self._values.get(name)

    def remember(self, literal: str) -> None:
        """Mask ``literal`` too (an access token the vendor issued during the session)."""
        if literal:
            self._extra.add(literal)

    def mask(self, text: str) -> str:
        # Longest first, so a secret that contains another is masked whole.
        for secret in sorted({*self._values.values(), *self._extra}, key=len, reverse=True):
            if secret and secret in text:
                text = text.replace(secret, MASK)
        return text

    def forget(self) -> None:
        self._values.clear()
        self._extra.clear()

    def __repr__(self) -> str:
        return f"Credentials({sorted(self._values)})"
