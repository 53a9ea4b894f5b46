"""Which accesses only SYSTEM_ADMIN allows (and must therefore be audited even when they only read)."""

from __future__ import annotations

import pytest

from wepush.server.application.auth import Principal, PrincipalType, Role
from wepush.server.application.authorization import authorize, granted_by_system_admin

WS = "ws-1"


def _user(*, system_admin: bool, role: Role | None = None) -> Principal:
    return Principal(
        type=PrincipalType.USER,
        id="u-1",
        roles={WS: role} if role is not None else {},
        system_admin=system_admin,
    )


@pytest.mark.parametrize(
    ("principal", "minimum", "expected"),
    [
        (_user(system_admin=True), Role.VIEWER, True),  # no role of its own in the workspace
        (_user(system_admin=True, role=Role.VIEWER), Role.ADMIN, True),  # its own role is too weak
        (_user(system_admin=True, role=Role.ADMIN), Role.ADMIN, False),  # its own role suffices
        (_user(system_admin=True, role=Role.OPERATOR), Role.OPERATOR, False),
        (_user(system_admin=False, role=Role.ADMIN), Role.VIEWER, False),
        (Principal(type=PrincipalType.SYSTEM, id="service", system_admin=True), Role.VIEWER, False),
    ],
)
def test_only_access_beyond_the_callers_own_role_counts_as_system_admin_access(
    principal: Principal, minimum: Role, expected: bool
) -> None:
    assert granted_by_system_admin(principal, WS, minimum) is expected


def test_a_system_admin_without_a_role_is_authorized_as_admin() -> None:
    assert authorize(_user(system_admin=True), WS, Role.ADMIN) is Role.ADMIN
