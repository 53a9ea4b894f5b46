"""``make generate`` puts ``generated/`` in place only when every part of it was built."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path
from types import ModuleType

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]


def _generate_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("wepush_generate_script", ROOT / "scripts" / "generate.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_contract_that_does_not_parse_leaves_the_generated_tree_as_it_was(tmp_path: Path) -> None:
    contracts = tmp_path / "contracts"
    shutil.copytree(ROOT / "contracts", contracts)
    with (contracts / "openapi" / "paths" / "audiences.yaml").open("a", encoding="utf-8") as broken:
        broken.write("  broken: [: x\n")
    out = tmp_path / "generated"
    out.mkdir()
    (out / "kept.txt").write_text("committed output", encoding="utf-8")

    with pytest.raises(yaml.YAMLError):
        _generate_script().generate(contracts, out)

    assert [p.name for p in out.iterdir()] == ["kept.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["contracts", "generated"]
