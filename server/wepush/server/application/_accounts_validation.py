"""Deciding whether an account configuration may be saved, in the seed's order.

1. Service JSON-Schema validation against the provider's account schema (400 VALIDATION_FAILED), together
   with the secret rules: every ``{"$secret": name}`` in ``config`` must name a secret that is configured
   once the write commits, and KEEP must name a stored secret.
2. The provider's own semantic validation (422 PROVIDER_CONFIG_INVALID).

A connection test is never part of saving; it is an explicit operation.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from wepush.agent.engine import ConfigDocument, ProviderDescriptor, ProviderFactory
from wepush.agent.providers.catalog import ProviderCatalog
from wepush.server.application._accounts_schema import SchemaValidators, pinned_references, secret_references
from wepush.server.application._accounts_secrets import (
    SecretKeep,
    SecretWrite,
    secret_write_issues,
    unreferenced_secret_issues,
)
from wepush.server.application.errors import (
    FieldIssue,
    ProviderConfigInvalid,
    ProviderNotAvailable,
    ValidationFailed,
)
from wepush.server.domain import JsonObject

__all__ = ["AccountProvider", "account_document", "changed_paths"]

_CONFIG = "/config"
_MAX_AUDIT_FIELDS = 64


@dataclass(frozen=True, slots=True)
class AccountProvider:
    """A provider from the catalog, as the account use cases need it."""

    factory: ProviderFactory
    descriptor: ProviderDescriptor

    @classmethod
    def of(cls, catalog: ProviderCatalog, provider_id: str) -> AccountProvider:
        """The provider of a saved account; gone from the catalog it is PROVIDER_NOT_AVAILABLE (503)."""
        factory = catalog.get(provider_id)
        if factory is None:
            raise ProviderNotAvailable(provider_id)
        return cls(factory, factory.descriptor())

    @classmethod
    def chosen(cls, catalog: ProviderCatalog, provider_id: str) -> AccountProvider:
        """The provider a client names for a new account; an unknown id is the request's fault (400)."""
        factory = catalog.get(provider_id)
        if factory is None:
            raise ValidationFailed(
                "The named provider is not in the catalog.",
                [FieldIssue("/providerId", "UNKNOWN_PROVIDER", "is not a provider of this Service")],
            )
        return cls(factory, factory.descriptor())

    @property
    def provider_id(self) -> str:
        return self.descriptor.provider_id

    @property
    def schema_version(self) -> str:
        """The newest account schema version the provider declares (saved with the account)."""
        return self.descriptor.schema_versions[-1]

    def validate(
        self,
        validators: SchemaValidators,
        config: JsonObject,
        writes: Mapping[str, SecretWrite],
        stored_secrets: Iterable[str],
    ) -> None:
        """Raise :class:`ValidationFailed` (400) or :class:`ProviderConfigInvalid` (422), else return."""
        stored = set(stored_secrets)
        issues = validators.issues(
            f"{self.provider_id}/account", self.descriptor.schemas.account, config, base=_CONFIG
        )
        issues.extend(secret_write_issues(writes, stored))
        # KEEP of an unknown name is already an issue above; it does not make the name configured.
        configured = {name for name in writes if name in stored or not isinstance(writes[name], SecretKeep)}
        referenced: set[str] = set()
        issues.extend(
            FieldIssue(_CONFIG + (pointer or "/"), "SECRET_REF_INVALID", _PINNED)
            for pointer in pinned_references(config)
        )
        for pointer, name in secret_references(config):
            referenced.add(name)
            if name not in configured:
                issues.append(
                    FieldIssue(
                        _CONFIG + pointer,
                        "SECRET_NOT_CONFIGURED",
                        f"references the secret {name!r}, which is not configured in 'secrets'",
                    )
                )
        issues.extend(unreferenced_secret_issues(writes, referenced))
        if issues:
            raise ValidationFailed("The account configuration is invalid.", issues)
        result = self.factory.validate_account(account_document(self.descriptor, self.schema_version, config))
        if not result.ok:
            raise ProviderConfigInvalid(
                f"The provider {self.provider_id} refused the account configuration.",
                [
                    FieldIssue(_CONFIG + issue.path, issue.code, issue.message[:1024])
                    for issue in result.issues
                ],
            )

    def document(self, config: JsonObject, schema_version: str | None = None) -> ConfigDocument:
        return account_document(self.descriptor, schema_version or self.schema_version, config)


def account_document(
    descriptor: ProviderDescriptor, schema_version: str, config: JsonObject
) -> ConfigDocument:
    return ConfigDocument.from_json(f"{descriptor.provider_id}/account", schema_version, config)


#: The Service keeps one version of each account secret and moves it on with every REPLACE: a fixed
#: version matched at most until the next one, then every run and connection test failed with "secret
#: not configured". An account's secrets are one namespace.
_PINNED = 'must be {"$secret": "<name>"} alone: the Service keeps the version of the secrets it stores'


def _is_secret_ref(node: object) -> bool:
    return isinstance(node, dict) and "$secret" in node


def changed_paths(old: object, new: object, prefix: str) -> list[str]:
    """Dotted names of the fields that differ (``config.auth.type``), for audit details.

    A secret reference is one field: its inner keys are not worth naming.
    """
    if (
        isinstance(old, dict)
        and isinstance(new, dict)
        and not _is_secret_ref(old)
        and not _is_secret_ref(new)
    ):
        names: list[str] = []
        for key in sorted(set(old) | set(new), key=str):
            path = f"{prefix}.{key}"
            if key not in old or key not in new:
                names.append(path)
            elif old[key] != new[key]:
                names.extend(changed_paths(old[key], new[key], path))
        return names[:_MAX_AUDIT_FIELDS]
    return [] if old == new else [prefix]
