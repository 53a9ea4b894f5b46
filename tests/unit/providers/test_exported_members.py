"""The public surface of the provider packages is deliberate: adding or dropping a name is a decision."""

from __future__ import annotations

import pytest

import wepush.agent.providers.catalog as catalog
import wepush.agent.providers.http as http
import wepush.agent.providers.testing as testing

EXPECTED = {
    http: {
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
    },
    catalog: {
        "ENTRY_POINT_GROUP",
        "PROVIDER_ID_PATTERN",
        "CatalogHealth",
        "CatalogState",
        "ProviderCatalog",
        "ProviderHealth",
        "ProviderStatus",
        "descriptor_problems",
        "secret_field_problems",
    },
    testing: {
        "CONTRACT_CHECKS",
        "ContractCheck",
        "ContractSubject",
        "ContractViolation",
        "EngineObservation",
        "InvalidConfig",
        "ObservedFactory",
        "RecordedRequest",
        "Scenario",
        "ScriptedResponse",
        "VendorServer",
        "open_session",
        "run_through_engine",
    },
}


@pytest.mark.parametrize("module", list(EXPECTED), ids=lambda m: m.__name__)
def test_package_exports_exactly_its_curated_names(module: object) -> None:
    exported = set(getattr(module, "__all__", ()))

    assert exported == EXPECTED[module]  # type: ignore[index]
    assert all(hasattr(module, name) for name in exported)
