from __future__ import annotations

import io
import json
import logging
from collections.abc import AsyncIterator

import httpx
import pytest
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from wepush.server.api.middleware import (
    BodyLimitOverride,
    BodySizeLimitMiddleware,
    ProblemCorsMiddleware,
    SecurityHeadersMiddleware,
    TraceIdMiddleware,
    cors_middleware_options,
    problem_body,
)
from wepush.server.api.middleware._body_limit import _PayloadTooLarge
from wepush.server.infra.logging import JsonFormatter, current_log_context, current_trace_id

LIMIT = 64
IMPORT_LIMIT = 1024
IMPORT_PATH = "/api/v1/workspaces/ws-1/audiences/a-1/imports"
handler_log = logging.getLogger("wepush.test.handler")


async def echo(request: Request) -> Response:
    body = await request.body()
    handler_log.info("echo handled")
    return JSONResponse({"received": len(body), "traceId": current_trace_id()})


async def docs(request: Request) -> Response:
    return PlainTextResponse("<html>docs</html>", media_type="text/html")


async def cached(request: Request) -> Response:
    return PlainTextResponse("ok", headers={"Cache-Control": "max-age=60"})


def build_app(*, cors_origins: tuple[str, ...] = ()) -> Starlette:
    middleware = [
        Middleware(TraceIdMiddleware),
        Middleware(SecurityHeadersMiddleware),
        Middleware(
            BodySizeLimitMiddleware,
            max_bytes=LIMIT,
            overrides=[BodyLimitOverride(lambda path: path.endswith("/imports"), IMPORT_LIMIT)],
        ),
    ]
    options = cors_middleware_options(cors_origins)
    if options is not None:
        middleware.append(Middleware(ProblemCorsMiddleware, **options))
    return Starlette(
        routes=[
            Route("/api/v1/echo", echo, methods=["POST"]),
            Route(IMPORT_PATH, echo, methods=["POST"]),
            Route("/api/v1/ui/index.html", docs),
            Route("/api/v1/cached", cached),
            Route("/index.html", docs),
            Route("/api/v1/workspaces/{rest:path}", echo, methods=["POST"]),
            Route("/internal/agent/v1/leases/{rest:path}", echo, methods=["POST"]),
        ],
        middleware=middleware,
    )


def client(app: Starlette) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://wepush.local")


async def chunks(total: int, size: int = 16) -> AsyncIterator[bytes]:
    sent = 0
    while sent < total:
        step = min(size, total - sent)
        sent += step
        yield b"x" * step


def assert_problem(response: httpx.Response, status: int, code: str) -> dict[str, object]:
    assert response.status_code == status
    assert response.headers["content-type"] == "application/problem+json"
    body: dict[str, object] = response.json()
    assert set(body) >= {"type", "title", "status", "code", "detail", "traceId"}
    assert body["status"] == status
    assert body["code"] == code
    return body


async def test_body_within_limit_reaches_the_handler() -> None:
    async with client(build_app()) as http:
        response = await http.post("/api/v1/echo", content=b"x" * LIMIT)

    assert response.status_code == 200
    assert response.json()["received"] == LIMIT


async def test_declared_content_length_over_limit_is_413() -> None:
    async with client(build_app()) as http:
        response = await http.post("/api/v1/echo", content=b"x" * (LIMIT + 1))

    body = assert_problem(response, 413, "PAYLOAD_TOO_LARGE")
    assert body["traceId"] == response.headers["x-trace-id"]


async def test_chunked_body_without_content_length_over_limit_is_413() -> None:
    async with client(build_app()) as http:
        request = http.build_request("POST", "/api/v1/echo", content=chunks(LIMIT * 3))
        assert "content-length" not in request.headers
        response = await http.send(request)

    assert_problem(response, 413, "PAYLOAD_TOO_LARGE")


async def test_chunked_body_within_limit_is_accepted() -> None:
    async with client(build_app()) as http:
        response = await http.post("/api/v1/echo", content=chunks(LIMIT))

    assert response.status_code == 200
    assert response.json()["received"] == LIMIT


async def test_import_upload_route_gets_its_larger_limit() -> None:
    async with client(build_app()) as http:
        accepted = await http.post(IMPORT_PATH, content=chunks(IMPORT_LIMIT))
        refused = await http.post(IMPORT_PATH, content=b"x" * (IMPORT_LIMIT + 1))

    assert accepted.status_code == 200
    assert_problem(refused, 413, "PAYLOAD_TOO_LARGE")


async def test_api_responses_carry_the_security_headers() -> None:
    async with client(build_app()) as http:
        response = await http.post("/api/v1/echo", content=b"{}")

    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["x-frame-options"] == "DENY"
    assert response.headers["referrer-policy"] == "no-referrer"
    assert response.headers["content-security-policy"].startswith("default-src 'self'")
    assert "unsafe-inline" not in response.headers["content-security-policy"]
    assert response.headers["cache-control"] == "no-store"


