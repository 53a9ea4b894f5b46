"""Account secrets: REPLACE / KEEP / omit semantics, and the value never leaves the Service in any form."""

from __future__ import annotations

import base64
import logging
import sqlite3
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.helpers_app import RunningApp
from tests.integration.api._support import (
    API,
    OTHER_SECRET_VALUE,
    SECRET_VALUE,
    accounts_url,
    create_account,
    default_workspace,
    http_account,
    issue_token,
    loopback_catalog,
    service,
    uow,
    vendor_server,
)
from wepush.agent.engine import SecretNotFoundError, SecretRef
from wepush.server.application.accounts import AccountSecretResolver


def _basic(config: dict[str, Any], password: str = "password") -> dict[str, Any]:
    """The same account with BASIC auth, whose password is the secret ``password``."""
    return {**config, "auth": {"type": "BASIC", "username": "orders", "password": {"$secret": password}}}


async def _resolver(app: RunningApp, workspace_id: str, account_id: str) -> AccountSecretResolver:
    assert app.runtime.deps is not None
    return await AccountSecretResolver.load(uow(app), app.runtime.deps.secret_store, workspace_id, account_id)


async def _reveal(resolver: AccountSecretResolver, name: str) -> str:
    with await resolver.resolve(SecretRef("default", name)) as value:
        return value.copy_str()


