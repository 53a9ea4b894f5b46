"""Turning a message configuration and one Recipient into a concrete HTTP request.

The URL is always ``<baseUrl origin><baseUrl path><message path>``: the origin
comes from the account alone, and placeholder values in the path are encoded as
single segments, so no Recipient value can change the host, port or scheme.
Everything that does not depend on the Recipient is computed once per session.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from multidict import CIMultiDict, CIMultiDictProxy
from yarl import URL

from wepush.agent.engine import BinaryRefValue, RecipientValue
from wepush.agent.providers.common import Template

from ._config import AccountConfig, MessageConfig
from ._escaping import Escaping, escaping_for_content_type

__all__ = ["RecipientFields", "RecipientValueError", "RenderedRequest", "RequestRenderer"]


class RecipientValueError(ValueError):
    """A Recipient value cannot be placed where the template puts it."""

    def __init__(self, field: str, reason: str, *, subject: str | None = None) -> None:
        # ``subject`` names what the message would say when it is not the recipient field itself.
        super().__init__(f"{subject or f'recipient field {field!r}'} {reason}")
        self.field = field


class RecipientFields(Mapping[str, object]):
    """Read-only view of Recipient fields as plain scalars, without copying them."""

    __slots__ = ("_fields",)

    def __init__(self, fields: Mapping[str, RecipientValue]) -> None:
        self._fields = fields

    def __getitem__(self, name: str) -> object:
        value = self._fields[name]
        if isinstance(value, BinaryRefValue):
            raise RecipientValueError(name, "is a binary reference and cannot be rendered as text")
        return value.value

    def __iter__(self) -> Iterator[str]:
        return iter(self._fields)

    def __len__(self) -> int:
        return len(self._fields)


@dataclass(frozen=True, slots=True)
class RenderedRequest:
    """A request ready to send. ``headers`` may be shared between requests: copy before changing."""

    method: str
    url: URL
    headers: CIMultiDictProxy[str]
    body: bytes | None


def _render_checked(
    template: Template, fields: Mapping[str, object], escaping: Escaping, name: str, place: str
) -> str:
    """``name`` is the header or query parameter the template fills (``place`` says which)."""
    text = template.render(fields, escaping)
    if escaping is Escaping.RAW and any(ch in text for ch in "\r\n\x00"):
        raise RecipientValueError(
            name, "a line break or NUL from the recipient's values", subject=f"{place} {name!r} would get"
        )
    return text


class RequestRenderer:
    """Renders requests for one (account, message) pair.

    ``credentials`` are the authentication headers; they are merged last (they
    win over configured headers) and left out when rendering for a preview.
    ``credential_query`` is the same for a query-string credential: appended
    last, after the configured and rendered parameters.
    """

    def __init__(
        self,
        account: AccountConfig,
        message: MessageConfig,
        credentials: Mapping[str, str] | None = None,
        credential_query: Mapping[str, str] | None = None,
    ) -> None:
        base = account.base_url
        self._method = message.method
        self._origin = str(base.origin())
        self._base_path = base.raw_path.rstrip("/")
        self._base_query = tuple(base.query.items())
        self._path = message.path
        self._query = message.query
        self._body = message.body
        headers: CIMultiDict[str] = CIMultiDict(account.default_headers)
        constant_headers = [(n, t) for n, t in message.headers if t.is_constant]
        for name, template in constant_headers:
            headers[name] = template.literals[0]
        self.content_type = headers.get("Content-Type")
        self._plain_headers = CIMultiDictProxy(headers)
        sending = headers.copy()
        sending.update(credentials or {})
        # Built once: without per-Recipient headers every request shares this mapping.
        self._sending_headers = CIMultiDictProxy(sending)
        self._credentials = tuple((credentials or {}).items())
        self._dynamic_headers = tuple((n, t) for n, t in message.headers if not t.is_constant)
        self._body_escaping = escaping_for_content_type(self.content_type)
        self._credential_query = tuple((credential_query or {}).items())
        self._constant_urls: tuple[URL, URL] | None = None
        if self._path.is_constant and all(t.is_constant for _, t in self._query):
            path = self._path.literals[0]
            self._constant_urls = (self._build_url(path, {}, False), self._build_url(path, {}, True))
        self._constant_body: bytes | None = None
        if self._body is not None and self._body.is_constant:
            self._constant_body = self._body.literals[0].encode("utf-8")

    @property
    def origin(self) -> str:
        return self._origin

    def _build_url(self, path: str, query: dict[str, str], credentials: bool) -> URL:
        # encoded=True keeps the segment encoding of rendered values exactly as made.
        url = URL(f"{self._origin}{self._base_path}{path}", encoded=True)
        params = [*self._base_query, *((n, t.literals[0]) for n, t in self._query if t.is_constant)]
        params.extend(query.items())
        if credentials:
            params.extend(self._credential_query)
        return url.with_query(params) if params else url

    def render(self, fields: Mapping[str, object], *, credentials: bool = True) -> RenderedRequest:
        """Render for one Recipient; raises ``UnknownVariableError`` or :class:`RecipientValueError`."""
        if self._constant_urls is not None:
            url = self._constant_urls[credentials]
        else:
            path = (
                self._path.render(fields, Escaping.PATH_SEGMENT)
                if not self._path.is_constant
                else (self._path.literals[0])
            )
            dynamic_query = {
                name: _render_checked(t, fields, Escaping.RAW, name, "query parameter")
                for name, t in self._query
                if not t.is_constant
            }
            url = self._build_url(path, dynamic_query, credentials)
        headers = self._sending_headers if credentials else self._plain_headers
        if self._dynamic_headers:
            dynamic = headers.copy()
            for name, template in self._dynamic_headers:
                dynamic[name] = _render_checked(template, fields, Escaping.RAW, name, "header")
            if credentials:
                dynamic.update(self._credentials)
            headers = CIMultiDictProxy(dynamic)
        if self._constant_body is not None:
            body: bytes | None = self._constant_body
        elif self._body is not None:
            body = self._body.render(fields, self._body_escaping).encode("utf-8")
        else:
            body = None
        return RenderedRequest(self._method, url, headers, body)
