"""Which Recipient fields a message revision's ``{{variable}}`` placeholders need.

A job joins a message revision to an audience snapshot; a placeholder naming a field the snapshot's
recipients do not have fails every one of them at send time ("recipient has no field"), so the job is
refused when it is saved instead. The provider's message schema says where placeholders may stand: a
member marked ``x-wepush-variable`` (seed: 允许使用 Recipient 变量) is a template, and so is every string
inside it (a headers map, a list of articles). Placeholders are read with the providers' own template
parser, so the Service sees exactly the names a provider will look up. A schema the walk cannot follow
(a remote ``$ref``) only means fewer names are checked, never that a job is refused.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

# The template module itself depends only on the SPI; the package also exports the channels' HTTP
# transport, which the layer contract keeps out of the application layer's imports.
from wepush.agent.providers.common._template import Template, TemplateSyntaxError

__all__ = ["RecipientFieldGroup", "recipient_field_groups", "template_variables"]

_MARK: Final = "x-wepush-variable"
#: A message member whose value names the Recipient field a provider sends to (SMTP ``toField``, an SMS
#: ``phoneField``). The mark's value is a group: the audience needs at least one field of each group
#: (WeCom's ``toUserField``, ``toPartyField`` and ``toTagField`` share one).
_RECIPIENT_FIELD: Final = "x-wepush-recipient-field"
_BRANCHES: Final = ("allOf", "anyOf", "oneOf", "then", "else")


class _Walk:
    def __init__(self, root: Mapping[str, Any]) -> None:
        self._root = root
        self.names: set[str] = set()

    def _resolved(self, schema: Any, depth: int = 0) -> Mapping[str, Any]:
        """``schema`` with a local ``$ref`` (``#/$defs/…``) followed; anything else as it is."""
        if not isinstance(schema, Mapping):
            return {}
        ref = schema.get("$ref")
        if not isinstance(ref, str) or not ref.startswith("#") or depth > 32:
            return schema
        node: Any = self._root
        for part in ref.lstrip("#").split("/"):
            if part:
                node = (
                    node.get(part.replace("~1", "/").replace("~0", "~"))
                    if isinstance(node, Mapping)
                    else None
                )
        return {**self._resolved(node, depth + 1), **{k: v for k, v in schema.items() if k != "$ref"}}

    def _alternatives(self, schema: Any) -> Iterator[Mapping[str, Any]]:
        """The schema and every subschema that also applies to the same value."""
        node = self._resolved(schema)
        yield node
        for keyword in _BRANCHES:
            branches = node.get(keyword)
            for branch in branches if isinstance(branches, list) else [branches] if branches else []:
                yield from self._alternatives(branch)

    @staticmethod
    def _members(node: Mapping[str, Any], key: str) -> Iterator[Any]:
        properties = node.get("properties")
        if isinstance(properties, Mapping) and key in properties:
            yield properties[key]
            return
        patterns = node.get("patternProperties")
        matched = False
        if isinstance(patterns, Mapping):
            for pattern, member in patterns.items():
                if re.search(pattern, key):
                    matched = True
                    yield member
        additional = node.get("additionalProperties")
        if not matched and isinstance(additional, Mapping):
            yield additional

    @staticmethod
    def _items(node: Mapping[str, Any], index: int) -> Iterator[Any]:
        prefix = node.get("prefixItems")
        if isinstance(prefix, list) and index < len(prefix):
            yield prefix[index]
            return
        items = node.get("items")
        if isinstance(items, Mapping):
            yield items

    def value(self, schemas: list[Any], value: Any, marked: bool) -> None:
        nodes = [node for schema in schemas for node in self._alternatives(schema)]
        marked = marked or any(node.get(_MARK) is True for node in nodes)
        if isinstance(value, str):
            if marked:
                self._template(value)
        elif isinstance(value, Mapping):
            for key, member in value.items():
                self.value([m for node in nodes for m in self._members(node, str(key))], member, marked)
        elif isinstance(value, list):
            for index, item in enumerate(value):
                self.value([s for node in nodes for s in self._items(node, index)], item, marked)

    def _template(self, text: str) -> None:
        # A malformed template was refused when the message was saved; there is nothing to look up.
        with contextlib.suppress(TemplateSyntaxError):
            self.names.update(Template.parse(text).variables)


def template_variables(message_schema: Mapping[str, Any], content: Any) -> frozenset[str]:
    """The Recipient field names the placeholders in ``content`` name, where its schema allows them."""
    walk = _Walk(message_schema)
    walk.value([message_schema], content, False)
    return frozenset(walk.names)


@dataclass(frozen=True, slots=True)
class RecipientFieldGroup:
    """Recipient fields of which every recipient needs at least one: (message member, field name) pairs."""

    group: str
    members: tuple[tuple[str, str], ...]


def recipient_field_groups(message_schema: Mapping[str, Any], content: Any) -> list[RecipientFieldGroup]:
    """The fields ``content`` sends to, grouped as its schema marks them; a member left out names its
    schema default, and one with neither value nor default names nothing (an optional display name)."""
    properties = message_schema.get("properties")
    if not isinstance(properties, Mapping) or not isinstance(content, Mapping):
        return []
    groups: dict[str, list[tuple[str, str]]] = {}
    for member, schema in properties.items():
        if not isinstance(schema, Mapping) or not isinstance(schema.get(_RECIPIENT_FIELD), str):
            continue
        named = content.get(member, schema.get("default"))
        if isinstance(named, str) and named:
            groups.setdefault(schema[_RECIPIENT_FIELD], []).append((str(member), named))
    return [RecipientFieldGroup(group, tuple(members)) for group, members in sorted(groups.items())]
