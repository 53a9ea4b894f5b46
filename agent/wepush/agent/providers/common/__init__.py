"""Building blocks that more than one channel provider family shares.

The ``{{variable}}`` template language (one implementation, so every channel
fills Recipient fields the same way and refuses the same expressions) and the
configuration rules every channel follows (secret references, durations, schema
violations worded without the value), the aiohttp rules every HTTP channel
follows (bounded response bodies, timeouts cut short by the item's deadline,
``Retry-After`` read without ever raising), binding a send to the Run's
cancellation token and the shape of a preview that could not render. Like a
provider it depends only on the Provider SPI and the engine's core types, and it
never imports a concrete provider.
"""

from __future__ import annotations

from ._cancel import await_cancellable
from ._config import DEFAULT_SECRET_NAMESPACE, ConfigError, duration_field, parse_url, secret_ref
from ._preview import failed_preview
from ._retry_after import parse_retry_after
from ._schema_rules import Draft202012, most_specific, value_free_rule, violation_path, with_ecma_pattern
from ._template import RenderProblem, Template, TemplateSyntaxError, UnknownVariableError, scalar_text
from ._transport import RequestTimeouts, connect_timeout_for, read_capped, while_connecting

__all__ = [
    "DEFAULT_SECRET_NAMESPACE",
    "ConfigError",
    "Draft202012",
    "RenderProblem",
    "RequestTimeouts",
    "Template",
    "TemplateSyntaxError",
    "UnknownVariableError",
    "await_cancellable",
    "connect_timeout_for",
    "duration_field",
    "failed_preview",
    "most_specific",
    "parse_retry_after",
    "parse_url",
    "read_capped",
    "scalar_text",
    "secret_ref",
    "value_free_rule",
    "violation_path",
    "while_connecting",
    "with_ecma_pattern",
]
