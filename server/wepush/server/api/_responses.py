"""Response helpers: every operation declares JSON and problem+json, so handlers name their media type."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from connexion.lifecycle import ConnexionResponse

JSON = "application/json"


def json_response(
    body: Any, status: int = 200, headers: Mapping[str, str] | None = None
) -> ConnexionResponse:
    return ConnexionResponse(
        status_code=status,
        mimetype=JSON,
        content_type=JSON,
        body=json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode(),
        headers=dict(headers or {}),
    )


def empty_response(status: int = 204, headers: Mapping[str, str] | None = None) -> ConnexionResponse:
    return ConnexionResponse(status_code=status, body=b"", headers=dict(headers or {}))
