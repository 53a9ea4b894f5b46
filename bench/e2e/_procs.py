"""The processes of the benchmark: the vendor mock and ``wepush serve``, each in its own process, and what
``/proc`` tells about them (peak and current RSS, CPU time per process and per thread)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import httpx

ROOT = Path(__file__).resolve().parents[2]
_TICKS = os.sysconf("SC_CLK_TCK")
#: Lets the HTTP Provider reach the loopback vendor mock (the production policy refuses loopback).
SERVICE_ENV = {"WEPUSH_SECURITY_LOOPBACK_TARGETS_FOR_TESTS": "true"}


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def status_kib(pid: int, key: str) -> int:
    """A ``/proc/<pid>/status`` memory figure (``VmHWM`` = peak RSS, ``VmRSS`` = current), in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    raise KeyError(key)


def _stat_cpu_s(stat_path: Path) -> float:
    # The command name (field 2) may hold spaces; the fields after its closing parenthesis are fixed.
    fields = stat_path.read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS


def cpu_s(pid: int) -> float:
    """User + system CPU seconds the process has used so far (all its threads)."""
    return _stat_cpu_s(Path(f"/proc/{pid}/stat"))


def thread_cpu_s(pid: int) -> dict[str, float]:
    """CPU seconds of the main thread (the event loop) and of all other threads together (the SQLite
    driver's thread, executor threads): shows how much work leaves the event loop."""
    split = {"main": 0.0, "other": 0.0}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            split["main" if task.name == str(pid) else "other"] += _stat_cpu_s(task / "stat")
        except OSError:
            continue  # the thread ended between listing and reading
    return split


def _stop(process: subprocess.Popen[bytes] | subprocess.Popen[str], timeout: float) -> None:
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


class MockVendor:
    """``bench.engine._mock_server`` in its own process on loopback; it exits when its stdin closes."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "bench.engine._mock_server"],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        stdout: IO[str] | None = self.process.stdout
        assert stdout is not None
        line = stdout.readline().split()
        if len(line) != 2 or line[0] != "PORT":
            self.stop()
            raise RuntimeError("the vendor mock did not start")
        self.url = f"http://127.0.0.1:{line[1]}"

    def cpu_s(self) -> float:
        return cpu_s(self.process.pid)

    def stop(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            _stop(self.process, 5)


@contextmanager
def mock_vendor() -> Iterator[MockVendor]:
    vendor = MockVendor()
    try:
        yield vendor
    finally:
        vendor.stop()


@dataclass
class ServiceProcess:
    base_url: str
    process: subprocess.Popen[bytes]
    token: str
    log_path: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    def peak_rss_mib(self) -> float:
        return status_kib(self.pid, "VmHWM") / 1024

    def rss_mib(self) -> float:
        return status_kib(self.pid, "VmRSS") / 1024

    def reset_peak_rss(self) -> bool:
        """Reset ``VmHWM`` to the current RSS (Linux ``clear_refs`` 5), so a later peak covers one phase."""
        try:
            Path(f"/proc/{self.pid}/clear_refs").write_text("5")
        except OSError:
            return False
        return True

    def cpu_s(self) -> float:
        return cpu_s(self.pid)


def _wait_ready(base_url: str, process: subprocess.Popen[bytes], log_path: Path, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"wepush serve exited with {process.returncode}; see {log_path}")
        try:
            if httpx.get(base_url + "/health/ready", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"wepush serve did not become ready; see {log_path}")
        time.sleep(0.2)


@contextmanager
def wepush_serve(
    data_dir: Path, *, profile_to: Path | None = None, env: Mapping[str, str] | None = None
) -> Iterator[ServiceProcess]:
    """``wepush serve`` as a user starts it, on a free loopback port with a fresh data directory.

    With ``profile_to`` the same command runs under cProfile (``_profiled_serve``) and writes its stats
    there when the Service shuts down.
    """
    port = _free_port()
    environ = {k: v for k, v in os.environ.items() if not k.startswith("WEPUSH_")}
    environ.update({"WEPUSH_CONFIG_DIR": str(data_dir / "config"), **SERVICE_ENV, **(env or {})})
    serve_args = ["serve", "--port", str(port), "--data-dir", str(data_dir)]
    if profile_to is None:
        command = [sys.executable, "-m", "wepush.cli", *serve_args]
    else:
        command = [sys.executable, "-m", "bench.e2e._profiled_serve", str(profile_to), *serve_args]
    log_path = data_dir.parent / f"{data_dir.name}-service.log"
    with log_path.open("ab") as log:
        process = subprocess.Popen(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=environ)
    base_url = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(base_url, process, log_path, timeout_s=120)
        token = (data_dir / "bootstrap-admin.token").read_text(encoding="utf-8").strip()
        yield ServiceProcess(base_url, process, token, log_path)
    finally:
        # A profiled Service writes its stats on the way out: give it time to.
        _stop(process, 120 if profile_to is not None else 30)
