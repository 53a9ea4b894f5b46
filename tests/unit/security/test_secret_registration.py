"""Resolved account secrets are registered with the Service's redactor while a run or a connection test
holds them, and released afterwards without unmasking them for anyone else who still holds them."""

from __future__ import annotations

from datetime import timedelta

from wepush.agent.engine import (
    ConfigDocument,
    ConnectionTestResult,
    ErrorCategory,
    MappingSecretResolver,
    SecretRef,
    SecretResolver,
)
from wepush.agent.providers.fake import FakeProviderFactory
from wepush.server.application._accounts_probe import run_connection_test
from wepush.server.application.execution import RegisteredSecrets
from wepush.server.infra.logging import MASK, Redactor

WEBHOOK_REF = SecretRef("account", "webhookUrl")
# The secret is the last path segment: no query parameter or userinfo for a rule to find.
WEBHOOK = "https://chat.example.com/open-apis/bot/v2/robots/0f8e2c1a1b2c4d5e9f00123456789abc"


def _resolver() -> MappingSecretResolver:
    return MappingSecretResolver({WEBHOOK_REF: WEBHOOK})


async def test_a_resolved_value_is_masked_until_it_is_released() -> None:
    redactor = Redactor()
    secrets = RegisteredSecrets(_resolver(), redactor)

    with await secrets.resolve(WEBHOOK_REF) as value:
        assert value.copy_str() == WEBHOOK
    assert redactor.text(f"POST {WEBHOOK} failed") == f"POST {MASK} failed"

    secrets.release()
    secrets.release()  # idempotent

    assert redactor.text(WEBHOOK) == WEBHOOK


async def test_one_holder_releasing_a_shared_secret_keeps_it_masked_for_the_other() -> None:
    redactor = Redactor()
    first, second = RegisteredSecrets(_resolver(), redactor), RegisteredSecrets(_resolver(), redactor)
    for holder in (first, second, first):  # resolving twice still counts as one registration
        (await holder.resolve(WEBHOOK_REF)).close()

    first.release()
    assert redactor.text(WEBHOOK) == MASK

    second.release()
    assert redactor.text(WEBHOOK) == WEBHOOK


def test_registrations_are_reference_counted_by_the_redactor() -> None:
    redactor = Redactor()
    redactor.add_secret_value("shared-account-password")
    redactor.add_secret_value("shared-account-password")

    redactor.discard_secret_value("shared-account-password")
    assert redactor.text("pw shared-account-password") == f"pw {MASK}"

    redactor.discard_secret_value("shared-account-password")
    redactor.discard_secret_value("shared-account-password")  # more discards than adds: no error
    assert redactor.text("pw shared-account-password") == "pw shared-account-password"


class _EchoingProvider(FakeProviderFactory):
    """A vendor whose error message quotes the webhook it was called on, as real ones do."""

    async def test_connection(
        self,
        account: ConfigDocument,
        secrets: SecretResolver,
        timeout: timedelta,  # noqa: ASYNC109 - SPI signature
    ) -> ConnectionTestResult:
        with await secrets.resolve(WEBHOOK_REF) as webhook:
            return ConnectionTestResult(False, ErrorCategory.AUTHENTICATION, f"403 from {webhook.copy_str()}")


async def test_the_connection_test_outcome_never_quotes_a_resolved_secret() -> None:
    redactor = Redactor()
    account = ConfigDocument.from_json("wepush.fake/account", "1", {"webhookUrl": {"$secret": "webhookUrl"}})

    outcome = await run_connection_test(
        _EchoingProvider(), account, _resolver(), timedelta(seconds=1), redactor=redactor
    )

    assert (outcome.ok, outcome.category) == (False, ErrorCategory.AUTHENTICATION)
    assert outcome.message == f"403 from {MASK}"
    # The test is over: the value is released.
    assert redactor.text(WEBHOOK) == WEBHOOK
