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
from wepush.server.application._job_variables import recipient_field_groups, template_variables

from ._http_cases import HTTP_CASES, HttpCase, recipient_values
from ._stages import open_session

_ANY_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_-]*)\s*\}\}")
#: Group bots post to their webhook: no recipient field addresses them.
_BOTS = frozenset({"wepush.feishu-bot", "wepush.dingtalk-bot", "wepush.wecom-bot"})


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


_ADDRESSED = [case for case in HTTP_CASES if case.provider_id not in _BOTS]


@pytest.mark.parametrize("case", _ADDRESSED, ids=str)
async def test_each_recipient_field_group_found_is_one_the_provider_needs(case: HttpCase) -> None:
    """The fields a message sends to (``x-wepush-recipient-field``): lacking every field of a group, a
    recipient cannot be sent to; with one of them it can."""
    factory = case.make_factory(None)
    groups = recipient_field_groups(factory.descriptor().schemas.message, dict(case.message_json))
    assert groups

    message = case.message()
    session = await open_session(factory, case.account(), message, case.resolver(), dry_run=True)
    try:
        for group in groups:
            fields = {field for _, field in group.members}
            lacking = {k: v for k, v in recipient_values(1).items() if k not in fields}
            preview = await session.preview(
                ProviderPreviewRequest(message, RecipientRecord.of("item-1", 1, lacking))
            )
            assert "error" in preview.details, f"{case.provider_id} sent without any of {sorted(fields)}"
            for field in sorted(fields & set(recipient_values(1))):
                one = {**lacking, field: recipient_values(1)[field]}
                preview = await session.preview(
                    ProviderPreviewRequest(message, RecipientRecord.of("item-1", 1, one))
                )
                assert "error" not in preview.details, f"{case.provider_id} needs more than {field!r}"
    finally:
        await session.close()


def test_bots_send_to_their_webhook_and_name_no_recipient_field() -> None:
    for case in HTTP_CASES:
        if case.provider_id in _BOTS:
            schema = case.make_factory(None).descriptor().schemas.message
            assert recipient_field_groups(schema, dict(case.message_json)) == [], case.provider_id