async def test_keep_retains_omitted_removes_and_replace_rotates(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        created = await create_account(app, ws, http_account())
        url = accounts_url(ws, created["id"])

        # Switching to BASIC auth: the new password is sent, the bearer token left out is removed.
        switched = await app.client.put(
            url,
            headers=app.admin(),
            json={
                "name": created["name"],
                "config": _basic(created["config"]),
                "secrets": {"password": {"operation": "REPLACE", "value": OTHER_SECRET_VALUE}},
                "version": 1,
            },
        )
        assert switched.status_code == 200, switched.text
        assert set(switched.json()["secrets"]) == {"password"}
        resolver = await _resolver(app, ws, created["id"])
        assert resolver.names == {"password"}

        kept = await app.client.put(
            url,
            headers=app.admin(),
            json={
                "name": created["name"],
                "config": {**switched.json()["config"], "requestTimeout": "PT9S"},
                "secrets": {"password": {"operation": "KEEP"}},
                "version": 2,
            },
        )
        assert kept.status_code == 200, kept.text
        # The kept one is untouched (same change time, same value).
        assert kept.json()["secrets"] == switched.json()["secrets"]
        assert await _reveal(await _resolver(app, ws, created["id"]), "password") == OTHER_SECRET_VALUE

        replaced = await app.client.put(
            url,
            headers=app.admin(),
            json={
                "name": created["name"],
                "config": kept.json()["config"],
                "secrets": {"password": {"operation": "REPLACE", "value": SECRET_VALUE}},
                "version": 3,
            },
        )
        assert replaced.status_code == 200, replaced.text
        assert await _reveal(await _resolver(app, ws, created["id"]), "password") == SECRET_VALUE
        async with uow(app)(read_only=True) as tx:
            records = await tx.secret_records.list_for_owner(ws, "ACCOUNT", created["id"])
        # A replacement is a new record version, so the old ciphertext can never be put back.
        assert [(r.name, r.record_version) for r in records] == [("password", 2)]


async def test_a_secret_the_configuration_does_not_reference_is_refused(tmp_path: Path) -> None:
    # Before, a misspelt or forgotten reference left the secret stored where nothing would ever use it.
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        body = http_account()
        body["secrets"]["spare"] = {"operation": "REPLACE", "value": OTHER_SECRET_VALUE}

        refused = await app.client.post(accounts_url(ws), headers=app.admin(), json=body)

        assert refused.status_code == 400, refused.text
        assert [(e["field"], e["code"]) for e in refused.json()["errors"]] == [
            ("/secrets/spare", "SECRET_NOT_REFERENCED")
        ]
        assert OTHER_SECRET_VALUE not in refused.text
        created = await create_account(app, ws, http_account())
        # KEEP of a secret the new configuration no longer uses is refused too: leaving it out deletes it.
        kept_unused = await app.client.put(
            accounts_url(ws, created["id"]),
            headers=app.admin(),
            json={
                "name": created["name"],
                "config": _basic(created["config"]),
                "secrets": {
                    "password": {"operation": "REPLACE", "value": OTHER_SECRET_VALUE},
                    "http-account-token": {"operation": "KEEP"},
                },
                "version": 1,
            },
        )
        assert [(e["field"], e["code"]) for e in kept_unused.json()["errors"]] == [
            ("/secrets/http-account-token", "SECRET_NOT_REFERENCED")
        ]
        assert await _reveal(await _resolver(app, ws, created["id"]), "http-account-token") == SECRET_VALUE


async def test_pointing_an_account_elsewhere_needs_its_kept_secrets_sent_again(tmp_path: Path) -> None:
    # Otherwise an OPERATOR could aim the account at a server of their own and have the next connection
    # test or Run hand it the stored token, which nobody may read back through the API.
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        operator = await issue_token(app, ws, "OPERATOR")
        created = await create_account(app, ws, http_account())
        url = accounts_url(ws, created["id"])
        keep_token = {"http-account-token": {"operation": "KEEP"}}

        async def put(config: dict[str, Any], secrets: dict[str, Any], version: int) -> httpx.Response:
            return await app.client.put(
                url,
                headers=operator[1],
                json={"name": created["name"], "config": config, "secrets": secrets, "version": version},
            )

        for moved in (
            {"baseUrl": "https://collector.attacker.example"},
            {"allowedCidrs": ["10.0.0.0/8"]},
            {"tlsVerify": False},
            {"allowRedirects": True},
        ):
            refused = await put({**created["config"], **moved}, keep_token, 1)
            assert refused.status_code == 400, refused.text
            problem = refused.json()
            assert [(e["field"], e["code"]) for e in problem["errors"]] == [
                ("/secrets/http-account-token", "SECRET_REENTRY_REQUIRED"),
            ]
            assert f"config/{next(iter(moved))}" in problem["errors"][0]["message"]
        resolver = await _resolver(app, ws, created["id"])
        assert await _reveal(resolver, "http-account-token") == SECRET_VALUE

        # A change that keeps the destination may KEEP; a move that sends the secrets again is accepted.
        timeout = await put({**created["config"], "requestTimeout": "PT9S"}, keep_token, 1)
        assert timeout.status_code == 200, timeout.text
        moved_with_secrets = await put(
            {**created["config"], "baseUrl": "https://api2.example.com"},
            {"http-account-token": {"operation": "REPLACE", "value": OTHER_SECRET_VALUE}},
            2,
        )
        assert moved_with_secrets.status_code == 200, moved_with_secrets.text


async def test_keep_of_an_unknown_secret_is_refused(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        body = http_account(value=None)
        body["secrets"] = {"http-account-token": {"operation": "KEEP"}}
        response = await app.client.post(accounts_url(ws), headers=app.admin(), json=body)
        assert response.status_code == 400
        fields = {(e["field"], e["code"]) for e in response.json()["errors"]}
        assert ("/secrets/http-account-token", "SECRET_NOT_CONFIGURED") in fields


async def test_a_secret_name_that_is_no_name_is_refused_without_being_repeated(tmp_path: Path) -> None:
    long_name = "k" * 20_000
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        body = http_account()
        body["config"]["auth"]["token"] = {"$secret": long_name}
        body["secrets"] = {long_name: {"operation": "REPLACE", "value": SECRET_VALUE}}
        response = await app.client.post(accounts_url(ws), headers=app.admin(), json=body)

    assert response.status_code == 400
    assert ("/secrets", "INVALID_NAME") in {(e["field"], e["code"]) for e in response.json()["errors"]}
    assert "k" * 300 not in response.text
    assert len(response.content) < 2_000


async def test_a_reference_that_fixes_a_version_or_namespace_is_refused(tmp_path: Path) -> None:
    """The Service keeps each secret's version and moves it on with every REPLACE: a fixed version was
    saved and then failed every run and connection test with "secret not configured"."""
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        answers = []
        for ref in (
            {"$secret": "http-account-token", "version": "3"},
            {"$secret": "http-account-token", "namespace": "elsewhere"},
        ):
            body = http_account()
            body["config"]["auth"]["token"] = ref
            answers.append(await app.client.post(accounts_url(ws), headers=app.admin(), json=body))
        plain = http_account()
        plain["config"]["auth"]["token"] = {"$secret": "http-account-token", "namespace": "default"}
        accepted = await app.client.post(accounts_url(ws), headers=app.admin(), json=plain)
    for refused in answers:
        assert refused.status_code == 400, refused.text
        assert ("/config/auth/token", "SECRET_REF_INVALID") in {
            (e["field"], e["code"]) for e in refused.json()["errors"]
        }
    assert accepted.status_code == 201, accepted.text


async def test_removing_a_referenced_secret_is_refused(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        created = await create_account(app, ws, http_account())
        response = await app.client.put(
            accounts_url(ws, created["id"]),
            headers=app.admin(),
            json={"name": created["name"], "config": created["config"], "version": 1},
        )
        assert response.status_code == 400
        assert response.json()["errors"][0]["field"] == "/config/auth/token"
        resolver = await _resolver(app, ws, created["id"])
        assert await _reveal(resolver, "http-account-token") == SECRET_VALUE


async def test_resolver_refuses_unknown_names_and_stale_versions(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        created = await create_account(app, ws, http_account())
        resolver = await _resolver(app, ws, created["id"])
        assert SECRET_VALUE not in repr(resolver)
        with pytest.raises(SecretNotFoundError):
            await resolver.resolve(SecretRef("default", "spare"))
        with pytest.raises(SecretNotFoundError):
            await resolver.resolve(SecretRef("default", "http-account-token", version="7"))
        value = await resolver.resolve(SecretRef("default", "http-account-token", version="1"))
        assert SECRET_VALUE not in repr(value)
        value.close()


def _forms(secret: str) -> list[bytes]:
    raw = secret.encode()
    return [raw, raw.hex().encode(), base64.b64encode(raw), base64.urlsafe_b64encode(raw).rstrip(b"=")]


def _database_path(app: RunningApp) -> Path:
    url = app.runtime.config.database.url
    assert url.startswith("sqlite+aiosqlite:///")
    return Path(url.removeprefix("sqlite+aiosqlite:///"))


def _assert_not_in_database(path: Path, secrets: list[str]) -> None:
    files = [p for p in (path, Path(f"{path}-wal"), Path(f"{path}-shm")) if p.exists()]
    for file in files:
        data = file.read_bytes()
        for secret in secrets:
            for form in _forms(secret):
                assert form not in data, f"a form of a secret is in {file.name}"
    connection = sqlite3.connect(path)
    try:
        tables = [r[0] for r in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        assert "secret_record" in tables
        for table in tables:
            for row in connection.execute(f'SELECT * FROM "{table}"'):
                for value in row:
                    data = value if isinstance(value, bytes) else str(value).encode()
                    for secret in secrets:
                        assert not any(form in data for form in _forms(secret)), f"a secret is in {table}"
    finally:
        connection.close()


async def test_secret_values_never_leave_the_service(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    responses: list[httpx.Response] = []
    async with (
        vendor_server(OTHER_SECRET_VALUE) as vendor,
        service(tmp_path, catalog=loopback_catalog()) as app,
    ):
        ws = await default_workspace(app)
        headers = {**app.admin(), "Idempotency-Key": "secret-flow-1"}
        body = http_account(base_url=vendor.base_url)
        first = await app.client.post(accounts_url(ws), headers=headers, json=body)
        responses.append(first)
        responses.append(await app.client.post(accounts_url(ws), headers=headers, json=body))
        account_url = accounts_url(ws, first.json()["id"])
        responses.append(await app.client.get(account_url, headers=app.admin()))
        responses.append(await app.client.get(accounts_url(ws), headers=app.admin()))
        update = {
            "name": "orders",
            "config": first.json()["config"],
            "secrets": {"http-account-token": {"operation": "REPLACE", "value": OTHER_SECRET_VALUE}},
            "version": 1,
        }
        responses.append(await app.client.put(account_url, headers=app.admin(), json=update))
        # A refused write (stale version) must not echo the value it carried either.
        responses.append(await app.client.put(account_url, headers=app.admin(), json=update))
        # The connection test opens the (replaced) secret in memory and sends it to the vendor only.
        tested = await app.client.post(f"{account_url}/connection-test", headers=app.admin())
        assert tested.json()["ok"] is True
        assert vendor.seen_authorization == [f"Bearer {OTHER_SECRET_VALUE}"]
        responses.append(tested)
        responses.append(await app.client.get(f"{API}/workspaces/{ws}/audit-events", headers=app.admin()))
        assert [r.status_code for r in responses] == [201, 201, 200, 200, 200, 409, 200, 200]
        for response in responses:
            for secret in (SECRET_VALUE, OTHER_SECRET_VALUE):
                assert secret not in response.text
        database = _database_path(app)
        _assert_not_in_database(database, [SECRET_VALUE, OTHER_SECRET_VALUE])
    _assert_not_in_database(database, [SECRET_VALUE, OTHER_SECRET_VALUE])
    assert caplog.records, "the flow produced no log records to inspect"
    for secret in (SECRET_VALUE, OTHER_SECRET_VALUE):
        assert secret not in caplog.text


async def test_a_key_file_made_unsafe_while_running_is_503_until_it_is_fixed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The Service reads the key file again to seal: opened to others meanwhile, it refuses to use it
    (fail closed) with a 503 that does not say where the file is, and recovers once it is fixed."""
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        key_file = app.runtime.config.secrets.master_key_file
        key_file.chmod(0o644)
        refused = await app.client.post(accounts_url(ws), headers=app.admin(), json=http_account("first"))
        key_file.chmod(0o600)
        accepted = await app.client.post(accounts_url(ws), headers=app.admin(), json=http_account("second"))

    assert refused.status_code == 503
    assert refused.json()["code"] == "SERVICE_NOT_READY"
    assert str(key_file) not in refused.text
    assert accepted.status_code == 201, accepted.text
    logged = [r for r in caplog.records if getattr(r, "event", None) == "MASTER_KEY_UNAVAILABLE"]
    assert len(logged) == 1
    assert logged[0].exc_info is None