async def test_problem_responses_also_carry_the_security_headers() -> None:
    async with client(build_app()) as http:
        response = await http.post("/api/v1/echo", content=b"x" * (LIMIT + 1))

    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["cache-control"] == "no-store"


async def test_docs_ui_gets_the_relaxed_csp_and_other_pages_the_strict_one() -> None:
    async with client(build_app()) as http:
        docs_page = await http.get("/api/v1/ui/index.html")
        webui_page = await http.get("/index.html")

    assert "'unsafe-inline'" in docs_page.headers["content-security-policy"]
    assert webui_page.headers["content-security-policy"].startswith("default-src 'self'")
    assert "unsafe-inline" not in webui_page.headers["content-security-policy"]
    assert "cache-control" not in webui_page.headers


async def test_cache_control_set_by_the_endpoint_is_respected() -> None:
    async with client(build_app()) as http:
        response = await http.get("/api/v1/cached")

    assert response.headers["cache-control"] == "max-age=60"


async def test_inbound_trace_id_is_propagated_to_handler_logs_and_response() -> None:
    stream = io.StringIO()
    log_handler = logging.StreamHandler(stream)
    log_handler.setFormatter(JsonFormatter(service="wepush-server", instance_id="node-a"))
    handler_log.addHandler(log_handler)
    handler_log.setLevel(logging.INFO)
    try:
        async with client(build_app()) as http:
            response = await http.post("/api/v1/echo", content=b"{}", headers={"X-Trace-Id": "trace-abc.123"})
    finally:
        handler_log.removeHandler(log_handler)

    assert response.headers["x-trace-id"] == "trace-abc.123"
    assert response.json()["traceId"] == "trace-abc.123"
    assert json.loads(stream.getvalue())["traceId"] == "trace-abc.123"
    assert current_trace_id() is None


async def _handler_log_lines(*paths: str) -> list[dict[str, object]]:
    stream = io.StringIO()
    log_handler = logging.StreamHandler(stream)
    log_handler.setFormatter(JsonFormatter(service="wepush-server", instance_id="node-a"))
    handler_log.addHandler(log_handler)
    handler_log.setLevel(logging.INFO)
    try:
        async with client(build_app()) as http:
            for path in paths:
                response = await http.post(path, content=b"{}")
                assert response.status_code == 200, path
    finally:
        handler_log.removeHandler(log_handler)
    return [json.loads(line) for line in stream.getvalue().splitlines()]


async def test_workspace_run_and_lease_ids_in_the_path_are_bound_to_the_request_logs() -> None:
    ws, run, lease = "0190f3a2-7c1e-7d3a-9b4e-2f1c0a9e8d71", "0190f3a2-aaaa-7d3a-9b4e-000000000001", "lease-7"

    workspace_only, with_run, job_runs, agent_api = await _handler_log_lines(
        f"/api/v1/workspaces/{ws}/accounts",
        f"/api/v1/workspaces/{ws}/runs/{run}/commands/pause",
        f"/api/v1/workspaces/{ws}/jobs/job-1/runs",
        f"/internal/agent/v1/leases/{lease}/snapshot",
    )

    assert (workspace_only["workspaceId"], workspace_only["runId"]) == (ws, None)
    assert (with_run["workspaceId"], with_run["runId"]) == (ws, run)
    assert (job_runs["workspaceId"], job_runs["runId"]) == (ws, None)
    assert (agent_api["leaseId"], agent_api["workspaceId"]) == (lease, None)
    for entry in (workspace_only, with_run, job_runs, agent_api):
        assert isinstance(entry["traceId"], str)
        assert len(entry["traceId"]) == 32
    assert current_log_context() == {}


async def test_path_segments_that_are_not_id_shaped_are_never_bound() -> None:
    overlong = "w" * 65

    entries = await _handler_log_lines(
        f"/api/v1/workspaces/{overlong}/runs/{'r' * 65}",
        "/api/v1/workspaces/ws%20%7B%22level%22%7D/runs/.hidden",
        "/api/v1/workspaces/ws%09forged/accounts",
        "/internal/agent/v1/leases/-lease/snapshot",
    )

    assert len(entries) == 4
    for entry in entries:
        assert (entry["workspaceId"], entry["runId"], entry["leaseId"]) == (None, None, None)
    # The contract's Id allows 64 characters: that still binds.
    [longest] = await _handler_log_lines(f"/api/v1/workspaces/{'w' * 64}/runs")
    assert longest["workspaceId"] == "w" * 64


async def test_missing_or_unsafe_trace_id_is_replaced_with_a_fresh_one() -> None:
    async with client(build_app()) as http:
        fresh = await http.post("/api/v1/echo", content=b"{}")
        unsafe = await http.post("/api/v1/echo", content=b"{}", headers={"X-Trace-Id": "bad id\twith spaces"})

    assert len(fresh.headers["x-trace-id"]) == 32
    assert fresh.json()["traceId"] == fresh.headers["x-trace-id"]
    assert unsafe.headers["x-trace-id"] != "bad id\twith spaces"
    assert len(unsafe.headers["x-trace-id"]) == 32


