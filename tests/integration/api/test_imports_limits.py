"""Import limits: size, rows, columns and line length stop the upload with 413; long fields reject rows."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

from sqlalchemy import func, select

from tests.helpers_app import RunningApp
from tests.integration.api._support import default_workspace, service
from tests.integration.api._support_content import create_audience, expect, import_url, start_import, upload
from wepush.server.infra.db.tables import audience_import_row

LIMITS: dict[str, str] = {
    "WEPUSH_IMPORTS_MAX_ROWS": "3",
    "WEPUSH_IMPORTS_MAX_COLUMNS": "3",
    "WEPUSH_IMPORTS_MAX_FIELD_LENGTH": "8",
}


async def _refused(
    app: RunningApp,
    ws: str,
    body: bytes | AsyncIterator[bytes],
    code: str,
    *,
    audience_name: str = "customers",
) -> str:
    """Upload ``body``, expect 413 with ``code``; return the failure reason the import now shows."""
    audience = await create_audience(app, ws, audience_name)
    started = await start_import(app, ws, audience["id"], itemIdField="mobile")
    response = await upload(app, ws, audience["id"], started["id"], body)
    assert response.status_code == 413, response.text
    assert response.json()["code"] == code
    failed = expect(
        await app.client.get(import_url(ws, audience["id"], started["id"]), headers=app.admin()), 200
    )
    assert failed["state"] == "FAILED"
    assert failed["counts"]["totalRows"] == 0
    # The rows staged before the limit was hit are gone (deleted in batches after the import failed).
    assert app.runtime.engine is not None
    async with app.runtime.engine.connect() as connection:
        staged = await connection.scalar(
            select(func.count()).where(audience_import_row.c.import_id == started["id"])
        )
    assert staged == 0
    preview = await app.client.get(
        import_url(ws, audience["id"], started["id"], "preview"), headers=app.admin()
    )
    assert preview.status_code == 409
    return str(failed["failureReason"])


async def test_more_rows_than_allowed_fail_the_import(tmp_path: Path) -> None:
    async with service(tmp_path, catalog=None, **LIMITS) as app:
        ws = await default_workspace(app)
        body = b"mobile,name\n" + b"".join(b"%d,n\n" % i for i in range(1, 6))
        reason = await _refused(app, ws, body, "IMPORT_LIMIT_EXCEEDED")
        assert "more than 3 rows" in reason


async def test_more_columns_than_allowed_fail_the_import(tmp_path: Path) -> None:
    async with service(tmp_path, catalog=None, **LIMITS) as app:
        ws = await default_workspace(app)
        reason = await _refused(app, ws, b"mobile,name,a,b\n1,n,a,b\n", "IMPORT_LIMIT_EXCEEDED")
        assert "at most 3" in reason


async def test_a_line_without_end_fails_the_import_instead_of_being_buffered(tmp_path: Path) -> None:
    async with service(tmp_path, catalog=None, **LIMITS) as app:
        ws = await default_workspace(app)

        async def endless_line() -> AsyncIterator[bytes]:
            yield b"mobile,name\n1,"
            for _ in range(40):
                yield b"x" * 4096

        reason = await _refused(app, ws, endless_line(), "IMPORT_LIMIT_EXCEEDED")
        assert "longer than" in reason


async def test_a_long_line_fails_the_import_whether_it_arrives_whole_or_in_pieces(tmp_path: Path) -> None:
    """One line over columns × (field length + 3) characters (819,800 by default): a client that sends the
    file in one piece (httpx) and one that sends it in small pieces (curl) get the same 413."""
    body = b"mobile,name\n1," + b"x" * 900_000 + b"\n2,b\n"

    async def pieces() -> AsyncIterator[bytes]:
        for start in range(0, len(body), 16 * 1024):
            yield body[start : start + 16 * 1024]

    async with service(tmp_path, catalog=None) as app:
        ws = await default_workspace(app)
        whole = await _refused(app, ws, body, "IMPORT_LIMIT_EXCEEDED")
        in_pieces = await _refused(app, ws, pieces(), "IMPORT_LIMIT_EXCEEDED", audience_name="again")

    assert whole == in_pieces == "line 2 is longer than 819800 characters (or opens a quote never closed)"


async def test_a_field_over_the_length_limit_rejects_only_its_row(tmp_path: Path) -> None:
    async with service(tmp_path, catalog=None, **LIMITS) as app:
        ws = await default_workspace(app)
        audience = await create_audience(app, ws)
        started = await start_import(app, ws, audience["id"], itemIdField="mobile")
        body = b"mobile,name\n1,12345678\n2,123456789\n"
        staged = expect(await upload(app, ws, audience["id"], started["id"], body), 200)
        assert staged["counts"] == {"totalRows": 2, "acceptedRows": 1, "rejectedRows": 1, "duplicateRows": 0}
        preview = expect(
            await app.client.get(
                import_url(ws, audience["id"], started["id"], "preview"), headers=app.admin()
            ),
            200,
        )
        assert [(r["lineNumber"], r["code"]) for r in preview["rejected"]] == [(3, "FIELD_TOO_LONG")]


async def test_a_quoted_value_longer_than_csvs_own_limit_rejects_only_its_record(tmp_path: Path) -> None:
    """A quoted note over 128 Ki characters (csv's default field limit) used to end early, and the lines
    inside it were read as rows: a phone number in the note became a recipient."""
    async with service(tmp_path, catalog=None) as app:
        ws = await default_workspace(app)
        audience = await create_audience(app, ws)
        started = await start_import(
            app, ws, audience["id"], itemIdField="mobile", fieldMapping={"mobile": "mobile", "note": "note"}
        )
        note = "x" * 140_000 + "\n13900000009,injected\nend of note"
        body = f'mobile,note\n13800000001,"{note}"\n13800000002,ok\n'.encode()
        staged = expect(await upload(app, ws, audience["id"], started["id"], body), 200)
        preview = expect(
            await app.client.get(
                import_url(ws, audience["id"], started["id"], "preview"), headers=app.admin()
            ),
            200,
        )
    assert staged["counts"] == {"totalRows": 2, "acceptedRows": 1, "rejectedRows": 1, "duplicateRows": 0}
    assert [r["itemId"] for r in preview["accepted"]] == ["13800000002"]
    assert [(r["lineNumber"], r["code"]) for r in preview["rejected"]] == [(2, "FIELD_TOO_LONG")]
    assert "note" in preview["rejected"][0]["reason"]


async def test_a_body_over_the_byte_limit_is_payload_too_large(tmp_path: Path) -> None:
    async with service(tmp_path, WEPUSH_IMPORTS_MAX_BYTES="10000") as app:
        ws = await default_workspace(app)

        async def chunks() -> AsyncIterator[bytes]:
            yield b"mobile,name\n"
            for i in range(100):
                yield b"".join(b"%d%03d,n\n" % (i, j) for j in range(100))

        reason = await _refused(app, ws, chunks(), "PAYLOAD_TOO_LARGE")
        assert "10000 bytes" in reason


async def test_a_declared_length_over_the_byte_limit_is_refused_before_reading_and_the_import_waits(
    tmp_path: Path,
) -> None:
    """The body says its size up front: refused at once (no waiting for gigabytes to arrive), and the
    import, which read nothing, still takes a file that fits."""
    async with service(tmp_path, WEPUSH_IMPORTS_MAX_BYTES="10000") as app:
        ws = await default_workspace(app)
        audience = await create_audience(app, ws)
        started = await start_import(app, ws, audience["id"], itemIdField="mobile")
        too_big = b"mobile,name\n" + b"".join(b"%07d,n\n" % i for i in range(2000))
        refused = await upload(app, ws, audience["id"], started["id"], too_big)
        waiting = expect(
            await app.client.get(import_url(ws, audience["id"], started["id"]), headers=app.admin()), 200
        )
        fits = expect(await upload(app, ws, audience["id"], started["id"], b"mobile,name\n1,n\n"), 200)

    assert refused.status_code == 413
    assert refused.json()["code"] == "PAYLOAD_TOO_LARGE"
    assert "10000 bytes" in refused.json()["detail"]
    assert waiting["state"] == "CREATED"
    assert (fits["state"], fits["counts"]["acceptedRows"]) == ("STAGED", 1)
