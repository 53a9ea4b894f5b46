"""Typed account and message configuration for the HTTP Provider.

Parsing runs in two passes: the packaged JSON Schema checks structure (every
violation is reported), then, on a structurally valid document, semantic checks
cover what a schema cannot
(URL parts, CIDRs, template syntax, JSONPath, forbidden headers, the address
policy for literal IP hosts). Issue paths are JSON pointers such as
``/auth/token`` so a form can point at the field.
"""

from __future__ import annotations

import enum
import ipaddress
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from urllib.parse import unquote

from yarl import URL

from wepush.agent.engine import is_sensitive_name
from wepush.agent.providers.common import (
    DEFAULT_SECRET_NAMESPACE,
    ConfigError,
    Draft202012,
    Template,
    duration_field,
    most_specific,
    parse_url,
    secret_ref,
    value_free_rule,
    violation_path,
)
from wepush.agent.providers.spi import ConfigDocument, SecretRef, ValidationIssue

from ._address_policy import AddressPolicy, IPNetwork, legacy_numeric_host
from ._json_path import JsonPath, JsonPathSyntaxError

__all__ = [
    "DEFAULT_SECRET_NAMESPACE",
    "AccountConfig",
    "AuthConfig",
    "AuthType",
    "ConfigError",
    "MessageConfig",
    "SuccessCondition",
    "parse_account",
    "parse_message",
]

_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}")
# A request's framing and target are the client's business; letting configuration
# set them would allow request smuggling or a second Host.
_FORBIDDEN_HEADERS = frozenset({"host", "content-length", "transfer-encoding", "connection", "upgrade", "te"})


class AuthType(enum.StrEnum):
    NONE = "NONE"
    BEARER = "BEARER"
    BASIC = "BASIC"
    HEADER = "HEADER"
    QUERY = "QUERY"


@dataclass(frozen=True, slots=True)
class AuthConfig:
    type: AuthType = AuthType.NONE
    token: SecretRef | None = None
    username: str | None = None
    password: SecretRef | None = None
    header_name: str | None = None
    parameter_name: str | None = None
    value: SecretRef | None = None

    def secret_refs(self) -> tuple[SecretRef, ...]:
        return tuple(ref for ref in (self.token, self.password, self.value) if ref is not None)


@dataclass(frozen=True, slots=True)
class AccountConfig:
    base_url: URL
    default_headers: tuple[tuple[str, str], ...]
    auth: AuthConfig
    connect_timeout: timedelta
    request_timeout: timedelta
    allow_redirects: bool
    max_redirects: int
    allowed_networks: tuple[IPNetwork, ...]
    tls_verify: bool

    def address_policy(self, *, allow_loopback: bool) -> AddressPolicy:
        return AddressPolicy(self.allowed_networks, allow_loopback=allow_loopback)


@dataclass(frozen=True, slots=True)
class SuccessCondition:
    """``statuses=None`` means any 2xx. Without ``expected`` the value must exist and not be false/null."""

    statuses: frozenset[int] | None = None
    json_path: JsonPath | None = None
    has_expected: bool = False
    expected: object = None

    def status_ok(self, status: int) -> bool:
        return 200 <= status < 300 if self.statuses is None else status in self.statuses


@dataclass(frozen=True, slots=True)
class MessageConfig:
    method: str
    path: Template
    headers: tuple[tuple[str, Template], ...]
    query: tuple[tuple[str, Template], ...]
    body: Template | None
    content_type: str | None
    success: SuccessCondition
    save_response_body: bool
    response_body_max_bytes: int
    external_request_id_header: str

    @property
    def variables(self) -> frozenset[str]:
        names: set[str] = set(self.path.variables)
        for _, template in (*self.headers, *self.query):
            names.update(template.variables)
        if self.body is not None:
            names.update(self.body.variables)
        return frozenset(names)


def _issue(path: str, code: str, message: str) -> ValidationIssue:
    return ValidationIssue(path, code, message)


def _pointer(parts: Any) -> str:
    return "".join(f"/{str(p).replace('~', '~0').replace('/', '~1')}" for p in parts)


def _load(document: ConfigDocument, schema: Mapping[str, Any]) -> tuple[Any, list[ValidationIssue]]:
    try:
        raw = document.json()
    except (ValueError, UnicodeDecodeError) as exc:
        return None, [_issue("", "NOT_JSON", f"configuration is not a JSON document: {type(exc).__name__}")]
    validator = Draft202012(dict(schema))
    issues = [
        # Worded without the value: a secret pasted into the wrong field must not come back.
        _issue(_pointer(violation_path(err)), f"SCHEMA_{str(err.validator).upper()}", value_free_rule(err))
        for err in sorted(
            map(most_specific, validator.iter_errors(raw)), key=lambda e: list(map(str, e.absolute_path))
        )
    ]
    return raw, issues


