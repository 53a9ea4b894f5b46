"""The README's server-mode set-up, followed as written: its `server.yaml` and its three commands bring up
a Service on the real PostgreSQL and an S3 endpoint (moto), and its first SYSTEM_ADMIN token works.

Only what cannot be the reader's own hosts is changed, through the `WEPUSH_*` variables the README says
override the file: the database URL, the bucket's endpoint and credentials, the key file's path (so the
test does not write /etc), and a loopback bind address (tests listen on loopback only).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.helpers_process import running_service

pytestmark = pytest.mark.postgres

README = Path(__file__).resolve().parents[2] / "README.md"


def server_mode_blocks() -> tuple[str, list[str]]:
    """The section's YAML file and its command lines (comments dropped)."""
    section = README.read_text(encoding="utf-8").split("## Server mode", 1)[1].split("\n## ", 1)[0]
    yaml_block = re.search(r"^```yaml\n(.*?)^```", section, re.MULTILINE | re.DOTALL)
    bash_block = re.search(r"^```bash\n(.*?)^```", section, re.MULTILINE | re.DOTALL)
    assert yaml_block, "the server-mode section shows its configuration"
    assert bash_block, "the server-mode section shows its commands"
    commands = [line.split("#", 1)[0].strip() for line in bash_block.group(1).splitlines()]
    return yaml_block.group(1), [command for command in commands if command]


def test_the_readme_server_mode_setup_starts_a_service_that_answers(
    tmp_path: Path, postgres_url: str, s3_env: dict[str, str]
) -> None:
    configuration, commands = server_mode_blocks()
    assert [shlex.split(c)[:2] for c in commands] == [
        ["wepush", "secrets"],
        ["wepush", "migrate"],
        ["wepush", "serve"],
    ]
    (tmp_path / "server.yaml").write_text(configuration, encoding="utf-8")
    key_file = tmp_path / "etc" / "wepush" / "master.key"
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("WEPUSH_")},
        **s3_env,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "WEPUSH_DATABASE_URL": postgres_url,
        "WEPUSH_SECRETS_MASTER_KEY_FILE": str(key_file),
        "WEPUSH_SERVER_BIND_ADDRESS": "127.0.0.1",
        "WEPUSH_DATA_DIR": str(tmp_path / "data"),
        "WEPUSH_CONFIG_DIR": str(tmp_path / "config"),
    }
    for command in commands[:-1]:
        done = subprocess.run(
            shlex.split(command),
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, (command, done.stderr)
    assert key_file.stat().st_mode & 0o777 == 0o600

    serve_arguments = tuple(shlex.split(commands[-1])[2:])
    config_path = str(tmp_path / "server.yaml")
    serve_arguments = tuple(config_path if a == "server.yaml" else a for a in serve_arguments)
    service_env = {k: v for k, v in env.items() if k.startswith("WEPUSH_") and k != "WEPUSH_DATA_DIR"}
    with running_service(tmp_path / "data", extra_env=service_env, args=serve_arguments) as service:
        ready = httpx.get(service.base_url + "/health/ready", timeout=10)
        token = (tmp_path / "data" / "bootstrap-admin.token").read_text(encoding="utf-8").strip()
        workspaces = httpx.get(
            service.base_url + "/api/v1/workspaces", headers={"Authorization": f"Bearer {token}"}, timeout=10
        )
        log = service.log()

    assert ready.status_code == 200, ready.text
    assert ready.json()["checks"]["artifacts"]["status"] == "UP"
    assert workspaces.status_code == 200
    assert "\nwepush:\n  mode: server\n" in log, "the effective configuration printed at start"
    assert '"event": "BOOTSTRAP_TOKEN_WRITTEN"' in log
    key_text = json.loads(key_file.read_text(encoding="utf-8"))["keys"]["1"]
    for secret in (token, key_text, s3_env["WEPUSH_ARTIFACTS_S3_SECRET_ACCESS_KEY"]):
        assert secret not in log
