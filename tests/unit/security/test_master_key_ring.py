from __future__ import annotations

import base64
import json
import stat
from pathlib import Path

import pytest

from wepush.server.infra.secrets import (
    MASTER_KEY_ENV,
    LocalEnvelopeSecretStore,
    MasterKeyError,
    MasterKeyRing,
)

KEY_1 = bytes(range(32))
KEY_2 = bytes(range(32, 64))
B64_1 = base64.b64encode(KEY_1).decode()
B64_2 = base64.b64encode(KEY_2).decode()


def write_key_file(path: Path, text: str, mode: int = 0o600) -> Path:
    path.write_text(text)
    path.chmod(mode)
    return path


def assert_no_key_material(message: str) -> None:
    for fragment in (B64_1, B64_2, B64_1[:12], B64_2[:12]):
        assert fragment not in message


def test_standalone_first_start_creates_an_owner_only_key_file(tmp_path: Path) -> None:
    path = tmp_path / "config" / "master.key"

    ring = MasterKeyRing.create_standalone(path)

    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert ring.versions == (1,)
    assert list(path.parent.iterdir()) == [path]  # no temporary file left behind
    document = json.loads(path.read_text())
    assert document["active"] == 1
    assert len(base64.b64decode(document["keys"]["1"])) == 32


def test_standalone_second_start_loads_the_same_key_without_overwriting(tmp_path: Path) -> None:
    path = tmp_path / "master.key"
    first = LocalEnvelopeSecretStore(MasterKeyRing.create_standalone(path))
    sealed = first.encrypt("ws", "s", "T", 1, b"value")
    content_before = path.read_bytes()

    second = LocalEnvelopeSecretStore(MasterKeyRing.create_standalone(path))

    assert path.read_bytes() == content_before
    assert second.decrypt(sealed, "ws", "s", "T", 1) == b"value"


def test_server_mode_loads_a_0600_line_format_file(tmp_path: Path) -> None:
    path = write_key_file(tmp_path / "master.key", f"# ring\n1:{B64_1}\n\n2:{B64_2}\n")

    ring = MasterKeyRing.load_server(path)

    assert ring.versions == (1, 2)
    assert ring.active_version == 2


def test_line_format_can_keep_an_older_version_active(tmp_path: Path) -> None:
    path = write_key_file(tmp_path / "master.key", f"1:{B64_1}\n2:{B64_2}\nactive:1\n")

    assert MasterKeyRing.load_server(path).active_version == 1


def test_server_mode_loads_the_json_format(tmp_path: Path) -> None:
    text = json.dumps({"active": 1, "keys": {"1": B64_1, "2": B64_2}})
    path = write_key_file(tmp_path / "master.key", text, mode=0o400)

    ring = MasterKeyRing.load_server(path)

    assert (ring.active_version, ring.versions) == (1, (1, 2))


def test_server_mode_refuses_a_world_readable_key_file(tmp_path: Path) -> None:
    path = write_key_file(tmp_path / "master.key", f"1:{B64_1}\n", mode=0o644)

    with pytest.raises(MasterKeyError, match="group or others") as caught:
        MasterKeyRing.load_server(path)

    assert "0644" in str(caught.value)
    assert_no_key_material(str(caught.value))


def test_standalone_also_refuses_an_existing_group_readable_key_file(tmp_path: Path) -> None:
    path = write_key_file(tmp_path / "master.key", f"1:{B64_1}\n", mode=0o640)

    with pytest.raises(MasterKeyError, match="chmod 600"):
        MasterKeyRing.create_standalone(path)
    assert path.read_text() == f"1:{B64_1}\n"


def test_server_mode_missing_key_file_fails_closed_and_generates_nothing(tmp_path: Path) -> None:
    path = tmp_path / "master.key"

    with pytest.raises(MasterKeyError, match="does not exist"):
        MasterKeyRing.load_server(path)

    assert not path.exists()


