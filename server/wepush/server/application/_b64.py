"""Unpadded URL-safe base64 for the tokens the Service signs (page cursors, run confirmations)."""

from __future__ import annotations

import base64
import binascii

__all__ = ["b64decode_canonical", "b64encode_unpadded"]


def b64encode_unpadded(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def b64decode_canonical(text: str) -> bytes:
    """Decode ``text``, refusing every spelling but the one :func:`b64encode_unpadded` writes: the last
    character's unused low bits decode the same whatever they are, so without this a token altered
    there (``…A`` → ``…B``) was still accepted, where an altered token is promised to be refused."""
    try:
        data = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except binascii.Error as error:
        raise ValueError(str(error)) from None
    if b64encode_unpadded(data) != text:
        raise ValueError("not the canonical spelling")
    return data
