"""How Aliyun SMS (dysmsapi) answers map to provider codes and categories.

Business results come as HTTP 200 with ``{"Code": "OK" | "isv.…"}``; gateway
errors (signature, AccessKey, throttling) as HTTP 4xx/5xx with a ``Code``.
"""

from __future__ import annotations

from wepush.agent.providers.spi import ErrorCategory as C
from wepush.agent.providers.standard._vendor import ErrorTable, row, transport_rows

__all__ = ["ALIYUN_SMS_TABLE"]

ALIYUN_SMS_TABLE = ErrorTable(
    "ALIYUN_SMS",
    (
        *transport_rows("ALIYUN_SMS"),
        row(
            "ALIYUN_SMS_RATE_LIMITED",
            C.RATE_LIMITED,
            "per-number flow control or API throttling",
            "isv.BUSINESS_LIMIT_CONTROL",
            "isv.DAY_LIMIT_CONTROL",
            "Throttling.User",
            "Throttling.Api",
            "Throttling",
        ),
        row(
            "ALIYUN_SMS_MOBILE_INVALID",
            C.RECIPIENT_INVALID,
            "the vendor refused the phone number",
            "isv.MOBILE_NUMBER_ILLEGAL",
        ),
        row(
            "ALIYUN_SMS_CREDENTIALS_REJECTED",
            C.AUTHENTICATION,
            "unknown or disabled AccessKey, or the signature did not verify",
            "InvalidAccessKeyId.NotFound",
            "InvalidAccessKeyId.Inactive",
            "InvalidAccessKeyId",
            "SignatureDoesNotMatch",
            "IncompleteSignature",
            "isv.ACCOUNT_NOT_EXISTS",
        ),
        row(
            "ALIYUN_SMS_REQUEST_EXPIRED",
            C.AUTHENTICATION,
            "x-acs-date is too far from the vendor's clock",
            "InvalidTimeStamp.Expired",
        ),
        row(
            "ALIYUN_SMS_NONCE_REUSED",
            C.TEMPORARY_REMOTE,
            "the signature nonce was seen before; a retry uses a new one",
            "SignatureNonceUsed",
        ),
        row(
            "ALIYUN_SMS_FORBIDDEN",
            C.AUTHORIZATION,
            "the RAM user, IP or account may not send",
            "Forbidden.RAM",
            "isv.RAM_PERMISSION_DENY",
            "isv.DENY_IP_RANGE",
            "isv.ACCOUNT_ABNORMAL",
            "isv.OUT_OF_SERVICE",
        ),
        row(
            "ALIYUN_SMS_BALANCE_INSUFFICIENT",
            C.PERMANENT_REMOTE,
            "the account balance is used up",
            "isv.AMOUNT_NOT_ENOUGH",
        ),
        row(
            "ALIYUN_SMS_TEMPLATE_INVALID",
            C.INVALID_REQUEST,
            "sign name, template or its parameters were refused",
            "isv.SMS_TEMPLATE_ILLEGAL",
            "isv.SMS_SIGNATURE_ILLEGAL",
            "isv.SMS_SIGNATURE_SCENE_ILLEGAL",
            "isv.TEMPLATE_MISSING_PARAMETERS",
            "isv.TEMPLATE_PARAMS_ILLEGAL",
            "isv.INVALID_PARAMETERS",
            "isv.INVALID_JSON_PARAM",
            "isv.PARAM_LENGTH_LIMIT",
            "isv.EXTEND_CODE_ERROR",
            "isv.MOBILE_COUNT_OVER_LIMIT",
        ),
        row(
            "ALIYUN_SMS_CONTENT_BLOCKED",
            C.INVALID_REQUEST,
            "the text contains blocked keywords",
            "isv.BLACK_KEY_CONTROL_LIMIT",
        ),
        row(
            "ALIYUN_SMS_SYSTEM_ERROR",
            C.TEMPORARY_REMOTE,
            "a vendor-side failure",
            "isp.SYSTEM_ERROR",
            "ServiceUnavailable",
            "InternalError",
        ),
    ),
)
