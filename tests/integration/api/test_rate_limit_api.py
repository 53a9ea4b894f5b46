"""429 RATE_LIMITED through the real app: per token, with Retry-After, never for a rejected credential."""

from __future__ import annotations

from pathlib import Path

from tests.integration.api._support import API, bearer, default_workspace, issue_token, service


async def test_a_token_beyond_its_budget_is_answered_429_with_retry_after(tmp_path: Path) -> None:
    # One request earned every 1,000 s: nothing is earned while the test runs, however slow the machine.
    async with service(
        tmp_path,
        WEPUSH_SECURITY_RATE_LIMIT_REQUESTS_PER_SECOND="0.001",
        WEPUSH_SECURITY_RATE_LIMIT_BURST="4",
    ) as app:
        workspace = await default_workspace(app)  # 1
        _, viewer = await issue_token(app, workspace, "VIEWER")  # 2
        # Unknown credentials are refused before they spend anything, from anyone's budget.
        for _ in range(10):
            rejected = await app.client.get(f"{API}/workspaces", headers=bearer("wpu_not-a-real-token"))
            assert rejected.status_code == 401
        statuses = [
            (await app.client.get(f"{API}/workspaces", headers=app.admin())).status_code for _ in range(4)
        ]

        assert statuses == [200, 200, 429, 429]
        limited = await app.client.get(f"{API}/workspaces", headers=app.admin())
        assert limited.status_code == 429
        assert limited.headers["content-type"].startswith("application/problem+json")
        assert limited.headers["retry-after"] == "1000"
        body = limited.json()
        assert (body["code"], body["status"]) == ("RATE_LIMITED", 429)
        assert app.admin_token is not None
        assert app.admin_token not in limited.text
        # Another token's budget is its own.
        assert (await app.client.get(f"{API}/workspaces", headers=viewer)).status_code == 200
        # Health answers whatever the budgets hold.
        assert (await app.client.get("/health/live")).status_code == 200


async def test_the_budget_can_be_turned_off(tmp_path: Path) -> None:
    async with service(
        tmp_path, WEPUSH_SECURITY_RATE_LIMIT_REQUESTS_PER_SECOND="0", WEPUSH_SECURITY_RATE_LIMIT_BURST="1"
    ) as app:
        for _ in range(20):
            assert (await app.client.get(f"{API}/workspaces", headers=app.admin())).status_code == 200
