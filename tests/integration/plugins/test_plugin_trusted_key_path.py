"""``--trusted-key`` takes a key or the path of a file holding one: a path that names no file is said to
be a missing file, not a value that is "not base64"."""

from __future__ import annotations

from pathlib import Path

import pytest

from wepush.cli.main import main


@pytest.mark.parametrize("action", ["verify", "list"])
@pytest.mark.parametrize("name", ["keys/nope.pub", "nope.pub", "keys/publisher"])
def test_a_trusted_key_file_that_does_not_exist_is_named_as_missing(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    action: str,
    name: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "keys").mkdir()
    where = [str(tmp_path)] if action == "verify" else ["--plugins-dir", str(tmp_path)]

    assert main(["plugin", action, *where, "--trusted-key", name]) == 2

    # It used to say "trusted key #1: not base64 and not a PEM block".
    assert capsys.readouterr().err == (
        f"wepush plugin {action}: trusted key #1: {name} does not exist (and is not a base64 or PEM public "
        "key)\n"
    )


def test_a_directory_given_as_a_trusted_key_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    keys = tmp_path / "keys"
    keys.mkdir()

    assert main(["plugin", "list", "--plugins-dir", str(tmp_path), "--trusted-key", str(keys)]) == 2

    assert capsys.readouterr().err == (
        f"wepush plugin list: trusted key #1: {keys} is a directory, not a public key file\n"
    )


def test_a_key_given_inline_is_still_taken_and_a_broken_one_still_said_as_before(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["plugin", "keygen", "--out", str(tmp_path / "keys")]) == 0
    public = (tmp_path / "keys" / "publisher.pub").read_text().strip()
    capsys.readouterr()

    assert main(["plugin", "list", "--plugins-dir", str(tmp_path / "none"), "--trusted-key", public]) == 0
    assert main(["plugin", "list", "--plugins-dir", str(tmp_path / "none"), "--trusted-key", "QUJD"]) == 2
    assert capsys.readouterr().err == (
        "wepush plugin list: trusted key #1: an Ed25519 public key has 32 bytes, this one has 3\n"
    )
