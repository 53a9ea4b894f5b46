from __future__ import annotations

import dataclasses
from importlib.metadata import EntryPoint
from typing import Any

from wepush.agent.providers.catalog import CatalogState, ProviderCatalog, ProviderStatus
from wepush.agent.providers.fake import FakeProviderFactory
from wepush.agent.providers.http import HttpProviderFactory
from wepush.agent.providers.spi import ProviderDescriptor, ProviderSchemas

HTTP_ENTRY = EntryPoint("wepush.http", "wepush.agent.providers.http:HttpProviderFactory", "wepush.providers")


class RelabelledFactory(HttpProviderFactory):
    """The HTTP provider with a doctored descriptor, to exercise the catalog's checks."""

    def __init__(self, **changes: Any) -> None:
        super().__init__()
        self._changes = changes

    def descriptor(self) -> ProviderDescriptor:
        return dataclasses.replace(super().descriptor(), **self._changes)


def schemas_with(**changes: Any) -> ProviderSchemas:
    base = HttpProviderFactory().descriptor().schemas
    fields = {name: getattr(base, name) for name in ("account", "message", "recipient", "ui")}
    fields.update(changes)
    return ProviderSchemas(**fields)


def test_builtin_http_provider_is_discovered_through_entry_points() -> None:
    catalog = ProviderCatalog.from_entry_points(discovered=[HTTP_ENTRY])

    factory = catalog.get("wepush.http")

    assert isinstance(factory, HttpProviderFactory)
    assert [d.provider_id for d in catalog.list()] == ["wepush.http"]
    assert catalog.health().state is CatalogState.HEALTHY


def test_installed_package_registers_the_http_provider() -> None:
    catalog = ProviderCatalog.from_entry_points()

    assert "wepush.http" in catalog


def test_duplicate_id_is_rejected_and_the_first_keeps_working() -> None:
    first, second = HttpProviderFactory(), HttpProviderFactory()

    catalog = ProviderCatalog.from_factories([first, second])

    health = catalog.health()
    assert catalog.get("wepush.http") is first
    assert health.state is CatalogState.DEGRADED
    assert [p.status for p in health.providers] == [ProviderStatus.ACTIVE, ProviderStatus.REJECTED]
    assert "duplicate provider id 'wepush.http'" in health.providers[1].reasons[0]
    assert "explicit[0]" in health.providers[1].reasons[0]


def test_rejected_provider_does_not_block_the_others() -> None:
    catalog = ProviderCatalog.from_factories(
        [RelabelledFactory(provider_id="Not Valid"), HttpProviderFactory()]
    )

    assert "wepush.http" in catalog
    assert "Not Valid" not in catalog
    assert catalog.health().state is CatalogState.DEGRADED


def test_malformed_provider_id_is_rejected_with_a_reason() -> None:
    catalog = ProviderCatalog.from_factories([RelabelledFactory(provider_id="http")])

    [rejected] = catalog.health().rejected
    assert rejected.provider_id == "http"
    assert "not of the form 'vendor.channel'" in rejected.reasons[0]


def test_incompatible_spi_is_rejected() -> None:
    catalog = ProviderCatalog.from_factories([RelabelledFactory(spi_version="2")])

    [rejected] = catalog.health().rejected
    assert rejected.reasons == ("SPI 2 is incompatible with this agent's SPI 1",)


def test_missing_and_invalid_schemas_are_rejected() -> None:
    missing = RelabelledFactory(schemas=schemas_with(recipient={}))
    invalid = RelabelledFactory(schemas=schemas_with(message={"type": 12}))

    catalog = ProviderCatalog.from_factories([missing, invalid])

    reasons = [p.reasons for p in catalog.health().rejected]
    assert reasons[0] == ("recipient schema is missing",)
    assert reasons[1][0].startswith("message schema is not a valid JSON Schema")


def test_secret_field_with_a_default_or_without_marking_is_rejected() -> None:
    account = {
        "type": "object",
        "properties": {
            "apiKey": {"type": "string"},
            "password": {"type": "string", "x-wepush-secret": True, "default": "changeme"},
        },
    }

    catalog = ProviderCatalog.from_factories([RelabelledFactory(schemas=schemas_with(account=account))])

    [rejected] = catalog.health().rejected
    assert rejected.reasons == (
        "account/apiKey looks like a credential but lacks x-wepush-secret",
        "account/password is secret but declares default",
    )