async def test_cors_allows_only_listed_origins() -> None:
    async with client(build_app(cors_origins=("https://ops.example.org/",))) as http:
        allowed = await http.options(
            "/api/v1/echo",
            headers={"Origin": "https://ops.example.org", "Access-Control-Request-Method": "POST"},
        )
        refused = await http.options(
            "/api/v1/echo",
            headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"},
        )

    assert allowed.headers["access-control-allow-origin"] == "https://ops.example.org"
    assert "access-control-allow-origin" not in refused.headers


async def test_a_refused_preflight_is_a_problem_naming_what_was_refused() -> None:
    async with client(build_app(cors_origins=("https://ops.example.org",))) as http:
        origin = await http.options(
            "/api/v1/echo",
            headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"},
        )
        header = await http.options(
            "/api/v1/echo",
            headers={
                "Origin": "https://ops.example.org",
                "Access-Control-Request-Method": "TRACE",
                "Access-Control-Request-Headers": "X-Not-Listed",
            },
        )

    # starlette answers these in text/plain ("Disallowed CORS origin").
    for refused in (origin, header):
        assert refused.status_code == 400
        assert refused.headers["content-type"] == "application/problem+json"
        assert refused.json()["code"] == "VALIDATION_FAILED"
        assert refused.json()["traceId"] == refused.headers["x-trace-id"]
    assert [e["field"] for e in origin.json()["errors"]] == ["Origin"]
    assert "access-control-allow-origin" not in origin.headers
    assert [e["field"] for e in header.json()["errors"]] == [
        "Access-Control-Request-Method",
        "Access-Control-Request-Headers",
    ]
    assert header.json()["detail"] == (
        "The cross-origin request was refused: Access-Control-Request-Method, Access-Control-Request-Headers."
    )


def test_empty_cors_allow_list_means_no_cors_middleware() -> None:
    assert cors_middleware_options([]) is None


@pytest.mark.parametrize(
    "origin", ["*", "https://*.example.org", "https://ops.example.org/path", "ftp://h", "h"]
)
def test_cors_origins_must_be_exact(origin: str) -> None:
    with pytest.raises(ValueError, match="exact scheme://host"):
        cors_middleware_options([origin])


@pytest.mark.parametrize(
    ("listed", "as_browsers_send_it"),
    [
        ("http://[::1]:3000", "http://[::1]:3000"),
        ("https://app.example.com:443", "https://app.example.com"),
        ("http://app.example.com:80/", "http://app.example.com"),
        ("HTTPS://App.Example.com:8443", "https://app.example.com:8443"),
    ],
)
def test_cors_origins_are_spelled_as_browsers_send_them(listed: str, as_browsers_send_it: str) -> None:
    options = cors_middleware_options([listed])

    assert options is not None
    assert options["allow_origins"] == [as_browsers_send_it]


def test_cors_options_do_not_allow_credentials() -> None:
    options = cors_middleware_options(["http://127.0.0.1:5173"])

    assert options is not None
    assert options["allow_origins"] == ["http://127.0.0.1:5173"]
    assert options["allow_credentials"] is False


async def streaming_echo(scope: Scope, receive: Receive, send: Send) -> None:
    """Starts its response before reading the body, so a limit hit later cannot become a 413."""
    await send({"type": "http.response.start", "status": 200, "headers": []})
    more = True
    while more:
        message = await receive()
        more = bool(message.get("more_body"))
        await send({"type": "http.response.body", "body": message.get("body", b""), "more_body": True})
    await send({"type": "http.response.body", "body": b"", "more_body": False})


async def test_limit_hit_after_the_response_started_aborts_the_exchange() -> None:
    app = BodySizeLimitMiddleware(streaming_echo, max_bytes=LIMIT)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://w") as http:
        within = await http.post("/stream", content=chunks(LIMIT))
        # The server can only abort the connection: the client must not see a truncated 200 as success.
        with pytest.raises(_PayloadTooLarge):
            await http.post("/stream", content=chunks(LIMIT * 2))

    assert within.status_code == 200
    assert within.content == b"x" * LIMIT


def test_problem_body_shape_is_stable() -> None:
    body = problem_body(
        status=413, code="PAYLOAD_TOO_LARGE", title="Payload too large", detail="d", trace_id="t"
    )

    assert json.loads(json.dumps(body)) == {
        "type": "https://wepush.example/errors/payload-too-large",
        "title": "Payload too large",
        "status": 413,
        "code": "PAYLOAD_TOO_LARGE",
        "detail": "d",
        "traceId": "t",
        "errors": [],
    }
