"""The provider catalog: discovery through entry points, validation and health."""

from __future__ import annotations

from ._catalog import (
    ENTRY_POINT_GROUP,
    CatalogHealth,
    CatalogState,
    ProviderCatalog,
    ProviderHealth,
    ProviderStatus,
)
from ._checks import PROVIDER_ID_PATTERN, descriptor_problems, secret_field_problems

__all__ = [
    "ENTRY_POINT_GROUP",
    "PROVIDER_ID_PATTERN",
    "CatalogHealth",
    "CatalogState",
    "ProviderCatalog",
    "ProviderHealth",
    "ProviderStatus",
    "descriptor_problems",
    "secret_field_problems",
]