def test_an_unmarked_destination_in_the_account_schema_is_rejected() -> None:
    account = {
        "type": "object",
        "properties": {
            "endpointUrl": {"type": "string"},
            "smtp": {
                "type": "object",
                "properties": {"host": {"type": "string"}, "port": {"type": "integer"}},
            },
            "callbackUrl": {"type": "string", "x-wepush-destination": True},
            "webhookUrl": {"type": "object", "x-wepush-secret": True},
            "timeout": {"type": "string"},
        },
    }
    # The same names in a message are content (a link in a template), not where secrets go.
    message = {"type": "object", "properties": {"url": {"type": "string"}}}

    catalog = ProviderCatalog.from_factories(
        [RelabelledFactory(schemas=schemas_with(account=account, message=message))]
    )

    [rejected] = catalog.health().rejected
    assert rejected.reasons == (
        "account/endpointUrl looks like a destination but lacks x-wepush-destination",
        "account/smtp/host looks like a destination but lacks x-wepush-destination",
        "account/smtp/port looks like a destination but lacks x-wepush-destination",
    )


def test_unimportable_entry_point_is_rejected_without_raising() -> None:
    broken = EntryPoint("acme.sms", "acme_missing_module:Factory", "wepush.providers")

    catalog = ProviderCatalog.from_entry_points(discovered=[broken, HTTP_ENTRY])

    [rejected] = catalog.health().rejected
    assert rejected.provider_id == "acme.sms"
    assert rejected.reasons[0].startswith("cannot be imported: ModuleNotFoundError")
    assert "wepush.http" in catalog


def test_entry_point_name_must_match_the_descriptor() -> None:
    mislabelled = EntryPoint(
        "acme.http", "wepush.agent.providers.http:HttpProviderFactory", "wepush.providers"
    )

    catalog = ProviderCatalog.from_entry_points(discovered=[mislabelled])

    [rejected] = catalog.health().rejected
    assert rejected.reasons == ("registered as 'acme.http' but the descriptor says 'wepush.http'",)


def test_an_object_that_is_not_a_factory_is_rejected() -> None:
    not_a_factory = EntryPoint("acme.json", "json:JSONDecoder", "wepush.providers")

    catalog = ProviderCatalog.from_entry_points(discovered=[not_a_factory])

    [rejected] = catalog.health().rejected
    assert rejected.reasons[0].startswith("not a ProviderFactory: missing descriptor")


def test_plugin_loader_can_record_its_own_refusals() -> None:
    catalog = ProviderCatalog.from_factories([HttpProviderFactory()])

    catalog.reject("plugins/acme.sms/1.2.0", "signature verification failed", provider_id="acme.sms")

    health = catalog.health()
    assert health.state is CatalogState.DEGRADED
    assert health.rejected[0].source == "plugins/acme.sms/1.2.0"
    assert "wepush.http" in catalog


def test_catalog_works_as_the_engine_provider_lookup() -> None:
    fake = FakeProviderFactory()
    catalog = ProviderCatalog.from_factories([HttpProviderFactory()])

    lookup = catalog.lookup()

    assert isinstance(lookup("wepush.http"), HttpProviderFactory)
    assert lookup(fake.descriptor().provider_id) is None


def test_descriptor_text_longer_than_the_public_api_carries_is_rejected_with_its_reasons() -> None:
    # The API's contract bounds these fields; a longer one made every catalog response fail it (500).
    catalog = ProviderCatalog.from_factories(
        [
            RelabelledFactory(display_name="d" * 201, description="x" * 2001, platforms=("p" * 65,)),
            RelabelledFactory(provider_id="acme.http", display_name="d" * 200, description="x" * 2000),
        ]
    )

    [rejected] = catalog.health().rejected
    assert rejected.reasons == (
        "display name is 201 characters long; at most 200 are allowed",
        "description is 2001 characters long; at most 2000 are allowed",
        f"platform {'p' * 64!r}… is longer than 64 characters",
    )
    assert [d.provider_id for d in catalog.list()] == ["acme.http"]
