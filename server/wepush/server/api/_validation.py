"""Request validation that never echoes submitted values.

Connexion's stock validators put ``jsonschema``'s message into the problem detail and its log, and
those messages quote the offending *value* — for an account that can be a secret — and, for parameters,
the whole schema as well. These validators report the field (a body path, or the parameter's name) and
the rule that failed, never the instance, and answer undecodable bodies with 400 instead of letting the
decode error escape as a 500.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncGenerator
from typing import Any

from connexion.datastructures import MediaTypeDict
from connexion.exceptions import BadRequestProblem
from connexion.lifecycle import ConnexionRequest
from connexion.utils import is_null, is_nullable
from connexion.validators import (
    VALIDATOR_MAP,
    AbstractResponseBodyValidator,
    FormDataValidator,
    JSONRequestBodyValidator,
    JSONResponseBodyValidator,
    MultiPartFormDataValidator,
    ParameterValidator,
    TextResponseBodyValidator,
)
from jsonschema import Draft4Validator, ValidationError
from starlette.types import Scope, Send

_log = logging.getLogger("wepush.server.api")
_MAX_DETAIL = 1000
_MAX_NAME = 64
#: Messages of these rules name schema facts or property names only, never a submitted value.
_SAFE_MESSAGES = frozenset({"required", "additionalProperties", "minProperties", "maxProperties"})


def _path(error: ValidationError) -> str:
    return "/" + "/".join(str(part) for part in error.absolute_path) if error.absolute_path else "/"


def describe(error: ValidationError) -> str:
    """A value-free description of one schema violation in a request body."""
    return f"{_path(error)}: {_rule(error)}"[:_MAX_DETAIL]


def _rule(error: ValidationError) -> str:
    """The rule that failed, in words that never quote the instance."""
    if error.validator in _SAFE_MESSAGES:
        return str(error.message)
    rule = str(error.validator)
    constraint = error.validator_value
    if rule in {"oneOf", "anyOf", "allOf", "not", "properties", "items", "discriminator"}:
        return f"does not match the expected shape ({rule})"
    if rule == "enum" and isinstance(constraint, list | tuple):
        return f"must be one of {list(constraint)[:20]}"
    if rule == "pattern":
        return "does not match the required pattern"
    return f"must satisfy {rule}={json.dumps(constraint, default=str)[:200]}"


def _parameter(kind: str, name: str) -> str:
    # Quoted: the problem handler takes the first quoted name as the field of the error entry.
    return f"{kind} parameter '{name[:_MAX_NAME]}'"


class SafeParameterValidator(ParameterValidator):  # type: ignore[misc]
    """Path, query and header parameters checked like connexion's validator, reported by name and
    rule (``query parameter 'limit': must satisfy minimum=1``) instead of jsonschema's text, which
    quotes the value and dumps the parameter's schema."""

    @staticmethod
    def validate_parameter(
        parameter_type: str, value: Any, param: dict[str, Any], param_name: str | None = None
    ) -> str | None:
        name = str(param_name or param.get("name", ""))
        if is_nullable(param) and is_null(value):
            return None
        if value is None:
            return f"{_parameter(parameter_type, name)}: is required" if param.get("required") else None
        schema = param.get("schema", param)
        try:
            Draft4Validator(schema, format_checker=Draft4Validator.FORMAT_CHECKER).validate(value)
        except ValidationError as error:
            item = f" item {error.absolute_path[0]}" if error.absolute_path else ""
            return f"{_parameter(parameter_type, name)}{item}: {_rule(error)}"[:_MAX_DETAIL]
        return None

    def validate_request(self, request: ConnexionRequest) -> None:
        if self.strict_validation:
            extra = self.validate_query_parameter_list(request, security_params=self.security_query_params)
            if extra:
                names = ", ".join(f"'{name[:_MAX_NAME]}'" for name in sorted(extra)[:10])
                which = f"query parameters {names} are" if len(extra) > 1 else f"query parameter {names} is"
                raise BadRequestProblem(detail=f"{which} not defined for this operation")
        super().validate_request(request)


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
    """Connexion's validators with the JSON body and parameter validators replaced and streamed media
    passed through."""
    mapping = dict(VALIDATOR_MAP)
    mapping["parameter"] = SafeParameterValidator
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
