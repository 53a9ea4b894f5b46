"""Client-side checks of request bodies and arguments, reported as :class:`InvalidRequest`.

The generated client validates with pydantic, whose errors quote the submitted value (an account secret,
a recipient's data) and are no :class:`WePushError`. Everything here turns them into ``InvalidRequest``
naming the location and the rule only, with the Service's code and words for it (:mod:`._wording`), and
raises it outside the ``except`` block so the original error is not even kept as ``__context__`` for a
traceback printer or error tracker to show.

A body is checked as the Service checks it: its top-level ``name`` is put in Unicode normal form C
first, so a name is measured as the Service measures (and stores) it.

A body given as a mapping is also checked for keys the model does not know: the generated ``from_dict``
keeps only the keys it knows, so a misspelt optional field would otherwise be dropped without a word
(and the Service, which refuses unknown fields, never gets the chance to say so).
"""

from __future__ import annotations

import inspect
import types
import typing
import unicodedata
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar, cast

from pydantic import BaseModel, ValidationError

from ._errors import FieldError, InvalidRequest, InvalidResponse, WePushError
from ._wording import INVALID, rule

__all__ = ["build", "check_body", "guarded", "guarded_deserializer"]

T = TypeVar("T")

#: pydantic's error ``loc`` parts, as the JSON pointer's reference tokens.
Location = Sequence[str | int]


def _escape(token: str | int) -> str:
    return str(token).replace("~", "~0").replace("/", "~1")


def pointer(location: Location, prefix: str = "") -> str:
    """The RFC 6901 JSON pointer of ``location`` below ``prefix`` (``""`` is the whole document)."""
    return prefix + "".join("/" + _escape(token) for token in location)


def _errors_of(exc: ValidationError) -> list[dict[str, Any]]:
    return [dict(e) for e in exc.errors(include_input=False, include_url=False, include_context=True)]


def _field_errors(exc: ValidationError, prefix: str, given: Any = None) -> list[FieldError]:
    errors = []
    for error in _errors_of(exc):
        if given is not None and not _present(given, error["loc"]):
            # The generated from_dict passes an absent key on as None, which pydantic calls a type error.
            error["type"] = "missing"
        errors.append(
            FieldError(field=pointer(error["loc"], prefix) or "(body)", code=INVALID, message=rule(error))
        )
    return errors


def _present(document: Any, location: Location) -> bool:
    for token in location:
        if (isinstance(document, Mapping) and token in document) or (
            isinstance(token, int) and _is_array(document) and token < len(document)
        ):
            document = document[token]
        else:
            return False
    return True


# --- where the models of a body sit -------------------------------------------------------------------


def _is_one_of(model: type[BaseModel]) -> bool:
    return "one_of_schemas" in model.model_fields


def _typed_positions(annotation: Any, value: Any, at: str) -> Iterator[tuple[str, type[BaseModel], Any]]:
    """Every ``(pointer, model class, value)`` that ``annotation`` puts a generated model at."""
    origin, arguments = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        yield from _typed_positions(arguments[0], value, at)
    elif origin is typing.Union or origin is types.UnionType:
        for option in arguments:
            yield from _typed_positions(option, value, at)
    elif origin is list and arguments and isinstance(value, list):
        for index, item in enumerate(value):
            yield from _typed_positions(arguments[0], item, f"{at}/{index}")
    elif origin is dict and len(arguments) == 2 and isinstance(value, Mapping):
        for key, item in value.items():
            yield from _typed_positions(arguments[1], item, f"{at}/{_escape(key)}")
    elif isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield from _model_positions(annotation, value, at)


def _model_positions(
    model: type[BaseModel], value: Any, at: str
) -> Iterator[tuple[str, type[BaseModel], Any]]:
    yield at, model, value
    if _is_one_of(model) or not isinstance(value, Mapping):
        return
    for name, field in model.model_fields.items():
        key = field.alias or name
        if key in value:
            yield from _typed_positions(field.annotation, value[key], f"{at}/{_escape(key)}")


def _fails(model: type[BaseModel], value: Any) -> ValidationError | ValueError | None:
    try:
        model.from_dict(value)  # type: ignore[attr-defined]
    except ValueError as exc:  # pydantic's ValidationError is a ValueError
        return exc
    except (TypeError, AttributeError):
        return ValueError("not an object")
    return None