def _parameter_names(url: URL) -> Iterator[str]:
    """The names a vendor's server may read as parameters of ``url``: the query's, split on ``;`` as well
    as ``&`` (servers that follow the old HTML advice take both), and the ``;name=value`` parameters of a
    path segment (Java servlets read ``;jsessionid`` there)."""
    for part in re.split(r"[&;]", url.raw_query_string):
        yield unquote(part.split("=", 1)[0])
    for segment in url.raw_path.split("/"):
        for parameter in segment.split(";")[1:]:
            yield unquote(parameter.split("=", 1)[0])


def _path_parameter_names(path: str) -> Iterator[str]:
    """:func:`_parameter_names` of a message's fixed path text (placeholders left out)."""
    try:
        url = URL("http://path.invalid/" + path.lstrip("/"))
    except ValueError:
        return iter(())
    return _parameter_names(url)


def _base_url(text: str, policy: AddressPolicy, issues: list[ValidationIssue]) -> URL:
    try:
        url = parse_url(text)
    except ValueError:
        issues.append(_issue("/baseUrl", "INVALID_URL", "is not a valid URL"))
        return URL("http://invalid.invalid")
    if url.scheme not in {"http", "https"}:
        issues.append(_issue("/baseUrl", "SCHEME_NOT_ALLOWED", "only http and https are supported"))
    if not url.host:
        issues.append(_issue("/baseUrl", "HOST_MISSING", "must name a host"))
    if url.user is not None or url.password is not None:
        issues.append(
            _issue("/baseUrl", "CREDENTIALS_IN_URL", "credentials belong in auth with secret references")
        )
    if url.fragment:
        issues.append(_issue("/baseUrl", "FRAGMENT_NOT_ALLOWED", "must not contain a fragment"))
    if any(is_sensitive_name(name) for name in _parameter_names(url)):
        # baseUrl is plain configuration every VIEWER reads; a vendor that takes its key in the query
        # string gets it from auth type QUERY, sealed as a secret.
        issues.append(
            _issue(
                "/baseUrl",
                "CREDENTIALS_IN_URL",
                "carries a credential in its query string or path parameters: use auth (type QUERY) and a "
                "secret reference",
            )
        )
    if url.host and legacy_numeric_host(url.host):
        issues.append(
            _issue("/baseUrl", "ADDRESS_REFUSED", "destination address refused: non-canonical numeric host")
        )
    elif url.host:
        try:
            literal = ipaddress.ip_address(url.host)
        except ValueError:
            literal = None
        if literal is not None:
            reason = policy.refusal_reason(literal)
            if reason is not None:
                issues.append(_issue("/baseUrl", "ADDRESS_REFUSED", f"destination address refused: {reason}"))
    return url


def parse_account(
    document: ConfigDocument, schema: Mapping[str, Any], *, allow_loopback: bool = False
) -> AccountConfig:
    """Parse or raise :class:`ConfigError` listing every issue."""
    raw, issues = _load(document, schema)
    if not isinstance(raw, dict) or issues:
        raise ConfigError(issues or [_issue("", "NOT_OBJECT", "must be a JSON object")])
    networks: list[IPNetwork] = []
    for index, cidr in enumerate(raw.get("allowedCidrs", [])):
        try:
            networks.append(ipaddress.ip_network(cidr, strict=True))
        except ValueError:
            issues.append(
                _issue(f"/allowedCidrs/{index}", "INVALID_CIDR", "is not a CIDR such as 10.0.0.0/8")
            )
    policy = AddressPolicy(tuple(networks), allow_loopback=allow_loopback)
    base_url = _base_url(raw["baseUrl"], policy, issues)
    auth_raw = raw.get("auth", {"type": "NONE"})
    auth = AuthConfig(
        type=AuthType(auth_raw["type"]),
        token=secret_ref(auth_raw.get("token")),
        username=auth_raw.get("username"),
        password=secret_ref(auth_raw.get("password")),
        header_name=auth_raw.get("headerName"),
        parameter_name=auth_raw.get("parameterName"),
        value=secret_ref(auth_raw.get("value")),
    )
    if auth.type is AuthType.BASIC and auth.username is not None and ":" in auth.username:
        issues.append(_issue("/auth/username", "INVALID_USERNAME", "must not contain ':'"))
    if auth.header_name is not None and auth.header_name.lower() in _FORBIDDEN_HEADERS:
        issues.append(_issue("/auth/headerName", "HEADER_FORBIDDEN", "cannot carry credentials"))
    headers = tuple((str(k), str(v)) for k, v in raw.get("defaultHeaders", {}).items())
    _check_headers(headers, "/defaultHeaders", issues)
    _refuse_plain_credentials((name for name, _ in headers), "/defaultHeaders", "HEADER", issues)
    account = AccountConfig(
        base_url=base_url,
        default_headers=headers,
        auth=auth,
        connect_timeout=duration_field(raw, "connectTimeout", "PT5S", issues),
        request_timeout=duration_field(raw, "requestTimeout", "PT30S", issues),
        allow_redirects=bool(raw.get("allowRedirects", False)),
        max_redirects=int(raw.get("maxRedirects", 3)),
        allowed_networks=tuple(networks),
        tls_verify=bool(raw.get("tlsVerify", True)),
    )
    if issues:
        raise ConfigError(issues)
    return account


