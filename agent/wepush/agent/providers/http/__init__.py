"""The ``wepush.http`` provider: one templated HTTP(S) request per Recipient.

Sending runs on aiohttp with one connection pool per Run. Every connection goes
through an address policy that refuses loopback, private, link-local, CGNAT,
unique-local, multicast and cloud metadata destinations (see
:class:`AddressPolicy`); ``allowedCidrs`` re-opens intranet ranges per account.
"""

from __future__ import annotations

from wepush.agent.providers.common import Template, TemplateSyntaxError, UnknownVariableError

from ._address_policy import AddressPolicy, AddressRefusedError
from ._errors import HTTP_ERROR_TABLE, STATUS_TABLE, ErrorMapping, map_status, parse_retry_after
from ._escaping import Escaping
from ._factory import HttpProviderFactory
from ._json_path import JsonPath, JsonPathSyntaxError
from ._resolver import VettingResolver
from ._session import HttpProviderSession

__all__ = [
    "HTTP_ERROR_TABLE",
    "STATUS_TABLE",
    "AddressPolicy",
    "AddressRefusedError",
    "ErrorMapping",
    "Escaping",
    "HttpProviderFactory",
    "HttpProviderSession",
    "JsonPath",
    "JsonPathSyntaxError",
    "Template",
    "TemplateSyntaxError",
    "UnknownVariableError",
    "VettingResolver",
    "map_status",
    "parse_retry_after",
]
