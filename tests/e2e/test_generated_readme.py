"""The generated Python client's README example runs as written against a real Service."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.helpers_process import running_service

README = Path(__file__).resolve().parents[2] / "generated" / "sdk-python" / "README.md"


def test_the_python_client_example_runs(tmp_path: Path) -> None:
    [example] = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    data_dir = tmp_path / "data"
    with running_service(data_dir) as service:
        token = (data_dir / "bootstrap-admin.token").read_text(encoding="utf-8").strip()
        script = tmp_path / "example.py"
        script.write_text(example.replace("http://127.0.0.1:18990", service.base_url), encoding="utf-8")
        done = subprocess.run(
            [sys.executable, str(script)],
            env={**os.environ, "WEPUSH_TOKEN": token},
            capture_output=True,
            text=True,
            timeout=60,
        )

    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "default 0"
