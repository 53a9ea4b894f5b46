"""Which errors say the database cannot be used now (503, retried), and which say a statement was wrong."""

from __future__ import annotations

import sqlite3

import pytest
from sqlalchemy import exc as sa_exc

from wepush.server.infra.db.engine import is_database_unavailable


class _PgError(Exception):
    def __init__(self, sqlstate: str) -> None:
        super().__init__(f"SQLSTATE {sqlstate}")
        self.sqlstate = sqlstate


def _wrapped(cause: Exception) -> sa_exc.DBAPIError:
    return sa_exc.OperationalError("INSERT …", {}, cause)


@pytest.mark.parametrize(
    "error",
    [
        _wrapped(sqlite3.OperationalError("database or disk is full")),
        _wrapped(sqlite3.OperationalError("attempt to write a readonly database")),
        _wrapped(sqlite3.OperationalError("disk I/O error")),
        _wrapped(_PgError("08006")),  # connection failure
        _wrapped(_PgError("53300")),  # too many connections
        _wrapped(_PgError("57P01")),  # the server is shutting down
        _wrapped(ConnectionResetError("connection lost")),
        sa_exc.TimeoutError("QueuePool limit reached"),
    ],
)
def test_an_outage_is_unavailability(error: Exception) -> None:
    assert is_database_unavailable(error)


@pytest.mark.parametrize(
    "error",
    [
        _wrapped(sqlite3.OperationalError("no such table: account")),
        sa_exc.IntegrityError("INSERT …", {}, _PgError("23505")),
        _wrapped(_PgError("42P01")),  # undefined table: a statement's fault
        FileNotFoundError("artifact.json"),  # inside a transaction, any file's
    ],
)
def test_a_wrong_statement_or_another_failure_is_not(error: Exception) -> None:
    assert not is_database_unavailable(error)


def test_a_refused_connection_counts_while_connecting() -> None:
    assert is_database_unavailable(ConnectionRefusedError(111, "refused"), connecting=True)
    assert not is_database_unavailable(ConnectionRefusedError(111, "refused"))
