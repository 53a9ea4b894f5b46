"""The repeated-key filter never misses a key that occurs twice, and gives up rather than grow."""

from __future__ import annotations

import random

from wepush.server.application._import_keys import RepeatedKeys
from wepush.server.domain import StagedRecord


def _accepted(line: int, key: str) -> StagedRecord:
    return ("import-1", line, key, "{}", "ACCEPTED", None, None, None)


def test_every_repeated_key_is_a_suspect_even_when_the_bitmap_is_crowded() -> None:
    rng = random.Random(7)
    keys = [f"1380000{n:05d}" for n in range(3000)]
    repeated = set(rng.sample(keys, 40))
    lines = keys + sorted(repeated)
    rng.shuffle(lines)
    records = [_accepted(n, key) for n, key in enumerate(lines, start=2)]
    # A rejected row's (absent) key and a duplicate-free key never count.
    records.append(("import-1", 9999, None, None, "REJECTED", "MISSING_FIELD", "empty", ","))
    filter_ = RepeatedKeys(bits_log2=13, max_suspects=10_000)  # 8,192 bits for 3,000 keys

    for start in range(0, len(records), 500):
        filter_.add(records[start : start + 500])

    suspects = filter_.suspects
    assert suspects is not None
    assert repeated <= suspects
    assert len(suspects) < len(keys) / 2  # collisions add some, not most


def test_a_file_without_repeats_in_a_roomy_bitmap_has_few_or_no_suspects() -> None:
    filter_ = RepeatedKeys(bits_log2=20)
    filter_.add(_accepted(n, f"user-{n}") for n in range(2000))
    suspects = filter_.suspects
    assert suspects is not None
    assert len(suspects) <= 20


def test_too_many_suspects_means_unknown() -> None:
    filter_ = RepeatedKeys(bits_log2=6, max_suspects=10)
    filter_.add(_accepted(n, f"k{n}") for n in range(500))
    assert filter_.suspects is None
