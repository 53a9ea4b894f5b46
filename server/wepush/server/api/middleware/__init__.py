"""Bare ASGI middlewares for HTTP hardening: body limits, chunked bodies, security headers, trace ids,
CORS options."""

from __future__ import annotations

from wepush.server.api.middleware._body_limit import (
    DEFAULT_MAX_BODY_BYTES,
    BodyLimitOverride,
    BodySizeLimitMiddleware,
)
from wepush.server.api.middleware._chunked_body import ChunkedBodyMiddleware
from wepush.server.api.middleware._cors import CorsOptions, ProblemCorsMiddleware, cors_middleware_options
from wepush.server.api.middleware._http_metrics import UNMATCHED_OPERATION, HttpMetricsMiddleware
from wepush.server.api.middleware._media_type import MediaTypeMiddleware
from wepush.server.api.middleware._problem import PROBLEM_CONTENT_TYPE, problem_body, send_problem
from wepush.server.api.middleware._redirects import RelativeRedirectMiddleware
from wepush.server.api.middleware._security_headers import (
    DEFAULT_CONTENT_SECURITY_POLICY,
    DOCS_CONTENT_SECURITY_POLICY,
    SecurityHeadersMiddleware,
    security_headers,
)
from wepush.server.api.middleware._trace import TRACE_ID_HEADER, TraceIdMiddleware

__all__ = [
    "DEFAULT_CONTENT_SECURITY_POLICY",
    "DEFAULT_MAX_BODY_BYTES",
    "DOCS_CONTENT_SECURITY_POLICY",
    "PROBLEM_CONTENT_TYPE",
    "TRACE_ID_HEADER",
    "UNMATCHED_OPERATION",
    "BodyLimitOverride",
    "BodySizeLimitMiddleware",
    "ChunkedBodyMiddleware",
    "CorsOptions",
    "HttpMetricsMiddleware",
    "MediaTypeMiddleware",
    "ProblemCorsMiddleware",
    "RelativeRedirectMiddleware",
    "SecurityHeadersMiddleware",
    "TraceIdMiddleware",
    "cors_middleware_options",
    "problem_body",
    "security_headers",
    "send_problem",
]
