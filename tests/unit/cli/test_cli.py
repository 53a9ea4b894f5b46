from __future__ import annotations

import pytest

from wepush.cli.main import main


def test_version_prints_the_product_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["version"]) == 0
    assert capsys.readouterr().out.startswith("wepush-next ")


def test_agent_command_says_it_has_not_landed_and_fails(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["agent"]) != 0
    assert "not landed" in capsys.readouterr().err


def test_serve_with_a_bad_configuration_exits_with_a_clear_error(
    tmp_path: pytest.TempPathFactory, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WEPUSH_SERVER_PROT", "1")
    assert main(["serve", "--data-dir", str(tmp_path)]) == 2
    assert "WEPUSH_SERVER_PROT" in capsys.readouterr().err
