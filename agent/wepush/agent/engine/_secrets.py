"""Secret references and values that never leak through repr, str, logs or exceptions."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Protocol

__all__ = [
    "MappingSecretResolver",
    "SecretClosedError",
    "SecretNotFoundError",
    "SecretRef",
    "SecretResolver",
    "SecretValue",
]

_MASK = "SecretValue(******)"


@dataclass(frozen=True, slots=True)
class SecretRef:
    """Names a secret; the value is fetched at run time through a ``SecretResolver``."""

    namespace: str
    name: str
    version: str | None = None

    def __str__(self) -> str:
        suffix = f"@{self.version}" if self.version is not None else ""
        return f"{self.namespace}/{self.name}{suffix}"


class SecretClosedError(RuntimeError):
    """The secret value was read after ``close()``."""


class SecretNotFoundError(LookupError):
    """No secret exists for the reference (the message names the reference, never a value)."""

    def __init__(self, ref: SecretRef) -> None:
        super().__init__(f"secret {ref} not found")
        self.ref = ref


class SecretValue:
    """A secret held in a private ``bytearray`` that ``close()`` overwrites with zeros.

    ``repr``/``str``/``format`` always give a fixed mask. Python strings cannot be wiped, so callers
    should prefer ``copy_bytes()`` into short-lived buffers and close the value as soon as possible.
    """

    __slots__ = ("__weakref__", "_buffer", "_closed")

    def __init__(self, value: bytes | bytearray | str) -> None:
        data = value.encode("utf-8") if isinstance(value, str) else value
        self._buffer = bytearray(data)
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    def copy_bytes(self) -> bytes:
        self._check_open()
        return bytes(self._buffer)

    def copy_str(self) -> str:
        self._check_open()
        return self._buffer.decode("utf-8")

    def close(self) -> None:
        """Zero the buffer; safe to call more than once."""
        for index in range(len(self._buffer)):
            self._buffer[index] = 0
        self._closed = True

    def _check_open(self) -> None:
        if self._closed:
            raise SecretClosedError("secret value is closed")

    def __enter__(self) -> SecretValue:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return _MASK

    def __str__(self) -> str:
        return _MASK

    def __format__(self, format_spec: str) -> str:
        return _MASK

    def __reduce__(self) -> tuple[object, ...]:
        # Pickling would copy the plaintext out of the process-local buffer.
        raise TypeError("SecretValue cannot be pickled")


class SecretResolver(Protocol):
    """Port: resolves a reference into a fresh ``SecretValue`` the caller owns and must close."""

    async def resolve(self, ref: SecretRef) -> SecretValue: ...


class MappingSecretResolver:
    """An in-memory resolver for tests and embedded use.

    A reference without a version matches the entry stored without a version.
    """

    def __init__(self, secrets: Mapping[SecretRef, str | bytes]) -> None:
        self._secrets: dict[SecretRef, bytes] = {
            ref: value.encode("utf-8") if isinstance(value, str) else bytes(value)
            for ref, value in secrets.items()
        }
        self.resolved: list[SecretRef] = []

    async def resolve(self, ref: SecretRef) -> SecretValue:
        try:
            raw = self._secrets[ref]
        except KeyError:
            raise SecretNotFoundError(ref) from None
        self.resolved.append(ref)
        return SecretValue(raw)

    def __repr__(self) -> str:
        return f"MappingSecretResolver(<{len(self._secrets)} secrets>)"
