"""Diagnostics about a secret keep their words: the redactor masks values, not the sentences that name
the field (a config issue on ``/accessToken``, a vendor's ``SignatureDoesNotMatch`` message)."""

from __future__ import annotations

import pytest

from wepush.agent.engine import (
    EngineValidationError,
    ExecutionPolicies,
    MappingSecretResolver,
    ProviderRef,
    RunExecutionSpec,
    SecretRef,
)
from wepush.agent.engine.testing import InMemoryResultSink
from wepush.agent.providers.testing import VendorServer
from wepush.sdk.embedded import WePushEngine

from ._http_cases import ALIYUN_KEY_ID, ALIYUN_KEY_SECRET, ALIYUN_SMS, DINGTALK
from ._stages import HttpStage


async def test_a_malformed_dingtalk_token_is_described_without_a_masked_word() -> None:
    secrets = MappingSecretResolver(
        {SecretRef("default", "ding-token"): "bad-token!", SecretRef("default", "ding-sign"): "SECx"}
    )
    engine = (
        WePushEngine.builder()
        .provider(DINGTALK.make_factory(None))
        .secret_resolver(secrets)
        .result_sink(InMemoryResultSink())
        .build()
    )
    spec = RunExecutionSpec(
        run_id="run-bad-token",
        provider=ProviderRef(DINGTALK.provider_id),
        account_config=DINGTALK.account(),
        message_config=DINGTALK.message(),
        policies=ExecutionPolicies(),
    )

    async with engine:
        with pytest.raises(EngineValidationError) as refused:
            await engine.start(spec, iter([{"name": "x", "mobile": "13800000000"}]))

    assert "/accessToken: is neither an access token nor a webhook URL" in refused.value.message
    assert "bad-token!" not in refused.value.message


@pytest.mark.parametrize(
    ("vendor_code", "message"),
    [
        ("SignatureDoesNotMatch", "Specified signature is not matched with our calculation."),
        ("InvalidAccessKeyId.NotFound", "Specified access key is not found."),
    ],
)
async def test_an_aliyun_refusal_keeps_the_vendor_sentence(
    vendor: VendorServer, vendor_code: str, message: str
) -> None:
    stage = HttpStage(ALIYUN_SMS, vendor)
    vendor.enqueue(ALIYUN_SMS.send_path, ALIYUN_SMS.error_answer(vendor_code, message))

    result = await stage.send_one()

    assert f"{vendor_code}: {message}" in (result.diagnostic or "")
    assert ALIYUN_KEY_ID not in (result.diagnostic or "")
    assert ALIYUN_KEY_SECRET not in (result.diagnostic or "")