def _refuse_plain_credentials(
    names: Iterable[str], where: str, place: str, issues: list[ValidationIssue]
) -> None:
    """Configuration is plain text every VIEWER reads: a value under a credential's name is refused.

    ``place`` is HEADER or QUERY, the auth type that carries such a value sealed as a secret.
    """
    for name in names:
        if (place != "HEADER" or _HEADER_NAME.fullmatch(name)) and is_sensitive_name(name):
            issues.append(
                _issue(
                    f"{where}/{name}",
                    f"CREDENTIALS_IN_{place}",
                    f"carries a credential: use the account's auth (type {place} with this name) "
                    "and a secret reference",
                )
            )


def _check_headers(headers: tuple[tuple[str, str], ...], where: str, issues: list[ValidationIssue]) -> None:
    for name, value in headers:
        path = f"{where}/{name}"
        if not _HEADER_NAME.fullmatch(name):
            issues.append(_issue(path, "INVALID_HEADER_NAME", "is not a valid HTTP header name"))
        elif name.lower() in _FORBIDDEN_HEADERS:
            issues.append(_issue(path, "HEADER_FORBIDDEN", "is set by the client and cannot be configured"))
        if any(ch in value for ch in "\r\n\x00"):
            issues.append(_issue(path, "INVALID_HEADER_VALUE", "must not contain line breaks"))


def _success(raw: Mapping[str, Any], issues: list[ValidationIssue]) -> SuccessCondition:
    statuses = raw.get("status")
    json_path: JsonPath | None = None
    if "jsonPath" in raw:
        try:
            json_path = JsonPath.parse(raw["jsonPath"])
        except JsonPathSyntaxError as exc:
            issues.append(_issue("/successCondition/jsonPath", "JSONPATH_INVALID", str(exc)))
    return SuccessCondition(
        statuses=None if statuses is None else frozenset(int(s) for s in statuses),
        json_path=json_path,
        has_expected="equals" in raw,
        expected=raw.get("equals"),
    )


def parse_message(document: ConfigDocument, schema: Mapping[str, Any]) -> MessageConfig:
    """Parse or raise :class:`ConfigError` listing every issue."""
    raw, issues = _load(document, schema)
    if not isinstance(raw, dict) or issues:
        raise ConfigError(issues or [_issue("", "NOT_OBJECT", "must be a JSON object")])
    header_pairs = tuple((str(k), str(v)) for k, v in raw.get("headers", {}).items())
    _check_headers(header_pairs, "/headers", issues)
    headers = tuple(
        (name, Template.checked(value, f"/headers/{name}", issues)) for name, value in header_pairs
    )
    query = tuple(
        (str(k), Template.checked(str(v), f"/query/{k}", issues)) for k, v in raw.get("query", {}).items()
    )
    # A fixed value is part of the message's plain content; one rendered from the Recipient is not.
    _refuse_plain_credentials((n for n, t in headers if t.is_constant), "/headers", "HEADER", issues)
    _refuse_plain_credentials((n for n, t in query if t.is_constant), "/query", "QUERY", issues)
    path = Template.checked(raw.get("path", ""), "/path", issues)
    fixed_path = "".join(path.literals)
    if any(segment in {".", ".."} for segment in fixed_path.split("/")):
        issues.append(_issue("/path", "DOT_SEGMENT", "must not contain '.' or '..' segments"))
    if any(is_sensitive_name(name) for name in _path_parameter_names(fixed_path)):
        # The path is plain message content every VIEWER reads, like the query: ``/n;access_token=…``.
        issues.append(
            _issue(
                "/path",
                "CREDENTIALS_IN_URL",
                "carries a credential in its parameters: use the account's auth (type QUERY) and a secret "
                "reference",
            )
        )
    content_type = next((v for k, v in header_pairs if k.lower() == "content-type"), None)
    if content_type is not None and "{{" in content_type:
        issues.append(_issue("/headers/Content-Type", "TEMPLATE_NOT_ALLOWED", "must be a fixed value"))
    body_source = raw.get("bodyTemplate")
    body = None if body_source is None else Template.checked(body_source, "/bodyTemplate", issues)
    method = str(raw.get("method", "POST"))
    if body is not None and method == "GET":
        issues.append(_issue("/bodyTemplate", "BODY_NOT_ALLOWED", "a GET request carries no body"))
    message = MessageConfig(
        method=method,
        path=path,
        headers=headers,
        query=query,
        body=body,
        content_type=content_type,
        success=_success(raw.get("successCondition", {}), issues),
        save_response_body=bool(raw.get("saveResponseBody", False)),
        response_body_max_bytes=int(raw.get("responseBodyMaxBytes", 65536)),
        external_request_id_header=str(raw.get("externalRequestIdHeader", "X-Request-Id")),
    )
    if issues:
        raise ConfigError(issues)
    return message
