"""Request-body validation that never echoes submitted values.

Connexion's stock JSON validator puts ``jsonschema``'s message into the problem detail and its log, and
those messages quote the offending *value* — for an account that can be a secret. This validator reports
the field path and the rule that failed, never the instance, and answers undecodable bodies with 400
instead of letting the decode error escape as a 500.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncGenerator
from typing import Any

from connexion.datastructures import MediaTypeDict
from connexion.exceptions import BadRequestProblem
from connexion.validators import (
    VALIDATOR_MAP,
    AbstractResponseBodyValidator,
    FormDataValidator,
    JSONRequestBodyValidator,
    JSONResponseBodyValidator,
    MultiPartFormDataValidator,
    TextResponseBodyValidator,
)
from jsonschema import ValidationError
from starlette.types import Scope, Send

_log = logging.getLogger("wepush.server.api")
_MAX_DETAIL = 1000
#: Messages of these rules name schema facts or property names only, never a submitted value.
_SAFE_MESSAGES = frozenset({"required", "additionalProperties", "minProperties", "maxProperties"})


def _path(error: ValidationError) -> str:
    return "/" + "/".join(str(part) for part in error.absolute_path) if error.absolute_path else "/"


def describe(error: ValidationError) -> str:
    """A value-free description of one schema violation."""
    where = _path(error)
    if error.validator in _SAFE_MESSAGES:
        return f"{where}: {error.message}"[:_MAX_DETAIL]
    rule = str(error.validator)
    constraint = error.validator_value
    if rule in {"oneOf", "anyOf", "allOf", "not", "properties", "items", "discriminator"}:
        return f"{where}: does not match the expected shape ({rule})"
    if rule == "enum" and isinstance(constraint, list | tuple):
        return f"{where}: must be one of {list(constraint)[:20]}"[:_MAX_DETAIL]
    if rule == "pattern":
        return f"{where}: does not match the required pattern"
    return f"{where}: must satisfy {rule}={json.dumps(constraint, default=str)[:200]}"


class SafeJSONRequestBodyValidator(JSONRequestBodyValidator):  # type: ignore[misc]
    async def _parse(self, stream: AsyncGenerator[bytes, None], scope: Scope) -> Any:
        raw = b"".join([chunk async for chunk in stream])
        try:
            text = raw.decode(self._encoding)
        except (UnicodeDecodeError, LookupError):
            raise BadRequestProblem(detail="/: the request body is not valid UTF-8 text") from None
        if not text:
            return None
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            # Position only: the message of JSONDecodeError never includes the document.
            raise BadRequestProblem(
                detail=f"/: malformed JSON at line {exc.lineno} column {exc.colno}"
            ) from None

    def _validate(self, body: Any) -> dict[str, Any] | None:
        if not self._nullable and body is None:
            raise BadRequestProblem(detail="/: the request body must not be empty")
        try:
            validated: dict[str, Any] | None = self._validator.validate(body)
            return validated
        except ValidationError as error:
            detail = describe(error)
            _log.info("request body rejected: %s", detail)
            raise BadRequestProblem(detail=detail) from None


class StreamedResponse(AbstractResponseBodyValidator):  # type: ignore[misc]
    """JSON Lines downloads and event streams are not one JSON document: pass them through unbuffered.

    (Connexion's ``*/*json`` rule would otherwise buffer a whole ``application/x-ndjson`` artifact and
    then fail to parse it as a single document.)"""

    def wrap_send(self, send: Send) -> Send:
        return send


def validator_map() -> dict[str, Any]:
    """Connexion's validators with the JSON body validator replaced and streamed media passed through."""
    mapping = dict(VALIDATOR_MAP)
    mapping["response"] = MediaTypeDict(
        {
            "application/x-ndjson": StreamedResponse,
            "text/event-stream": StreamedResponse,
            "*/*json": JSONResponseBodyValidator,
            "text/plain": TextResponseBodyValidator,
        }
    )
    mapping["body"] = MediaTypeDict(
        {
            "*/*json": SafeJSONRequestBodyValidator,
            "application/x-www-form-urlencoded": FormDataValidator,
            "multipart/form-data": MultiPartFormDataValidator,
        }
    )
    return mapping
