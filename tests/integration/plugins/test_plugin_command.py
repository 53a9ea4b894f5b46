"""``wepush plugin``: a publisher creates a key, signs a plugin; an operator verifies and lists plugins."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from tests.unit.plugins._builder import PluginSpec, flip_one_byte, write_plugin_sources
from wepush.cli.main import main


@pytest.fixture
def publisher(tmp_path: Path) -> tuple[Path, Path]:
    assert main(["plugin", "keygen", "--out", str(tmp_path / "keys")]) == 0
    return tmp_path / "keys" / "publisher.key", tmp_path / "keys" / "publisher.pub"


def _signed(tmp_path: Path, key: Path, spec: PluginSpec | None = None) -> Path:
    spec = spec or PluginSpec()
    directory = write_plugin_sources(tmp_path / "plugins" / spec.plugin_id / spec.version, spec)
    assert main(["plugin", "sign", str(directory), "--key", str(key)]) == 0
    return directory


def test_keygen_writes_a_private_key_only_its_owner_can_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["plugin", "keygen", "--out", str(tmp_path)]) == 0

    out = capsys.readouterr().out
    assert stat.S_IMODE((tmp_path / "publisher.key").stat().st_mode) == 0o600
    public = (tmp_path / "publisher.pub").read_text(encoding="ascii").strip()
    assert f"add to wepush.plugins.trusted-keys: {public}" in out
    assert "PRIVATE KEY" not in out


def test_keygen_refuses_to_overwrite_an_existing_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["plugin", "keygen", "--out", str(tmp_path)]) == 0
    before = (tmp_path / "publisher.key").read_bytes()

    assert main(["plugin", "keygen", "--out", str(tmp_path)]) == 1

    assert "already exists" in capsys.readouterr().err
    assert (tmp_path / "publisher.key").read_bytes() == before


def test_keygen_never_replaces_a_public_key_left_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["plugin", "keygen", "--out", str(tmp_path)]) == 0
    trusted = (tmp_path / "publisher.pub").read_bytes()
    (tmp_path / "publisher.key").unlink()

    assert main(["plugin", "keygen", "--out", str(tmp_path)]) == 1

    assert f"{tmp_path / 'publisher.pub'} already exists" in capsys.readouterr().err
    assert (tmp_path / "publisher.pub").read_bytes() == trusted
    assert not (tmp_path / "publisher.key").exists()


@pytest.mark.parametrize(
    ("args", "message", "code"),
    [
        (["--out", "{tmp}/a-file"], "cannot create the directory {tmp}/a-file: File exists", 1),
        (["--out", "{tmp}/keys", "--name", "sub/publisher"], "must be a file name stem, not a path", 2),
        (["--out", "{tmp}/keys", "--name", ".."], "must be a file name stem, not a path", 2),
    ],
)
def test_keygen_with_an_unusable_destination_fails_in_one_line(
    args: list[str], message: str, code: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "a-file").write_text("not a directory\n", encoding="utf-8")

    assert main(["plugin", "keygen", *(arg.format(tmp=tmp_path) for arg in args)]) == code

    err = capsys.readouterr().err
    assert message.format(tmp=tmp_path) in err
    assert "Traceback" not in err
    assert not list(tmp_path.rglob("*.key"))


def test_signed_plugin_verifies_with_the_publisher_key(
    tmp_path: Path, publisher: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    key, public = publisher
    directory = _signed(tmp_path, key)
    capsys.readouterr()

    code = main(["plugin", "verify", str(directory), "--trusted-key", str(public)])

    assert code == 0
    assert capsys.readouterr().out.startswith("acme.echo@1.0.0: ACTIVE: signed by key ")


def test_verify_fails_with_the_reason_for_an_untrusted_key(
    tmp_path: Path, publisher: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    key, _ = publisher
    directory = _signed(tmp_path, key)
    assert main(["plugin", "keygen", "--out", str(tmp_path / "other")]) == 0
    other = (tmp_path / "other" / "publisher.pub").read_text(encoding="ascii").strip()
    capsys.readouterr()

    code = main(["plugin", "verify", str(directory), "--trusted-key", other])

    assert code == 1
    assert "REJECTED: untrusted publisher key" in capsys.readouterr().out


def test_verify_fails_when_a_file_changed_after_signing(
    tmp_path: Path, publisher: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    key, public = publisher
    directory = _signed(tmp_path, key)
    flip_one_byte(directory / "provider.json", offset=3)
    capsys.readouterr()

    code = main(["plugin", "verify", str(directory), "--trusted-key", str(public)])

    assert code == 1
    assert "provider.json: SHA-256 mismatch" in capsys.readouterr().out


def test_verify_rejects_a_provider_id_the_installed_builtins_already_use(
    tmp_path: Path, publisher: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    key, public = publisher
    directory = _signed(tmp_path, key, PluginSpec(plugin_id="acme.http", provider_id="wepush.http"))
    capsys.readouterr()

    assert main(["plugin", "verify", str(directory), "--trusted-key", str(public)]) == 1
    assert "duplicate provider id 'wepush.http'" in capsys.readouterr().out


def test_verify_with_an_unreadable_trusted_key_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["plugin", "verify", str(tmp_path), "--trusted-key", "not-a-key"]) == 2
    assert "trusted key #1" in capsys.readouterr().err


def test_verify_with_a_trusted_key_file_that_is_not_text_names_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    binary = tmp_path / "publisher.der"
    binary.write_bytes(b"\x30\x2a\x30\x05\x06\x03\x2b\x65\x70\x03\x21\x00\xff")

    assert main(["plugin", "verify", str(tmp_path), "--trusted-key", str(binary)]) == 2

    assert f"trusted key #1: {binary} is not ASCII text" in capsys.readouterr().err


def test_sign_refuses_a_private_key_other_users_can_read(
    tmp_path: Path, publisher: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    key, _ = publisher
    key.chmod(0o644)
    directory = write_plugin_sources(tmp_path / "build", PluginSpec())

    assert main(["plugin", "sign", str(directory), "--key", str(key)]) == 1

    assert "chmod 600" in capsys.readouterr().err
    assert not (directory / "plugin.json.sig").exists()


def test_sign_refuses_a_directory_with_bytecode_caches(
    tmp_path: Path, publisher: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    key, _ = publisher
    directory = write_plugin_sources(
        tmp_path / "build", PluginSpec(extra_files={"__pycache__/greeting.cpython-311.pyc": b"\0"})
    )

    assert main(["plugin", "sign", str(directory), "--key", str(key)]) == 1

    assert "__pycache__/greeting.cpython-311.pyc" in capsys.readouterr().err


def test_list_shows_every_plugin_with_its_status(
    tmp_path: Path, publisher: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    key, public = publisher
    _signed(tmp_path, key)
    tampered = _signed(tmp_path, key, PluginSpec(plugin_id="acme.other", provider_id="acme.other"))
    flip_one_byte(tampered / "greeting.py")
    capsys.readouterr()

    code = main(["plugin", "list", "--plugins-dir", str(tmp_path / "plugins"), "--trusted-key", str(public)])

    lines = capsys.readouterr().out.splitlines()
    assert code == 0
    assert lines[0].split() == ["PLUGIN", "VERSION", "STATUS", "PROVIDERS", "DETAIL"]
    assert lines[1].split()[:5] == ["acme.echo", "1.0.0", "ACTIVE", "acme.echo", "signed"]
    assert lines[2].split()[:3] == ["acme.other", "1.0.0", "REJECTED"]
    assert "greeting.py: SHA-256 mismatch" in lines[2]


def test_list_in_developer_mode_loads_an_unsigned_plugin_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = write_plugin_sources(tmp_path / "plugins" / "acme.echo" / "1.0.0", PluginSpec())
    assert main(["plugin", "manifest", str(directory)]) == 0
    capsys.readouterr()

    code = main(["plugin", "list", "--plugins-dir", str(tmp_path / "plugins"), "--developer-mode"])

    out = capsys.readouterr().out
    assert code == 0
    assert out.startswith("developer mode: unsigned plugins are loaded")
    assert "LOADED_UNSIGNED" in out
