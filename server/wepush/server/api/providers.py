"""The provider catalog: descriptors and schemas, paged by provider id."""

from __future__ import annotations

from connexion.lifecycle import ConnexionResponse

from wepush.server.api._auth import current_principal
from wepush.server.api._context import services
from wepush.server.api._render_core import render_provider, render_provider_schemas
from wepush.server.api._responses import json_response
from wepush.server.application.paging import CursorInvalid, validate_limit

_RESOURCE = "providers"
_NO_FILTERS: dict[str, object] = {}


async def list_providers(limit: int | None = None, cursor: str | None = None) -> ConnexionResponse:
    size = validate_limit(limit)
    app = services()
    after: str | None = None
    if cursor:
        position = app.cursors.decode(cursor, resource=_RESOURCE, filters=_NO_FILTERS)
        if len(position) != 1 or not isinstance(position[0], str):
            raise CursorInvalid("malformed")
        after = position[0]
    descriptors = [
        d
        for d in app.resources.providers.list_descriptors(current_principal())
        if after is None or d.provider_id > after
    ]
    items = descriptors[:size]
    more = len(descriptors) > size
    next_cursor = (
        app.cursors.encode(resource=_RESOURCE, filters=_NO_FILTERS, position=(items[-1].provider_id,))
        if more
        else None
    )
    return json_response(
        {"items": [render_provider(d) for d in items], "page": {"nextCursor": next_cursor, "hasMore": more}}
    )


async def get_provider(provider_id: str) -> ConnexionResponse:
    descriptor = services().resources.providers.get(current_principal(), provider_id)
    return json_response(render_provider(descriptor))


async def get_provider_schemas(provider_id: str) -> ConnexionResponse:
    descriptor = services().resources.providers.get(current_principal(), provider_id)
    return json_response(render_provider_schemas(descriptor))
