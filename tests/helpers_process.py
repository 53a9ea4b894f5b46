"""Start a real `wepush serve` process on a free loopback port for tests that need the real thing."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import httpx

T = TypeVar("T")


def wait_for(what: str, probe: Callable[[], T | None], timeout_s: float = 60.0) -> T:
    """Poll ``probe`` until it returns something truthy (a real process gives no event to await)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = probe()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class ServiceProcess:
    base_url: str
    data_dir: Path
    process: subprocess.Popen[bytes]
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")


def _wait_ready(url: str, process: subprocess.Popen[bytes], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"wepush serve exited with {process.returncode}")
        try:
            if httpx.get(url + "/health/live", timeout=1.0).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise TimeoutError("wepush serve did not become live")


def serve_command(data_dir: Path, port: int, *args: str) -> list[str]:
    """``wepush serve`` on ``port`` for ``data_dir``, as a command line for this interpreter."""
    return [
        sys.executable,
        "-m",
        "wepush.cli",
        "serve",
        "--port",
        str(port),
        "--data-dir",
        str(data_dir),
        *args,
    ]


def service_env(data_dir: Path, extra_env: Mapping[str, str] | None = None) -> dict[str, str]:
    """This process's environment without any ``WEPUSH_`` setting, the configuration directory under
    ``data_dir``, and ``extra_env`` over both."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("WEPUSH_")}
    env["WEPUSH_CONFIG_DIR"] = str(data_dir / "config")
    env.update(extra_env or {})
    return env


def serve_to_exit(
    data_dir: Path, *, extra_env: Mapping[str, str] | None = None, timeout_s: float = 120.0
) -> subprocess.CompletedProcess[str]:
    """Run ``wepush serve`` on a free port until it exits by itself (a start the test expects refused),
    its output captured as text."""
    return subprocess.run(
        serve_command(data_dir, free_port()),
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env=service_env(data_dir, extra_env),
    )


@contextmanager
def running_service(
    data_dir: Path,
    *,
    port: int | None = None,
    extra_env: Mapping[str, str] | None = None,
    args: tuple[str, ...] = (),
    timeout_s: float = 60.0,
) -> Iterator[ServiceProcess]:
    port = port or free_port()
    log_path = data_dir.parent / f"{data_dir.name}-service.log"
    with log_path.open("ab") as log:
        process = subprocess.Popen(
            serve_command(data_dir, port, *args),
            stdout=log,
            stderr=subprocess.STDOUT,
            env=service_env(data_dir, extra_env),
        )
    base_url = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(base_url, process, timeout_s)
        yield ServiceProcess(base_url, data_dir, process, log_path)
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
