"""A job keeps vendor response bodies only where its provider and message read them."""

from __future__ import annotations

from typing import Any

import pytest

from wepush.agent.providers.catalog import ProviderCatalog
from wepush.agent.providers.http import HttpProviderFactory
from wepush.agent.providers.standard import SmtpProviderFactory
from wepush.server.application._job_response_bodies import response_bodies_unread
from wepush.server.domain import MessageRevision, utc_now

CATALOG = ProviderCatalog.from_factories([HttpProviderFactory(), SmtpProviderFactory()])
KEEP = {"result": {"saveResponseBody": True, "responseBodyMaxBytes": 4096}}


def revision(**content: Any) -> MessageRevision:
    now = utc_now()
    return MessageRevision(
        workspace_id="ws",
        message_id="m",
        revision=3,
        content=content,
        content_hash="h",
        created_at=now,
        updated_at=now,
    )


def test_an_http_message_that_reads_bodies_may_have_them_kept() -> None:
    assert response_bodies_unread(CATALOG, "wepush.http", revision(saveResponseBody=True), KEEP) is None


@pytest.mark.parametrize("content", [{}, {"saveResponseBody": False}])
def test_an_http_message_that_reads_none_names_its_switch(content: dict[str, Any]) -> None:
    issue = response_bodies_unread(CATALOG, "wepush.http", revision(**content), KEEP)

    assert issue is not None
    assert (issue.field, issue.code) == ("/policies/result/saveResponseBody", "RESPONSE_BODY_NOT_READ")
    assert "message revision 3" in issue.message
    assert "set saveResponseBody to true" in issue.message


def test_a_provider_without_the_capability_never_has_bodies_to_keep() -> None:
    issue = response_bodies_unread(CATALOG, "wepush.smtp", revision(subject="x"), KEEP)

    assert issue is not None
    assert "provider wepush.smtp never reads vendor response bodies" in issue.message


@pytest.mark.parametrize("policies", [{}, {"result": {"saveResponseBody": False}}])
def test_nothing_is_asked_when_bodies_are_not_kept(policies: dict[str, Any]) -> None:
    assert response_bodies_unread(CATALOG, "wepush.smtp", revision(), policies) is None
    assert response_bodies_unread(CATALOG, "wepush.http", revision(), policies) is None


def test_a_provider_gone_from_the_catalog_is_left_to_the_run_start() -> None:
    assert response_bodies_unread(CATALOG, "wepush.gone", revision(), KEEP) is None
