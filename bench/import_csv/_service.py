"""The real Service as a user runs it (``wepush serve`` in its own process) and the import as a user calls it."""

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
from typing import Any

import httpx

from ._cpu import CpuMeter, CpuUse

UPLOAD_CHUNK = 1024 * 1024


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _status_kib(pid: int, key: str) -> int:
    """A ``/proc/<pid>/status`` memory figure (``VmHWM`` = peak RSS, ``VmRSS`` = current), in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    raise KeyError(key)


@dataclass
class RunningService:
    base_url: str
    process: subprocess.Popen[bytes]
    token: str

    def peak_rss_mib(self) -> float:
        return _status_kib(self.process.pid, "VmHWM") / 1024

    def rss_mib(self) -> float:
        return _status_kib(self.process.pid, "VmRSS") / 1024


@contextmanager
def wepush_serve(data_dir: Path, env: Mapping[str, str] | None = None) -> Iterator[RunningService]:
    port = _free_port()
    environ = {k: v for k, v in os.environ.items() if not k.startswith("WEPUSH_")}
    environ.update({"WEPUSH_CONFIG_DIR": str(data_dir / "config"), "WEPUSH_LOGGING_LEVEL": "WARNING"})
    environ.update(env or {})
    log = (data_dir.parent / f"{data_dir.name}.log").open("ab")
    process = subprocess.Popen(
        [sys.executable, "-m", "wepush.cli", "serve", "--port", str(port), "--data-dir", str(data_dir)],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=environ,
    )
    base_url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"wepush serve exited with {process.returncode}; see {log.name}")
            try:
                if httpx.get(base_url + "/health/ready", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError("wepush serve did not become ready")
            time.sleep(0.2)
        token = (data_dir / "bootstrap-admin.token").read_text(encoding="utf-8").strip()
        yield RunningService(base_url, process, token)
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def _file_chunks(path: Path) -> Iterator[bytes]:
    with path.open("rb") as source:
        while chunk := source.read(UPLOAD_CHUNK):
            yield chunk


def _ok(response: httpx.Response, status: int) -> dict[str, Any]:
    if response.status_code != status:
        raise RuntimeError(
            f"{response.request.method} {response.request.url.path}: {response.status_code} {response.text}"
        )
    body: dict[str, Any] = response.json()
    return body


@dataclass(frozen=True)
class ImportTiming:
    rows: int
    upload_s: float
    commit_s: float
    counts: dict[str, int]
    recipients: int
    upload_cpu: CpuUse
    commit_cpu: CpuUse

    @property
    def total_s(self) -> float:
        return self.upload_s + self.commit_s

    @property
    def rows_per_s(self) -> float:
        return self.rows / self.total_s


def import_file(
    service: RunningService, csv_path: Path, rows: int, *, content_encoding: str | None = None
) -> ImportTiming:
    """Create an audience and an import, stream the file, commit: the calls a user makes, timed from the
    start of the upload to the committed snapshot. ``content_encoding``: how ``csv_path`` is compressed."""
    headers = {"Authorization": f"Bearer {service.token}"}
    upload_headers = {"Content-Type": "text/csv"}
    if content_encoding is not None:
        upload_headers["Content-Encoding"] = content_encoding
    with httpx.Client(base_url=service.base_url, headers=headers, timeout=None) as client:
        workspaces = _ok(client.get("/api/v1/workspaces", params={"name": "default"}), 200)
        ws = f"/api/v1/workspaces/{workspaces['items'][0]['id']}"
        audience = _ok(client.post(f"{ws}/audiences", json={"name": f"bench {rows}"}), 201)
        started = _ok(
            client.post(
                f"{ws}/audiences/{audience['id']}/imports",
                json={
                    "format": "CSV",
                    "fieldMapping": {"mobile": "mobile", "name": "name", "email": "email", "city": "city"},
                    "itemIdField": "mobile",
                },
            ),
            201,
        )
        base = f"{ws}/audiences/{audience['id']}/imports/{started['id']}"
        cpu = CpuMeter(service.process.pid)
        began = time.perf_counter()
        staged = _ok(
            client.put(f"{base}/content", content=_file_chunks(csv_path), headers=upload_headers),
            200,
        )
        uploaded = time.perf_counter()
        upload_cpu = cpu.lap()
        snapshot = _ok(client.post(f"{base}/commit", json={"version": audience["version"]}), 201)
        committed = time.perf_counter()
        commit_cpu = cpu.lap()
    return ImportTiming(
        rows,
        uploaded - began,
        committed - uploaded,
        staged["counts"],
        snapshot["recipientCount"],
        upload_cpu,
        commit_cpu,
    )
