"""Which item keys of an upload may repeat, in fixed memory, so the duplicate marking ranks only those.

Every accepted key sets one bit of a bitmap chosen by its hash. A key whose bit is already set may be a
repeat (or collide with another key) and becomes a suspect; a key that occurs twice always finds its own
bit set the second time, so every repeated key is a suspect and none is missed. The database then ranks
only the rows of suspect keys instead of sorting every accepted row. The bitmap has a fixed size, so
memory stays flat whatever the file size; when collisions make the suspects too many, the filter gives
up and the marking ranks every row as before.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from wepush.server.domain import StagedRecord, StagedRowStatus

__all__ = ["RepeatedKeys"]

#: 2**26 bits (8 MiB): about 1.5 % of a million distinct keys collide.
_BITS_LOG2: Final = 26
_MAX_SUSPECTS: Final = 200_000
_ACCEPTED: Final = StagedRowStatus.ACCEPTED.value


class RepeatedKeys:
    def __init__(self, *, bits_log2: int = _BITS_LOG2, max_suspects: int = _MAX_SUSPECTS) -> None:
        self._mask = (1 << bits_log2) - 1
        self._bitmap = bytearray(1 << (bits_log2 - 3))
        self._suspects: set[str] | None = set()
        self._max = max_suspects

    def add(self, records: Iterable[StagedRecord]) -> None:
        suspects = self._suspects
        if suspects is None:
            return
        bitmap, mask = self._bitmap, self._mask
        for record in records:
            key = record[2]
            if key is None or record[4] != _ACCEPTED:
                continue
            spot = hash(key) & mask
            bit = 1 << (spot & 7)
            if bitmap[spot >> 3] & bit:
                suspects.add(key)
            else:
                bitmap[spot >> 3] |= bit
        if len(suspects) > self._max:
            self._suspects = None
            self._bitmap = bytearray()

    @property
    def suspects(self) -> frozenset[str] | None:
        """Every key that may occur more than once, or None when the filter gave up."""
        return None if self._suspects is None else frozenset(self._suspects)
