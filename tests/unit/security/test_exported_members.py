"""Pins the public surface the application wiring relies on; private modules stay private."""

from __future__ import annotations

import importlib

import pytest

PUBLIC_API = {
    "wepush.server.domain.secrets": {
        "SECRET_ALGORITHM",
        "MasterKeyError",
        "SealedSecret",
        "SecretDecryptionError",
        "SecretScrubber",
        "SecretStore",
        "SecretStoreError",
        "sealed_secret_of",
        "secret_record_of",
    },
    "wepush.server.infra.secrets": {
        "MASTER_KEY_ENV",
        "LocalEnvelopeSecretStore",
        "MasterKeyError",
        "MasterKeyRing",
        "SecretDecryptionError",
        "SecretStoreError",
        "secret_aad",
    },
    "wepush.server.application.credentials": {
        "CredentialRejected",
        "CredentialState",
        "TokenHasher",
        "TokenIssued",
        "TokenKind",
        "TokenMalformed",
        "credential_state",
        "ensure_credential_usable",
        "parse_token",
        "split_authorization",
    },
    "wepush.server.application.paging": {
        "DEFAULT_PAGE_LIMIT",
        "MAX_PAGE_LIMIT",
        "CursorCodec",
        "CursorInvalid",
        "KeysetValue",
        "Page",
        "PageLimitInvalid",
        "validate_limit",
    },
    "wepush.server.application.idempotency": {
        "IdempotencyConflict",
        "IdempotencyKeyInvalid",
        "IdempotencyRecordView",
        "Proceed",
        "Replay",
        "decide_idempotency",
        "key_hash",
        "request_fingerprint",
        "validate_idempotency_key",
    },
    "wepush.server.infra.logging": {
        "LOG_CONTEXT_FIELDS",
        "MASK",
        "JsonFormatter",
        "LogContextBinding",
        "Redactor",
        "TextFormatter",
        "bind_log_context",
        "configure_logging",
        "current_log_context",
        "current_trace_id",
        "get_redactor",
        "is_sensitive_name",
    },
    "wepush.server.api.middleware": {
        "DEFAULT_CONTENT_SECURITY_POLICY",
        "DEFAULT_MAX_BODY_BYTES",
        "DOCS_CONTENT_SECURITY_POLICY",
        "PROBLEM_CONTENT_TYPE",
        "TRACE_ID_HEADER",
        "UNMATCHED_OPERATION",
        "BodyLimitOverride",
        "BodySizeLimitMiddleware",
        "ChunkedBodyMiddleware",
        "MediaTypeMiddleware",
        "CorsOptions",
        "HttpMetricsMiddleware",
        "ProblemCorsMiddleware",
        "RelativeRedirectMiddleware",
        "SecurityHeadersMiddleware",
        "TraceIdMiddleware",
        "cors_middleware_options",
        "problem_body",
        "security_headers",
        "send_problem",
    },
}


@pytest.mark.parametrize("module_name", sorted(PUBLIC_API))
def test_public_names_are_exactly_the_curated_ones(module_name: str) -> None:
    module = importlib.import_module(module_name)

    assert set(module.__all__) == PUBLIC_API[module_name]
    for name in module.__all__:
        assert getattr(module, name) is not None


def test_one_redactor_is_shared_process_wide() -> None:
    from wepush.server.infra.logging import get_redactor

    assert get_redactor() is get_redactor()