def _first_failing(
    model: type[BaseModel], document: Mapping[str, Any], wanted: Callable[[type[BaseModel]], bool]
) -> tuple[str, type[BaseModel], ValidationError | ValueError] | None:
    # The generated from_dict validates nested models first and on their own, so its error is located
    # relative to the innermost model; replaying the candidates finds where that model sits in the body.
    for at, candidate, value in _model_positions(model, document, ""):
        if wanted(candidate):
            failure = _fails(candidate, value)
            if failure is not None:
                return at, candidate, failure
    return None


def _located(model: type[BaseModel], document: Mapping[str, Any], exc: ValidationError) -> list[FieldError]:
    found = _first_failing(model, document, lambda candidate: candidate.__name__ == exc.title)
    if found is not None:
        at, _, failure = found
        if isinstance(failure, ValidationError):
            return _field_errors(failure, at, _resolve(document, at))
    return _field_errors(exc, "")


def _unlocated(model: type[BaseModel], document: Mapping[str, Any]) -> list[FieldError]:
    """A failure the generated code raised as a bare ValueError/TypeError: a oneOf or a wrong shape."""
    found = _first_failing(model, document, _is_one_of)
    if found is not None:
        at, candidate, _ = found
        return _one_of_errors(candidate, _resolve(document, at), at)
    return [
        FieldError(field="(body)", code=INVALID, message="an object or array is not where the model has one")
    ]


def _alternatives(one_of: type[BaseModel]) -> list[type[BaseModel]]:
    """The models a generated oneOf model chooses from (its ``oneof_schema_<n>_validator`` fields)."""
    return [
        option
        for name, field in one_of.model_fields.items()
        if name.startswith("oneof_schema_")
        for option in typing.get_args(field.annotation)
        if isinstance(option, type) and issubclass(option, BaseModel)
    ]


def _ruled_out(failure: ValidationError) -> bool:
    """Whether an alternative failed on a constant member (``operation``), so the value was never meant
    for it. The generated models check a one-value enum with a ValueError naming the enum values."""
    return any(
        len(error["loc"]) == 1
        and (error["type"] in ("enum", "literal_error") or "must be one of enum values" in error["msg"])
        for error in _errors_of(failure)
    )


def _one_of_errors(one_of: type[BaseModel], value: Any, at: str) -> list[FieldError]:
    """Why ``value`` matches none of a oneOf's alternatives, as the Service reports it: an object is
    measured against the one alternative its constant member points to (``/secrets/t/value: must
    satisfy maxLength=65536``); anything else says what all of them need."""
    field = at or "(body)"
    if not isinstance(value, Mapping):
        return [FieldError(field=field, code=INVALID, message='must satisfy type="object"')]
    meant = []
    for option in _alternatives(one_of):
        failure = _fails(option, value)
        if isinstance(failure, ValidationError) and not _ruled_out(failure):
            meant.append(failure)
    if len(meant) == 1:
        return _field_errors(meant[0], at, value)
    schemas = ", ".join(sorted(one_of.model_fields["one_of_schemas"].default or ()))
    return [FieldError(field=field, code=INVALID, message=f"must match exactly one of {schemas}")]


def _resolve(document: Any, at: str) -> Any:
    """The value at pointer ``at`` (one ``_model_positions`` produced, so every token is there)."""
    for token in at.split("/")[1:]:
        key = token.replace("~1", "/").replace("~0", "~")
        document = document[int(key)] if _is_array(document) else document[key]
    return document


# --- keys the model does not know ---------------------------------------------------------------------


def _unknown_keys(given: Any, kept: Any, at: str) -> Iterator[str]:
    """Pointers of keys in ``given`` that the model's ``to_dict()`` (``kept``) no longer has."""
    if isinstance(given, Mapping) and isinstance(kept, Mapping):
        for key, value in given.items():
            where = f"{at}/{_escape(key)}"
            if key in kept:
                yield from _unknown_keys(value, kept[key], where)
            elif value is not None:
                # to_dict() leaves out fields that are None, so only a key with a value can be unknown.
                yield where
    elif _is_array(given) and _is_array(kept):
        for index, (item, kept_item) in enumerate(zip(given, kept, strict=False)):
            yield from _unknown_keys(item, kept_item, f"{at}/{index}")


def _is_array(value: Any) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, str | bytes | bytearray)


