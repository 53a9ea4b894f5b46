"""Every public method of the remote SDK declares what it really returns: the generated model, not ``Any``.

The generated client is invisible to mypy inside this repository (``follow_imports = "skip"``), so only the
annotations as Python resolves them at run time can show which model a method promises; an IDE or a user's
mypy reads exactly these.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from wepush.sdk.remote import (
    AsyncEventSubscription,
    Download,
    EventSubscription,
    RunEventMessage,
    WePushClient,
    WorkspaceClient,
)
from wepush.sdk.remote._accounts import AccountsClient
from wepush.sdk.remote._audiences import AudiencesClient
from wepush.sdk.remote._jobs import JobsClient
from wepush.sdk.remote._messages import MessagesClient
from wepush.sdk.remote._runs import RunsClient
from wepush.sdk.remote._support import Resource
from wepush.sdk.remote._system import AgentsClient, ProvidersClient, WorkspacesClient
from wepush.sdk.remote._tokens import TokensClient
from wepush_client import models


def _accessor_classes() -> list[type]:
    """Every resource accessor of the SDK (``client.workspaces``, ``workspace.runs`` ...), found, not listed,
    so a new accessor is checked too."""
    found: list[type] = []
    pending = [Resource]
    while pending:
        cls = pending.pop()
        found.append(cls)
        pending.extend(cls.__subclasses__())
    return [cls for cls in found if cls.__module__.startswith("wepush.sdk.")]


PUBLIC_CLASSES = [
    WePushClient,
    WorkspaceClient,
    EventSubscription,
    AsyncEventSubscription,
    RunEventMessage,
    Download,
    *_accessor_classes(),
]


def _public_methods(cls: type) -> Iterator[tuple[str, Callable[..., object]]]:
    for name, member in inspect.getmembers(cls):
        if name.startswith("_"):
            continue
        if isinstance(member, property) and member.fget is not None:
            yield name, member.fget
        elif inspect.isfunction(member) or inspect.ismethod(member):
            yield name, member


def _mentions_any(hint: object) -> bool:
    if hint is Any:
        return True
    parts = hint if isinstance(hint, list) else typing.get_args(hint)  # Callable's parameters are a list
    return any(_mentions_any(part) for part in parts)


def test_the_walk_reaches_every_resource_accessor() -> None:
    # A walk that found nothing would pass the checks below without checking anything.
    assert {AccountsClient, AudiencesClient, JobsClient, RunsClient, AgentsClient, TokensClient} <= set(
        PUBLIC_CLASSES
    )
    assert sum(1 for cls in PUBLIC_CLASSES for _ in _public_methods(cls)) > 80


@pytest.mark.parametrize("cls", PUBLIC_CLASSES, ids=lambda cls: cls.__name__)
def test_no_public_method_returns_any(cls: type) -> None:
    untyped = []
    for name, method in _public_methods(cls):
        hints = typing.get_type_hints(method)
        if "return" not in hints or _mentions_any(hints["return"]):
            untyped.append(f"{cls.__name__}.{name} -> {hints.get('return', 'missing')}")
    assert untyped == []


@pytest.mark.parametrize(
    ("method", "expected"),
    [
        (RunsClient.start, models.RunAccepted),
        (RunsClient.get, models.Run),
        (RunsClient.pause, models.RunCommandAccepted),
        (RunsClient.get_command, models.RunCommand),
        (RunsClient.items, Iterator[models.RunItem]),
        (RunsClient.resend, models.RunAccepted),
        (RunsClient.event_log, models.RunEventPage),
        (AudiencesClient.upload, models.AudienceImport),
        (AudiencesClient.preview, models.AudienceImportPreview),
        (AudiencesClient.commit_import, models.AudienceSnapshot),
        (AudiencesClient.iterate_recipients, Iterator[models.Recipient]),
        (AudiencesClient.delete, type(None)),
        (JobsClient.create, models.Job),
        (JobsClient.confirm_run, models.RunConfirmation),
        (AccountsClient.list, models.AccountPage),
        (AccountsClient.iterate, Iterator[models.Account]),
        (AccountsClient.test_connection, models.ConnectionTestResult),
        (MessagesClient.create_revision, models.MessageRevision),
        (WorkspacesClient.set_member_role, models.WorkspaceMember),
        (ProvidersClient.schemas, models.ProviderSchemas),
        (AgentsClient.rotate_credential, models.AgentCredentialRotated),
        (TokensClient.create, models.ApiTokenCreated),
        (RunEventMessage.to_model, models.RunEvent),
    ],
    ids=lambda value: getattr(value, "__qualname__", None),
)
def test_methods_declare_the_generated_model_they_return(
    method: Callable[..., object], expected: object
) -> None:
    assert typing.get_type_hints(method)["return"] == expected


def test_run_event_to_model_gives_the_declared_model() -> None:
    message = RunEventMessage(
        id="7",
        event="progress",
        data={
            "runId": "run-1",
            "sequence": 7,
            "type": "PROGRESS",
            "occurredAt": "2027-01-01T00:00:00Z",
            "data": {"succeeded": 1},
        },
    )
    event = message.to_model()
    assert isinstance(event, typing.get_type_hints(RunEventMessage.to_model)["return"])
    assert (event.run_id, event.sequence, event.data) == ("run-1", 7, {"succeeded": 1})
