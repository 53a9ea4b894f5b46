"""The embedded SDK: run the WePush engine inside an application, without a Service.

engine = (
    WePushEngine.builder()
    .provider(HttpProviderFactory())
    .secret_resolver(resolver)
    .result_sink(results)
    .build()
)
async with engine:
    handle = await engine.start(spec, recipients)
    await handle.submit(ChangeConcurrency("cmd-1", 50))
    summary = await handle.completion()
"""

from __future__ import annotations

from ._builder import WePushEngineBuilder
from ._engine import (
    ArtifactSinkFactory,
    EngineConfiguration,
    EventSinkFactory,
    ResultSinkFactory,
    WePushEngine,
)
from ._ports import Recipients, StreamingRecipientSource

__all__ = [
    "ArtifactSinkFactory",
    "EngineConfiguration",
    "EventSinkFactory",
    "Recipients",
    "ResultSinkFactory",
    "StreamingRecipientSource",
    "WePushEngine",
    "WePushEngineBuilder",
]
