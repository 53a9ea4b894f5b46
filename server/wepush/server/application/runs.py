"""Runs: confirmation, start, list and detail, items, commands, events, artifacts and resend.

Each method is one use case with one transaction (seed: RunApplicationService, RunCommandService,
ArtifactApplicationService). Nothing here waits for an executor: a start or a command is persisted and
acknowledged with 202, and the executor is hinted after commit. The use cases live in private modules by
concern and are combined here into the one service the API reaches.
"""

from __future__ import annotations

from wepush.server.application._run_commanding import RunCommanding
from wepush.server.application._run_commands import CommandRequest
from wepush.server.application._run_context import RunPorts
from wepush.server.application._run_creation import RunCreation
from wepush.server.application._run_errors import (
    ConcurrencyOutOfRange,
    ConfirmationInvalid,
    ConfirmationRequired,
    EventCursorExpired,
)
from wepush.server.application._run_policies import api_policies
from wepush.server.application._run_ports import EventStreamEnded, EventSubscription, RunEventFeed
from wepush.server.application._run_reading import RunReading
from wepush.server.application._run_resend import RunResends
from wepush.server.application._run_start import RunStartRequest
from wepush.server.application._run_views import (
    ConcurrencyView,
    ResendConfirmationView,
    RunConfirmationView,
    RunItemView,
    RunListFilter,
    RunView,
)
from wepush.server.application.execution import ArtifactDownload, ArtifactNotReady, RangeNotSatisfiable

__all__ = [
    "ArtifactDownload",
    "ArtifactNotReady",
    "CommandRequest",
    "ConcurrencyOutOfRange",
    "ConcurrencyView",
    "ConfirmationInvalid",
    "ConfirmationRequired",
    "EventCursorExpired",
    "EventStreamEnded",
    "EventSubscription",
    "RangeNotSatisfiable",
    "ResendConfirmationView",
    "RunConfirmationView",
    "RunEventFeed",
    "RunItemView",
    "RunListFilter",
    "RunPorts",
    "RunService",
    "RunStartRequest",
    "RunView",
    "api_policies",
]


class RunService(RunCreation, RunResends, RunReading, RunCommanding):
    """Every Run use case; built once per Service from :class:`ServiceDeps` and :class:`RunPorts`."""
