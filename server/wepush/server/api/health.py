"""Health probes, metrics and system information (public: no credential needed, nothing sensitive
returned)."""

from __future__ import annotations

from datetime import UTC, datetime

from connexion.lifecycle import ConnexionResponse

from wepush.server.api._context import services
from wepush.server.api._problems import problem_response
from wepush.server.api._responses import json_response
from wepush.server.application.metrics import METRICS_CONTENT_TYPE


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


async def get_metrics() -> ConnexionResponse:
    exporter = services().require_started().metrics
    if exporter is None:
        return problem_response("RESOURCE_NOT_FOUND", "metrics are turned off (wepush.metrics.enabled)")
    return ConnexionResponse(
        status_code=200,
        mimetype="text/plain",
        content_type=METRICS_CONTENT_TYPE,
        body=await exporter.exposition(),
        # A scrape is a reading of now: never served from a cache.
        headers={"Cache-Control": "no-store"},
    )
