"""Fail when `generated/` differs from what the contracts produce (the CI drift check).

Regenerates into a temporary directory and compares file by file with the committed tree, so it never
touches the working copy. `--contracts` and `--generated` let the drift test point it elsewhere.
"""

from __future__ import annotations

import argparse
import filecmp
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from generate import ROOT, generate


def _files(base: Path) -> set[Path]:
    return {
        p.relative_to(base)
        for p in base.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    }


def compare(expected: Path, actual: Path) -> list[str]:
    problems: list[str] = []
    want, have = _files(expected), _files(actual)
    problems += [f"missing from generated/: {p}" for p in sorted(want - have)]
    problems += [f"not produced by the contracts: {p}" for p in sorted(have - want)]
    for path in sorted(want & have):
        if not filecmp.cmp(expected / path, actual / path, shallow=False):
            problems.append(f"differs: {path}")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--contracts", type=Path, default=ROOT / "contracts")
    parser.add_argument("--generated", type=Path, default=ROOT / "generated")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        fresh = Path(tmp) / "generated"
        generate(args.contracts.resolve(), fresh)
        problems = compare(fresh, args.generated.resolve())
    if problems:
        sys.stderr.write("generated/ is out of date with contracts/ — run `make generate` and commit:\n")
        for line in problems[:50]:
            sys.stderr.write(f"  {line}\n")
        return 1
    sys.stdout.write("generated/ matches contracts/\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
