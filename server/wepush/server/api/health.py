"""Health probes and system information (public: no credential needed, nothing sensitive returned)."""

from __future__ import annotations

from datetime import UTC, datetime

from connexion.lifecycle import ConnexionResponse

from wepush.server.api._context import services
from wepush.server.api._responses import json_response


async def get_liveness() -> ConnexionResponse:
    return json_response({"status": "UP"})


async def get_readiness() -> ConnexionResponse:
    readiness = await services().health.readiness()
    body = {
        "status": "UP" if readiness.ready else "DOWN",
        "checks": {
            check.name: {"status": "UP" if check.ok else "DOWN", "detail": check.detail[:1024]}
            for check in readiness.checks
        },
    }
    if readiness.ready:
        return json_response(body)
    return json_response(body, 503, {"Retry-After": "5"})


async def get_system_info() -> ConnexionResponse:
    app = services()
    return json_response(
        {
            "version": app.version,
            "apiVersion": "v1",
            "mode": app.mode.upper(),
            "executionMode": "EMBEDDED" if app.mode == "standalone" else "REMOTE",
            "serverTime": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
        }
    )
