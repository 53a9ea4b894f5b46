"""Request bodies as handlers should see them."""

from __future__ import annotations

from typing import Any


def json_object(body: Any) -> dict[str, Any]:
    """The JSON object of an optional request body.

    Connexion hands the raw (empty) bytes to the handler when a client sends no body and no
    Content-Type for an operation whose body is optional; that means "no fields given".
    """
    return body if isinstance(body, dict) else {}