@pytest.mark.parametrize(
    "text",
    [
        "",
        "not a key ring",
        f"one:{B64_1}",
        f"1:{B64_1[:-4]}",
        "1:%%%%not-base64%%%%",
        f"1:{B64_1}\n1:{B64_2}",
        json.dumps({"keys": []}),
        json.dumps({"active": 3, "keys": {"1": B64_1}}),
        "{broken json " + B64_1,
        '{"keys": {"1": "' + B64_1 + '", "01": "' + B64_2 + '"}}',
        '{"keys": {"1": "' + B64_1 + '", "1": "' + B64_2 + '"}}',
    ],
    ids=[
        "empty",
        "no-separator",
        "bad-version",
        "short-key",
        "bad-base64",
        "duplicate-version",
        "keys-not-object",
        "active-missing",
        "broken-json",
        "json-same-version-twice",
        "json-same-member-twice",
    ],
)
def test_malformed_key_file_fails_closed_without_echoing_key_text(tmp_path: Path, text: str) -> None:
    path = write_key_file(tmp_path / "master.key", text)

    with pytest.raises(MasterKeyError) as caught:
        MasterKeyRing.load_server(path)

    assert_no_key_material(str(caught.value))


def test_server_mode_reads_the_explicit_environment_variable() -> None:
    ring = MasterKeyRing.load_server(environ={MASTER_KEY_ENV: f"3:{B64_2}"})

    assert ring.versions == (3,)


def test_server_mode_without_file_or_environment_fails_closed() -> None:
    with pytest.raises(MasterKeyError, match=MASTER_KEY_ENV):
        MasterKeyRing.load_server(environ={})


def test_environment_key_errors_do_not_echo_the_value() -> None:
    with pytest.raises(MasterKeyError) as caught:
        MasterKeyRing.load_server(environ={MASTER_KEY_ENV: B64_1})

    assert_no_key_material(str(caught.value))


def test_rotated_ring_saved_and_reloaded_keeps_every_version(tmp_path: Path) -> None:
    path = tmp_path / "master.key"
    ring = MasterKeyRing.create_standalone(path)
    store = LocalEnvelopeSecretStore(ring)
    old = store.encrypt("ws", "s", "T", 4, b"rotate me")

    ring.rotate()
    ring.save(path)
    reloaded = LocalEnvelopeSecretStore(MasterKeyRing.load_server(path))

    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert reloaded.key_ring.versions == (1, 2)
    assert reloaded.key_ring.active_version == 2
    assert reloaded.decrypt(old, "ws", "s", "T", 4) == b"rotate me"
    assert reloaded.decrypt(reloaded.rewrap(old), "ws", "s", "T", 4) == b"rotate me"


def test_active_version_cannot_be_retired() -> None:
    ring = MasterKeyRing.generate()

    with pytest.raises(MasterKeyError, match="active"):
        ring.retire(1)


def test_key_path_that_is_a_directory_fails_closed(tmp_path: Path) -> None:
    with pytest.raises(MasterKeyError, match="not a regular file"):
        MasterKeyRing.load_server(tmp_path)


def test_adopting_a_reloaded_ring_adds_its_versions_and_keeps_the_ones_held() -> None:
    held = MasterKeyRing.generate()
    version, nonce, wrapped = held.wrap_dek(b"k" * 32)
    newer = MasterKeyRing.generate()
    newer.rotate()  # versions 1 (another key) and 2

    with pytest.raises(MasterKeyError, match="version 1 changed"):
        held.adopt(newer)

    newer.retire(1)
    held.adopt(newer)
    assert (held.active_version, held.versions) == (2, (1, 2))
    assert bytes(held.unwrap_dek(version, nonce, wrapped)) == b"k" * 32
    assert held.wrap_dek(b"k" * 32)[0] == 2


@pytest.mark.parametrize("version", [2**31, 2**32, 10**30])
@pytest.mark.parametrize("layout", ["lines", "json"])
def test_a_key_version_no_secret_could_record_fails_closed_at_load(
    tmp_path: Path, version: int, layout: str
) -> None:
    # Such a ring used to load; the first secret saved then failed (struct.error past 2**32, the 32-bit
    # key_version column past 2**31 - 1) as an internal error.
    text = f"{version}:{B64_1}" if layout == "lines" else json.dumps({"keys": {str(version): B64_1}})
    path = write_key_file(tmp_path / "master.key", text)

    with pytest.raises(MasterKeyError, match=r"key version above 2147483647") as caught:
        MasterKeyRing.load_server(path)
    with pytest.raises(MasterKeyError, match="at most 2147483647"):
        MasterKeyRing({version: KEY_1}, version)

    assert_no_key_material(str(caught.value))