def _composed_name(document: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``document`` whose top-level ``name`` is in Unicode normal form C.

    The Service composes every request body's top-level ``name`` before it checks the body, and stores it
    so: "é" typed as ``e`` + U+0301 is one character of the name, not two. Checked uncomposed, a name of
    150 such letters would be refused here for 300 characters while the Service accepts it.
    """
    given = dict(document)
    name = given.get("name")
    if isinstance(name, str) and not name.isascii():
        given["name"] = unicodedata.normalize("NFC", name)
    return given


def check_body(model: type[T], document: Mapping[str, Any]) -> T:
    """``model.from_dict(document)``, refusing with InvalidRequest what it would reject or drop."""
    pydantic_model = cast(type[BaseModel], model)
    given = _composed_name(document)
    problems: list[FieldError]
    try:
        built = pydantic_model.from_dict(given)  # type: ignore[attr-defined]
    except ValidationError as exc:
        problems = _located(pydantic_model, given, exc)
    except (ValueError, TypeError, AttributeError):
        problems = _unlocated(pydantic_model, given)
    else:
        problems = [
            FieldError(field=where, code=INVALID, message="is not a field of this body")
            for where in _unknown_keys(given, built.to_dict(), "")
        ]
    if problems:
        raise InvalidRequest(f"{pydantic_model.__name__} body", problems)
    return cast(T, built)


def build(model: Callable[..., T], **fields: Any) -> T:
    """``model(**fields)`` for a body the SDK assembles from keyword arguments (``reason``, ``target``...)."""
    problems: list[FieldError]
    try:
        return model(**fields)
    except ValidationError as exc:
        problems = [
            FieldError(
                field=".".join(str(t) for t in e["loc"]) or "(body)",
                code=INVALID,
                message=rule(e),
            )
            for e in _errors_of(exc)
        ]
    raise InvalidRequest(f"{getattr(model, '__name__', 'request')} body", problems)


# --- arguments of the generated operations -----------------------------------------------------------


def _argument_errors(function: Any, exc: ValidationError) -> list[FieldError]:
    """validate_call names keyword arguments but numbers positional ones (``self`` is 0): name them all."""
    try:
        names = list(inspect.signature(function).parameters)
    except (TypeError, ValueError):
        names = []
    errors = []
    for error in _errors_of(exc):
        location = [*error["loc"]]
        if location and isinstance(location[0], int) and location[0] < len(names):
            location[0] = names[location[0]]
        field = ".".join(str(token) for token in location) or "(arguments)"
        errors.append(FieldError(field=field, code=INVALID, message=rule(error)))
    return errors


class _Guarded:
    """Stands in for a generated ``*Api`` object; its operations raise InvalidRequest for bad arguments."""

    __slots__ = ("_api",)

    def __init__(self, api: Any) -> None:
        self._api = api

    def __getattr__(self, name: str) -> Any:
        member = getattr(self._api, name)
        if name.startswith("_") or not callable(member):
            return member
        unbound = getattr(type(self._api), name, member)

        def operation(*args: Any, **kwargs: Any) -> Any:
            problems: list[FieldError]
            try:
                return member(*args, **kwargs)
            except WePushError:
                raise
            except ValidationError as exc:
                problems = _argument_errors(unbound, exc)
            except ValueError:
                # The generated serializer's own checks; their text may quote a value, so say less.
                problems = [FieldError(field="(arguments)", code=INVALID, message="not accepted")]
            raise InvalidRequest(f"arguments of {name}", problems)

        return operation

    def __repr__(self) -> str:
        return f"guarded({type(self._api).__name__})"


def guarded(api: T) -> T:
    """``api`` with every operation translating the generated client's validation errors."""
    return cast(T, _Guarded(api))


def guarded_deserializer(deserialize: Callable[..., T]) -> Callable[..., T]:
    """Wrap ``ApiClient.response_deserialize``: an answer the models refuse is an InvalidResponse.

    Without it the pydantic error would pass for a bad argument and quote the answer (a new API token).
    """

    def response_deserialize(*args: Any, **kwargs: Any) -> T:
        problems: list[FieldError] = []
        try:
            return deserialize(*args, **kwargs)
        except ValidationError as exc:
            problems = _field_errors(exc, "")
        except ValueError:
            pass
        shown = "; ".join(f"{e.field}: {e.message} ({e.code})" for e in problems[:5]) or "unreadable"
        raise InvalidResponse(f"the Service's answer does not match the contract: {shown}")

    return response_deserialize
