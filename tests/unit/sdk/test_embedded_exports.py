"""The embedded SDK's public surface is deliberate."""

from __future__ import annotations

import wepush.sdk.embedded as embedded


def test_embedded_sdk_exports_exactly_its_curated_names() -> None:
    assert set(embedded.__all__) == {
        "ArtifactSinkFactory",
        "EngineConfiguration",
        "EventSinkFactory",
        "Recipients",
        "ResultSinkFactory",
        "StreamingRecipientSource",
        "WePushEngine",
        "WePushEngineBuilder",
    }
    assert all(hasattr(embedded, name) for name in embedded.__all__)
