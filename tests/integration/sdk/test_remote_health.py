"""The health probes through the SDK: one request each, without the token, a 503 readiness as a result."""

from __future__ import annotations

import socket

import pytest

from wepush.sdk.remote import ProblemError, TransportError, WePushClient

from ._service import ScriptedService, problem, reply

DOWN = {
    "status": "DOWN",
    "checks": {
        "database": {"status": "UP", "detail": "reachable"},
        "migrations": {"status": "DOWN", "detail": "migrations pending"},
    },
}


def _text(value: object) -> str:
    return str(getattr(value, "value", value))


def test_a_service_that_is_not_ready_is_reported_down_at_once(
    service: ScriptedService, client: WePushClient
) -> None:
    # Retry-After would make any other GET wait and ask again; a probe reports the state it found.
    service.script("GET", "/health/ready", reply(503, DOWN, headers={"Retry-After": "1"}))

    readiness = client.readiness()

    assert _text(readiness.status) == "DOWN"
    assert readiness.checks is not None
    assert {name: _text(check.status) for name, check in readiness.checks.items()} == {
        "database": "UP",
        "migrations": "DOWN",
    }
    (probe,) = service.seen("GET", "/health/ready")
    assert "Authorization" not in probe.headers


def test_liveness_is_read_without_the_token(service: ScriptedService, client: WePushClient) -> None:
    service.script("GET", "/health/live", reply(200, {"status": "UP"}))

    assert _text(client.liveness().status) == "UP"
    (probe,) = service.seen("GET", "/health/live")
    assert "Authorization" not in probe.headers


def test_a_probe_that_fails_otherwise_raises_its_problem(
    service: ScriptedService, client: WePushClient
) -> None:
    service.script("GET", "/health/live", problem(500, "INTERNAL_ERROR"))

    with pytest.raises(ProblemError) as raised:
        client.liveness()

    assert (raised.value.status, raised.value.code) == (500, "INTERNAL_ERROR")
    assert len(service.seen("GET", "/health/live")) == 1


def test_a_service_that_cannot_be_reached_is_a_transport_error() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])  # closed again before the client connects: nobody listens

    with (
        WePushClient(f"http://127.0.0.1:{port}", "unused") as client,
        pytest.raises(TransportError) as raised,
    ):
        client.readiness()

    assert raised.value.attempts == 1
