"""The Service's reading of a message's placeholders agrees with what each provider looks up.

A job is refused when its message names a field its snapshot lacks; that check reads placeholders from
the provider's message schema (``x-wepush-variable``). Here each vendor provider previews its case
message: with every name the Service found it renders, and without any one of them it fails, so the
Service neither misses a name a provider needs nor demands one it does not.
"""

from __future__ import annotations

import json
import re

import pytest

from wepush.agent.engine import RecipientRecord
from wepush.agent.providers.spi import ProviderPreviewRequest
from wepush.server.application._job_variables import template_variables

from ._http_cases import HTTP_CASES, HttpCase, recipient_values
from ._stages import open_session

_ANY_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_-]*)\s*\}\}")


@pytest.mark.parametrize("case", HTTP_CASES, ids=str)
async def test_each_name_found_is_one_the_provider_needs(case: HttpCase) -> None:
    factory = case.make_factory(None)
    found = template_variables(factory.descriptor().schemas.message, dict(case.message_json))
    # The case messages hold placeholders only where the provider renders them.
    assert found == set(_ANY_PLACEHOLDER.findall(json.dumps(case.message_json)))
    assert found

    message = case.message()
    session = await open_session(factory, case.account(), message, case.resolver(), dry_run=True)
    try:
        whole = await session.preview(ProviderPreviewRequest(message, case.recipient(1)))
        assert "error" not in whole.details
        for name in sorted(found):
            fields = {k: v for k, v in recipient_values(1).items() if k != name}
            lacking = RecipientRecord.of("item-1", 1, fields)
            preview = await session.preview(ProviderPreviewRequest(message, lacking))
            assert "error" in preview.details, f"{case.provider_id} rendered without {name!r}"
    finally:
        await session.close()
