"""``HttpMetricsMiddleware`` records one finished request per HTTP request, with the status the client
got, also when no response began (the client left) or the app raised."""

from __future__ import annotations

import pytest
from starlette.types import Message, Receive, Scope, Send

from wepush.server.api.middleware import UNMATCHED_OPERATION, HttpMetricsMiddleware


class _Recorded:
    def __init__(self) -> None:
        self.requests: list[tuple[str, str, int, float]] = []

    def request_finished(self, operation: str, method: str, status: int, seconds: float) -> None:
        self.requests.append((operation, method, status, seconds))


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        self.now += 0.25
        return self.now


async def _receive() -> Message:
    return {"type": "http.request", "body": b"", "more_body": False}


async def _drop(message: Message) -> None:
    return None


def _routed(operation: str | None, status: int | None, *, fail: bool = False) -> object:
    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if operation is not None:
            routing = scope.setdefault("extensions", {}).setdefault("connexion_routing", {})
            routing["operation_id"] = operation
        if status is not None:
            await send({"type": "http.response.start", "status": status, "headers": []})
            await send({"type": "http.response.body", "body": b""})
        if fail:
            raise RuntimeError("handler broke")

    return app


async def _call(app: object, recorded: _Recorded, scope_type: str = "http") -> None:
    middleware = HttpMetricsMiddleware(app, lambda: recorded, clock=_Clock())  # type: ignore[arg-type]
    await middleware({"type": scope_type, "method": "POST", "path": "/x"}, _receive, _drop)


async def test_a_routed_request_is_recorded_under_its_operation_with_its_status_and_time() -> None:
    recorded = _Recorded()
    await _call(_routed("createAccount", 201), recorded)
    assert recorded.requests == [("createAccount", "POST", 201, 0.25)]


async def test_a_request_no_operation_matched_is_unmatched() -> None:
    recorded = _Recorded()
    await _call(_routed(None, 404), recorded)
    assert recorded.requests == [(UNMATCHED_OPERATION, "POST", 404, 0.25)]


async def test_a_request_left_before_any_response_is_499_and_one_that_raised_is_500() -> None:
    recorded = _Recorded()
    await _call(_routed("streamRunEvents", None), recorded)
    with pytest.raises(RuntimeError, match="handler broke"):
        await _call(_routed("getRun", None, fail=True), recorded)
    assert [(operation, status) for operation, _, status, _ in recorded.requests] == [
        ("streamRunEvents", 499),
        ("getRun", 500),
    ]


async def test_nothing_is_recorded_without_metrics_or_for_lifespan_events() -> None:
    recorded = _Recorded()
    await _call(_routed(None, None), recorded, scope_type="lifespan")
    middleware = HttpMetricsMiddleware(_routed("getRun", 200), lambda: None)  # type: ignore[arg-type]
    await middleware({"type": "http", "method": "GET", "path": "/x"}, _receive, _drop)
    assert recorded.requests == []
