"""How a handler reaches the application services assembled by the composition root."""

from __future__ import annotations

from typing import cast

from connexion import request

from wepush.server.application._services import ApplicationServices

SCOPE_KEY = "wepush.services"


def services() -> ApplicationServices:
    return cast(ApplicationServices, request.scope[SCOPE_KEY])
