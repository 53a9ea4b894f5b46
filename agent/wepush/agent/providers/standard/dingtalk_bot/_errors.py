"""How DingTalk custom robot answers map to provider codes and categories.

The robot answers ``{"errcode": 0, "errmsg": "ok"}``. Code 310000 covers every
security-setting failure; the message tells them apart (signature or timestamp,
IP allow list, keyword), so those rows are keyed ``310000:<cause>``.
"""

from __future__ import annotations

from wepush.agent.providers.spi import ErrorCategory as C
from wepush.agent.providers.standard._vendor import ErrorTable, row, transport_rows

__all__ = ["DINGTALK_TABLE"]

DINGTALK_TABLE = ErrorTable(
    "DINGTALK",
    (
        *transport_rows("DINGTALK"),
        row(
            "DINGTALK_RATE_LIMITED",
            C.RATE_LIMITED,
            "more than 20 messages a minute; the robot is throttled",
            "130101",
            "660026",
            "410100",
        ),
        row(
            "DINGTALK_SIGNATURE_REJECTED",
            C.AUTHENTICATION,
            "signature mismatch or a stale timestamp",
            "310000:sign",
        ),
        row(
            "DINGTALK_IP_NOT_ALLOWED",
            C.AUTHORIZATION,
            "the caller's IP is not in the robot's allow list",
            "310000:ip",
        ),
        row(
            "DINGTALK_KEYWORD_MISSING",
            C.INVALID_REQUEST,
            "the message lacks the robot's custom keyword",
            "310000:keyword",
        ),
        row(
            "DINGTALK_SECURITY_CHECK_FAILED",
            C.INVALID_REQUEST,
            "another robot security setting refused it",
            "310000",
        ),
        row(
            "DINGTALK_TOKEN_INVALID", C.AUTHENTICATION, "the access token does not exist", "300001", "400101"
        ),
        row("DINGTALK_ROBOT_STOPPED", C.AUTHORIZATION, "the robot has been stopped", "400102"),
        row(
            "DINGTALK_MESSAGE_INVALID",
            C.INVALID_REQUEST,
            "a parameter or the body was refused",
            "40035",
            "43004",
        ),
        row("DINGTALK_SYSTEM_BUSY", C.TEMPORARY_REMOTE, "the vendor is busy", "-1"),
    ),
)
