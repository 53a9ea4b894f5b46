"""Whether a job that asks to keep vendor response bodies will ever have one to keep.

``policies.result.saveResponseBody`` says what a Run keeps; the provider decides what it reads. A
provider whose descriptor lacks the ``responseBody`` capability reads none, and a message schema may
mark a boolean member ``x-wepush-response-body-switch`` (the HTTP provider's ``saveResponseBody``)
that must be on in the revision's content as well. Accepting the job anyway would leave the operator
with results that silently hold a summary only, so the job is refused naming the switch to turn on.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from wepush.agent.providers.catalog import ProviderCatalog
from wepush.server.application.errors import FieldIssue
from wepush.server.domain import MessageRevision

__all__ = ["response_bodies_unread"]

_FIELD: Final = "/policies/result/saveResponseBody"
_CODE: Final = "RESPONSE_BODY_NOT_READ"
_SWITCH: Final = "x-wepush-response-body-switch"


def _switches(message_schema: Mapping[str, Any]) -> list[str]:
    properties = message_schema.get("properties")
    if not isinstance(properties, Mapping):
        return []
    return sorted(
        name
        for name, member in properties.items()
        if isinstance(member, Mapping) and member.get(_SWITCH) is True
    )


def response_bodies_unread(
    catalog: ProviderCatalog, provider_id: str, revision: MessageRevision, policies: Mapping[str, Any]
) -> FieldIssue | None:
    """The issue of a job keeping response bodies that its provider or message never reads."""
    result = policies.get("result")
    if not isinstance(result, Mapping) or result.get("saveResponseBody") is not True:
        return None
    factory = catalog.get(provider_id)
    if factory is None:
        return None  # a provider gone from the catalog is refused with 503 when a run starts
    descriptor = factory.descriptor()
    if not descriptor.capabilities.response_body:
        return FieldIssue(
            _FIELD, _CODE, f"provider {provider_id} never reads vendor response bodies, so none would be kept"
        )
    off = [name for name in _switches(descriptor.schemas.message) if revision.content.get(name) is not True]
    if not off:
        return None
    return FieldIssue(
        _FIELD,
        _CODE,
        f"message revision {revision.revision} does not read response bodies: set {off[0]} to true in "
        "its content (a new revision), or leave this false",
    )
