"""The HTTP Provider against a real aiohttp server on loopback."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path
from urllib.parse import quote

import pytest

from tests.fixtures.blackhole import blackhole
from wepush.agent.engine import (
    ExecutionPolicies,
    MappingSecretResolver,
    RecipientRecord,
    SystemClock,
    TimeoutPolicy,
)
from wepush.agent.providers.http import HttpProviderFactory
from wepush.agent.providers.http._auth import CredentialUnusable
from wepush.agent.providers.http._config import ConfigError
from wepush.agent.providers.spi import (
    CancellationToken,
    ConfigDocument,
    ErrorCategory,
    ProviderOpenContext,
    ProviderPreviewRequest,
    SecretRef,
)
from wepush.agent.providers.testing import ScriptedResponse, VendorServer

from ._http_support import (
    QUERY_KEY,
    SECRETS,
    TOKEN,
    PinnedResolver,
    account_doc,
    http_session,
    message_doc,
    recipient,
    send,
    unused_loopback_port,
)
from .standard._smtp_server import make_pki

C = ErrorCategory


@pytest.fixture
async def vendor() -> AsyncIterator[VendorServer]:
    async with VendorServer() as server:
        yield server


async def test_success_sends_the_rendered_request_with_credentials(vendor: VendorServer) -> None:
    vendor.enqueue(
        "/v1/notify", ScriptedResponse(200, json={"success": True}, headers={"X-Request-Id": "req-42"})
    )
    account = account_doc(vendor.url("/v1"), defaultHeaders={"User-Agent": "WePush-Next"})
    message = message_doc(
        query={"lang": "zh"}, successCondition={"status": [200, 201], "jsonPath": "$.success", "equals": True}
    )

    async with http_session(account, message) as session:
        result = await send(session, recipient(content='Say "hi"\nbye'), message=message)

    assert result.success
    assert result.external_request_id == "req-42"
    [received] = vendor.requests
    assert (received.method, received.path, dict(received.query)) == ("POST", "/v1/notify", {"lang": "zh"})
    assert received.headers["Authorization"] == f"Bearer {TOKEN}"
    assert received.headers["User-Agent"] == "WePush-Next"
    assert received.json() == {"mobile": "13800000000", "content": 'Say "hi"\nbye'}


@pytest.mark.parametrize(
    ("status", "category", "code", "retryable"),
    [
        (401, C.AUTHENTICATION, "HTTP_UNAUTHORIZED", False),
        (403, C.AUTHORIZATION, "HTTP_FORBIDDEN", False),
        (404, C.PERMANENT_REMOTE, "HTTP_CLIENT_REJECTED", False),
        (422, C.INVALID_REQUEST, "HTTP_BAD_REQUEST", False),
        (500, C.TEMPORARY_REMOTE, "HTTP_SERVER_ERROR", True),
    ],
)
async def test_error_statuses_are_classified(
    vendor: VendorServer, status: int, category: ErrorCategory, code: str, retryable: bool
) -> None:
    vendor.enqueue("/notify", ScriptedResponse(status, json={"error": "nope"}))

    async with http_session(account_doc(vendor.base_url)) as session:
        result = await send(session)

    assert not result.success
    assert (result.category, result.provider_code, result.retryable) == (category, code, retryable)
    assert result.diagnostic is not None
    assert result.diagnostic.startswith(f"HTTP {status}")


async def test_rate_limit_carries_retry_after_seconds(vendor: VendorServer) -> None:
    vendor.enqueue("/notify", ScriptedResponse(429, headers={"Retry-After": "7"}))

    async with http_session(account_doc(vendor.base_url)) as session:
        result = await send(session)

    assert (result.category, result.retryable, result.retry_after) == (
        C.RATE_LIMITED,
        True,
        timedelta(seconds=7),
    )


async def test_rate_limit_carries_retry_after_http_date(vendor: VendorServer) -> None:
    when = datetime.now(UTC) + timedelta(seconds=120)
    vendor.enqueue(
        "/notify", ScriptedResponse(429, headers={"Retry-After": format_datetime(when, usegmt=True)})
    )

    async with http_session(account_doc(vendor.base_url)) as session:
        result = await send(session)

    assert result.category is C.RATE_LIMITED
    assert result.retry_after is not None
    assert timedelta(seconds=100) < result.retry_after <= timedelta(seconds=120)


@pytest.mark.parametrize(
    ("header", "expected"),
    [("\u00b2", None), ("100000000000000", timedelta(days=1)), ("9" * 5000, timedelta(days=1))],
    ids=["superscript-digit", "beyond-timedelta", "beyond-int-digits"],
)
async def test_rate_limit_with_an_odd_retry_after_stays_a_rate_limit(
    vendor: VendorServer, header: str, expected: timedelta | None
) -> None:
    vendor.enqueue("/notify", ScriptedResponse(429, headers={"Retry-After": header}))

    async with http_session(account_doc(vendor.base_url)) as session:
        result = await send(session)

    assert (result.category, result.provider_code, result.retry_after) == (
        C.RATE_LIMITED,
        "HTTP_RATE_LIMITED",
        expected,
    )


async def test_slow_vendor_times_out_and_a_post_is_not_retried(vendor: VendorServer) -> None:
    vendor.enqueue("*", ScriptedResponse(200, delay_seconds=10), ScriptedResponse(200, delay_seconds=10))
    account = account_doc(vendor.base_url, requestTimeout="PT0.3S")

    async with http_session(account) as session:
        post = await send(session)
    get_message = ConfigDocument.from_json(
        "wepush.http/message", "1", {"method": "GET", "path": "/s/{{mobile}}"}
    )
    async with http_session(account, get_message) as session:
        get = await send(session, message=get_message)

    assert (post.category, post.provider_code, post.retryable) == (C.TIMEOUT, "HTTP_TIMEOUT", False)
    assert (get.category, get.retryable) == (C.TIMEOUT, True)


async def test_connection_refused_is_a_retryable_network_error() -> None:
    port = unused_loopback_port()

    async with http_session(account_doc(f"http://127.0.0.1:{port}")) as session:
        result = await send(session)

    assert (result.category, result.provider_code, result.retryable) == (
        C.NETWORK,
        "HTTP_CONNECT_FAILED",
        True,
    )


async def test_large_response_is_capped_and_marked_truncated(vendor: VendorServer) -> None:
    vendor.enqueue("/notify", ScriptedResponse(200, body=b"x" * 200_000))
    message = message_doc(saveResponseBody=True, responseBodyMaxBytes=1000)

    async with http_session(account_doc(vendor.base_url), message) as session:
        result = await send(session, message=message)

    assert result.success
    assert result.response_body == "x" * 1000
    assert result.response_truncated


async def test_truncated_response_cannot_satisfy_a_json_condition(vendor: VendorServer) -> None:
    vendor.enqueue("/notify", ScriptedResponse(200, json={"success": True, "pad": "y" * 5000}))
    message = message_doc(
        responseBodyMaxBytes=100, successCondition={"jsonPath": "$.success", "equals": True}
    )

    async with http_session(account_doc(vendor.base_url), message) as session:
        result = await send(session, message=message)

    assert (result.category, result.provider_code) == (C.UNKNOWN, "HTTP_RESPONSE_UNREADABLE")
    assert result.response_body is None


async def test_a_body_nested_deeper_than_the_parser_goes_is_unreadable(vendor: VendorServer) -> None:
    vendor.enqueue("/notify", ScriptedResponse(200, body=b"[" * 5000))
    message = message_doc(successCondition={"jsonPath": "$.success", "equals": True})

    async with http_session(account_doc(vendor.base_url), message) as session:
        result = await send(session, message=message)

    assert (result.category, result.provider_code) == (C.UNKNOWN, "HTTP_RESPONSE_UNREADABLE")


async def test_success_condition_mismatch_is_a_permanent_failure(vendor: VendorServer) -> None:
    vendor.enqueue("/notify", ScriptedResponse(200, json={"success": False, "msg": "blocked"}))
    message = message_doc(successCondition={"jsonPath": "$.success", "equals": True})

    async with http_session(account_doc(vendor.base_url), message) as session:
        result = await send(session, message=message)

    assert (result.category, result.provider_code) == (C.PERMANENT_REMOTE, "HTTP_SUCCESS_CONDITION_NOT_MET")
    assert result.diagnostic is not None
    assert "blocked" in result.diagnostic


async def test_redirects_are_not_followed_by_default(vendor: VendorServer) -> None:
    vendor.enqueue("/notify", ScriptedResponse(302, headers={"Location": "/elsewhere"}))

    async with http_session(account_doc(vendor.base_url)) as session:
        result = await send(session)

    assert (result.category, result.provider_code) == (C.PERMANENT_REMOTE, "HTTP_REDIRECT_NOT_FOLLOWED")
    assert [r.path for r in vendor.requests] == ["/notify"]


async def test_enabled_redirects_are_followed_and_307_keeps_the_body(vendor: VendorServer) -> None:
    vendor.enqueue("/notify", ScriptedResponse(307, headers={"Location": "/moved"}))
    vendor.enqueue("/moved", ScriptedResponse(200))

    async with http_session(account_doc(vendor.base_url, allowRedirects=True)) as session:
        result = await send(session)

    assert result.success
    assert [(r.method, r.path) for r in vendor.requests] == [("POST", "/notify"), ("POST", "/moved")]
    assert vendor.requests[1].json() == vendor.requests[0].json()


async def test_303_redirect_becomes_a_get_without_body(vendor: VendorServer) -> None:
    vendor.enqueue("/notify", ScriptedResponse(303, headers={"Location": "/receipt"}))

    async with http_session(account_doc(vendor.base_url, allowRedirects=True)) as session:
        result = await send(session)

    assert result.success
    assert (vendor.requests[1].method, vendor.requests[1].body) == ("GET", b"")


async def test_redirect_hops_are_counted(vendor: VendorServer) -> None:
    vendor.respond_with(lambda request: ScriptedResponse(302, headers={"Location": request.path + "x"}))

    async with http_session(account_doc(vendor.base_url, allowRedirects=True, maxRedirects=2)) as session:
        result = await send(session)

    assert (result.category, result.provider_code) == (C.PERMANENT_REMOTE, "HTTP_TOO_MANY_REDIRECTS")
    assert len(vendor.requests) == 3


@pytest.mark.parametrize(
    "location", ["http://169.254.169.254/latest/meta-data", "http://2130706433/", "file:///etc/passwd"]
)
async def test_redirect_to_a_forbidden_destination_is_refused(vendor: VendorServer, location: str) -> None:
    vendor.enqueue("/notify", ScriptedResponse(302, headers={"Location": location}))

    async with http_session(account_doc(vendor.base_url, allowRedirects=True)) as session:
        result = await send(session)

    assert (result.category, result.provider_code) == (C.INVALID_REQUEST, "HTTP_REDIRECT_REFUSED")
    assert len(vendor.requests) == 1


@pytest.mark.parametrize("location", ["http://[::1/", "http://127.0.0.1:99999/", "http://xn--a.example/"])
async def test_redirect_to_a_location_that_is_no_url_is_not_followed(
    vendor: VendorServer, location: str
) -> None:
    vendor.enqueue("/notify", ScriptedResponse(302, headers={"Location": location}))

    async with http_session(account_doc(vendor.base_url, allowRedirects=True)) as session:
        result = await send(session)

    assert (result.category, result.provider_code) == (C.PERMANENT_REMOTE, "HTTP_REDIRECT_NOT_FOLLOWED")
    assert len(vendor.requests) == 1


async def test_redirect_to_a_name_resolving_to_metadata_is_refused_at_connect(vendor: VendorServer) -> None:
    factory = HttpProviderFactory(
        allow_loopback_for_tests=True,
        resolver_factory=lambda: PinnedResolver({"metadata.attacker.example": "169.254.169.254"}),
    )
    vendor.enqueue(
        "/notify", ScriptedResponse(302, headers={"Location": "http://metadata.attacker.example/x"})
    )

    async with http_session(account_doc(vendor.base_url, allowRedirects=True), factory=factory) as session:
        result = await send(session)

    assert (result.category, result.provider_code) == (C.INVALID_REQUEST, "HTTP_ADDRESS_REFUSED")
    assert result.diagnostic == "destination address refused: cloud metadata endpoint"


async def test_cross_origin_redirect_drops_credentials(vendor: VendorServer) -> None:
    async with VendorServer() as other:
        vendor.enqueue("/notify", ScriptedResponse(307, headers={"Location": other.url("/landing")}))

        async with http_session(account_doc(vendor.base_url, allowRedirects=True)) as session:
            result = await send(session)

        assert result.success
        assert "Authorization" in vendor.requests[0].headers
        assert "Authorization" not in other.requests[0].headers


async def test_a_request_timeout_that_runs_out_while_connecting_sent_nothing() -> None:
    """With the request's timeout shorter than the connect timeout, it runs out while connecting to a
    host that drops the SYNs: nothing was sent, so it is a connect timeout (NETWORK: retried, FAILED in
    the end), not a timeout that may hide a delivered request (UNKNOWN)."""
    with blackhole() as port:
        account = account_doc(f"http://127.0.0.1:{port}", connectTimeout="PT5S", requestTimeout="PT1S")
        async with http_session(account) as session:
            result = await send(session)

    assert (result.category, result.provider_code, result.retryable) == (
        C.NETWORK,
        "HTTP_CONNECT_TIMEOUT",
        True,
    )
    assert result.diagnostic == f"connecting to http://127.0.0.1:{port} timed out"


async def test_the_jobs_connect_timeout_caps_the_accounts() -> None:
    """``policies.timeout.connect`` was accepted, shown with every job and used by nothing."""
    with blackhole() as port:
        account = account_doc(f"http://127.0.0.1:{port}", connectTimeout="PT60S", requestTimeout="PT120S")
        capped = TimeoutPolicy(item=None, connect=timedelta(seconds=1))
        async with asyncio.timeout(30), http_session(account, timeouts=capped) as session:  # a hang guard
            result = await send(session)

    assert (result.category, result.provider_code) == (C.NETWORK, "HTTP_CONNECT_TIMEOUT")


async def test_a_redirect_from_https_to_http_is_refused(vendor: VendorServer, tmp_path: Path) -> None:
    """Credentials are dropped on leaving the origin anyway, but a 307 would repeat the body (the
    recipient's data) and the message's headers in plain text."""
    pki = make_pki(tmp_path)
    async with VendorServer(ssl_context=pki.server_context()) as secure:
        secure.enqueue("/notify", ScriptedResponse(307, headers={"Location": vendor.url("/notify")}))
        account = account_doc(secure.base_url, allowRedirects=True, tlsVerify=False)

        async with http_session(account) as session:
            result = await send(session)

    assert (result.category, result.provider_code) == (C.INVALID_REQUEST, "HTTP_REDIRECT_REFUSED")
    assert result.diagnostic == "redirect refused: from https to http"
    assert (secure.request_count, vendor.request_count) == (1, 0)


async def test_localhost_is_refused_without_the_test_setting(vendor: VendorServer) -> None:
    account = account_doc(f"http://localhost:{vendor.port}")

    async with http_session(account, factory=HttpProviderFactory()) as session:
        result = await send(session)

    assert (result.category, result.provider_code) == (C.INVALID_REQUEST, "HTTP_ADDRESS_REFUSED")
    assert result.diagnostic == "destination address refused: loopback"
    assert vendor.request_count == 0


async def test_localhost_is_reachable_with_the_test_setting(vendor: VendorServer) -> None:
    async with http_session(account_doc(f"http://localhost:{vendor.port}")) as session:
        result = await send(session)

    assert result.success
    assert vendor.request_count == 1


async def test_metadata_address_as_base_url_is_refused_before_any_connection() -> None:
    with pytest.raises(ConfigError) as raised:
        async with http_session(account_doc("http://169.254.169.254")):
            pass

    assert [(i.path, i.code) for i in raised.value.issues] == [("/baseUrl", "ADDRESS_REFUSED")]


async def test_name_resolving_to_metadata_is_refused() -> None:
    factory = HttpProviderFactory(
        resolver_factory=lambda: PinnedResolver({"api.vendor.example": "169.254.169.254"})
    )

    async with http_session(account_doc("http://api.vendor.example"), factory=factory) as session:
        result = await send(session)

    assert (result.category, result.provider_code) == (C.INVALID_REQUEST, "HTTP_ADDRESS_REFUSED")


async def test_secrets_never_reach_results_diagnostics_or_reprs(vendor: VendorServer) -> None:
    echo = f"invalid credentials Authorization: Bearer {TOKEN} ({TOKEN})".encode()
    vendor.enqueue("/notify", ScriptedResponse(401, body=echo), ScriptedResponse(200, body=echo))
    message = message_doc(saveResponseBody=True)

    async with http_session(account_doc(vendor.base_url), message) as session:
        failed = await send(session, message=message)
        succeeded = await send(session, message=message)
        preview = await session.preview(ProviderPreviewRequest(message, recipient()))
        texts = [repr(session), repr(failed), repr(succeeded), repr(preview)]

    assert failed.category is C.AUTHENTICATION
    assert succeeded.response_body is not None
    assert "******" in succeeded.response_body
    assert not [text for text in texts if TOKEN in text]


async def test_basic_and_header_auth_send_the_resolved_secret(vendor: VendorServer) -> None:
    basic = account_doc(
        vendor.base_url, auth={"type": "BASIC", "username": "svc", "password": {"$secret": "basic-pw"}}
    )
    header = account_doc(
        vendor.base_url,
        auth={"type": "HEADER", "headerName": "X-Api-Key", "value": {"$secret": "http-account-token"}},
    )

    async with http_session(basic) as session:
        assert (await send(session)).success
    async with http_session(header) as session:
        assert (await send(session)).success

    expected_basic = "Basic " + base64.b64encode(b"svc:pw-Zx81-secret").decode()
    assert vendor.requests[0].headers["Authorization"] == expected_basic
    assert vendor.requests[1].headers["X-Api-Key"] == TOKEN


QUERY_AUTH = {"type": "QUERY", "parameterName": "access_token", "value": {"$secret": "query-key"}}


async def test_query_auth_sends_the_secret_as_a_parameter_and_masks_its_echo(vendor: VendorServer) -> None:
    echoed = f"unknown key {QUERY_KEY} in /notify?lang=zh&access_token={quote(QUERY_KEY, safe='')}"
    vendor.enqueue("/notify", ScriptedResponse(200, body=echoed.encode()))
    account = account_doc(vendor.base_url, auth=QUERY_AUTH)
    message = message_doc(query={"lang": "zh"}, saveResponseBody=True)

    async with http_session(account, message) as session:
        result = await send(session, message=message)
        preview = await session.preview(ProviderPreviewRequest(message, recipient()))

    [received] = vendor.requests
    assert dict(received.query) == {"lang": "zh", "access_token": QUERY_KEY}
    assert "Authorization" not in received.headers
    assert result.response_body is not None
    assert QUERY_KEY not in result.response_body
    assert quote(QUERY_KEY, safe="") not in result.response_body
    assert preview.details["url"] == vendor.url("/notify?lang=zh&access_token=******")
    assert QUERY_KEY not in repr(preview)


async def test_query_credential_follows_redirects_within_its_origin_only(vendor: VendorServer) -> None:
    async with VendorServer() as other:
        vendor.enqueue(
            "/notify",
            ScriptedResponse(307, headers={"Location": "/moved"}),
        )
        vendor.enqueue("/moved", ScriptedResponse(307, headers={"Location": other.url("/landing")}))
        account = account_doc(vendor.base_url, auth=QUERY_AUTH, allowRedirects=True)

        async with http_session(account) as session:
            result = await send(session)

        assert result.success
        assert [dict(r.query).get("access_token") for r in vendor.requests] == [QUERY_KEY, QUERY_KEY]
        assert "access_token" not in dict(other.requests[0].query)


async def test_query_credential_never_returns_once_a_redirect_left_its_origin(vendor: VendorServer) -> None:
    async with VendorServer() as other:
        vendor.enqueue("/notify", ScriptedResponse(302, headers={"Location": other.url("/a")}))
        other.enqueue("/a", ScriptedResponse(302, headers={"Location": "/b"}))
        other.enqueue("/b", ScriptedResponse(302, headers={"Location": vendor.url("/back")}))
        account = account_doc(vendor.base_url, auth=QUERY_AUTH, allowRedirects=True, maxRedirects=5)

        async with http_session(account) as session:
            result = await send(session)

        assert result.success
        # It used to be added again at /b: that hop stays within the origin, but not the one granted.
        assert [(r.path, dict(r.query).get("access_token")) for r in other.requests] == [
            ("/a", None),
            ("/b", None),
        ]
        assert [(r.path, dict(r.query).get("access_token")) for r in vendor.requests] == [
            ("/notify", QUERY_KEY),
            ("/back", None),
        ]


async def test_connection_test_sends_the_query_credential(vendor: VendorServer) -> None:
    vendor.enqueue("/", ScriptedResponse(200))
    factory = HttpProviderFactory(allow_loopback_for_tests=True)

    result = await factory.test_connection(
        account_doc(vendor.url("/"), auth=QUERY_AUTH), SECRETS, timedelta(seconds=2)
    )

    assert result.ok
    assert dict(vendor.requests[0].query) == {"access_token": QUERY_KEY}


async def test_dry_run_renders_but_never_connects(vendor: VendorServer) -> None:
    async with http_session(account_doc(vendor.base_url), dry_run=True) as session:
        result = await send(session)
        missing = await send(session, RecipientRecord.of("item-2", 2, {"mobile": "1"}))

    assert (result.success, result.provider_code) == (True, "DRY_RUN")
    assert (missing.category, missing.provider_code) == (C.RECIPIENT_INVALID, "HTTP_RECIPIENT_FIELD_MISSING")
    assert vendor.request_count == 0


async def test_preview_shows_the_exact_request_with_the_secret_masked(vendor: VendorServer) -> None:
    message = message_doc(query={"to": "{{mobile}}"})

    async with http_session(account_doc(vendor.url("/api")), message, dry_run=True) as session:
        preview = await session.preview(ProviderPreviewRequest(message, recipient(content='a"b')))

    assert preview.content_type == "application/json"
    assert preview.rendered == '{"mobile":"13800000000","content":"a\\"b"}'
    assert preview.details["method"] == "POST"
    assert preview.details["url"] == vendor.url("/api/notify?to=13800000000")
    assert preview.details["headers"]["Authorization"] == "Bearer ******"
    assert vendor.request_count == 0


async def test_missing_recipient_field_fails_the_item_without_a_request(vendor: VendorServer) -> None:
    async with http_session(account_doc(vendor.base_url)) as session:
        result = await send(session, RecipientRecord.of("item-9", 9, {"mobile": "1"}))

    assert (result.category, result.retryable) == (C.RECIPIENT_INVALID, False)
    assert result.diagnostic is not None
    assert "'content'" in result.diagnostic
    assert vendor.request_count == 0


async def test_cancellation_token_stops_an_in_flight_request(vendor: VendorServer) -> None:
    vendor.enqueue("/notify", ScriptedResponse(200, delay_seconds=10))
    token = CancellationToken()

    async with http_session(account_doc(vendor.base_url)) as session:
        pending = asyncio.create_task(send(session, token=token))
        await vendor.wait_for_requests(1)
        token.cancel("run cancelled")
        result = await pending

    assert (result.category, result.provider_code) == (C.CANCELLED, "HTTP_CANCELLED")


async def test_concurrent_sends_share_one_session(vendor: VendorServer) -> None:
    async with http_session(account_doc(vendor.base_url), concurrency=16) as session:
        results = await asyncio.gather(*(send(session, recipient(i, content=f"m{i}")) for i in range(64)))

    assert all(r.success for r in results)
    assert sorted(r.json()["content"] for r in vendor.requests) == sorted(f"m{i}" for i in range(64))  # type: ignore[index]


async def test_close_is_idempotent(vendor: VendorServer) -> None:
    async with http_session(account_doc(vendor.base_url)) as session:
        await session.close()
        await session.close()


async def test_connection_test_reports_reachability_and_auth(vendor: VendorServer) -> None:
    vendor.enqueue("/", ScriptedResponse(405), ScriptedResponse(401))
    factory = HttpProviderFactory(allow_loopback_for_tests=True)

    reachable = await factory.test_connection(account_doc(vendor.url("/")), SECRETS, timedelta(seconds=2))
    unauthorized = await factory.test_connection(account_doc(vendor.url("/")), SECRETS, timedelta(seconds=2))
    refused = await HttpProviderFactory().test_connection(
        account_doc(f"http://localhost:{vendor.port}/"), SECRETS, timedelta(seconds=2)
    )

    assert (reachable.ok, reachable.message) == (True, "HTTP 405")
    assert (unauthorized.ok, unauthorized.category) == (False, C.AUTHENTICATION)
    assert (refused.ok, refused.category) == (False, C.INVALID_REQUEST)
    assert [r.method for r in vendor.requests] == ["HEAD", "HEAD"]
    assert vendor.requests[0].headers["Authorization"] == f"Bearer {TOKEN}"


@pytest.mark.parametrize(
    ("auth", "field"),
    [
        ({"type": "BEARER", "token": {"$secret": "split"}}, "auth.token"),
        ({"type": "HEADER", "headerName": "X-Api-Key", "value": {"$secret": "split"}}, "auth.value"),
    ],
)
async def test_a_secret_with_a_line_break_fails_clearly_before_any_request(
    vendor: VendorServer, auth: dict[str, object], field: str
) -> None:
    # A pasted token with a trailing CRLF (or an injected header) cannot go into a header.
    secret = "tok-1234\r\nX-Injected: yes"
    secrets = MappingSecretResolver({SecretRef("default", "split"): secret})
    account = account_doc(vendor.url("/"), auth=auth)
    factory = HttpProviderFactory(allow_loopback_for_tests=True)

    tested = await factory.test_connection(account, secrets, timedelta(seconds=2))
    assert (tested.ok, tested.category) == (False, C.AUTHENTICATION)
    assert tested.message == (
        f"the secret referenced by {field} contains a line break or NUL, which an HTTP header cannot carry: "
        "replace the secret with its value on one line"
    )
    assert "tok-1234" not in tested.message
    context = ProviderOpenContext(
        run_id="run-1",
        account_config=account,
        message_config=message_doc(),
        secrets=secrets,
        policies=ExecutionPolicies(),
        dry_run=False,
        clock=SystemClock(),
    )
    with pytest.raises(CredentialUnusable, match=f"referenced by {field} contains a line break"):
        await factory.open(context)
    assert vendor.requests == []
