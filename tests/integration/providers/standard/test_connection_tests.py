"""``test_connection`` of the providers without an access token."""

from __future__ import annotations

from datetime import timedelta

import pytest

from wepush.agent.providers.spi import ErrorCategory
from wepush.agent.providers.testing import VendorServer

from ._http_cases import ALIYUN_SMS, DINGTALK, FEISHU, WECOM_BOT, HttpCase, aliyun_verify_signature
from ._stages import HttpStage

C = ErrorCategory


@pytest.mark.parametrize("case", [FEISHU, DINGTALK, WECOM_BOT], ids=str)
async def test_bots_have_no_side_effect_free_check_and_never_post_a_message(
    case: HttpCase, vendor: VendorServer
) -> None:
    stage = HttpStage(case, vendor)

    result = await stage.factory.test_connection(case.account(), case.resolver(), timedelta(seconds=5))

    # Valid, and said so: only ``checked`` tells that nothing went to the vendor.
    assert (result.ok, result.category, result.checked) == (True, None, False)
    assert "no side-effect-free check" in result.message
    assert not stage.factory.descriptor().capabilities.test_connection
    assert vendor.request_count == 0


async def test_aliyun_connection_test_signs_a_read_only_call(vendor: VendorServer) -> None:
    stage = HttpStage(ALIYUN_SMS, vendor)

    accepted = await stage.factory.test_connection(
        ALIYUN_SMS.account(), ALIYUN_SMS.resolver(), timedelta(seconds=5)
    )
    vendor.enqueue(
        "/", ALIYUN_SMS.error_answer("InvalidAccessKeyId.NotFound", "Specified access key is not found.")
    )
    refused = await stage.factory.test_connection(
        ALIYUN_SMS.account(), ALIYUN_SMS.resolver(), timedelta(seconds=5)
    )

    assert accepted.ok
    assert (refused.ok, refused.category) == (False, C.AUTHENTICATION)
    first = vendor.requests[0]
    aliyun_verify_signature(first, "QuerySmsSignList")
    assert dict(first.query) == {"PageIndex": "1", "PageSize": "1"}
