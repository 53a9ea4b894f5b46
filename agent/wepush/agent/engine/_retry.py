"""Retry rules per error category, backoff delays, and the item state a final attempt maps to."""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import timedelta

from ._enums import ErrorCategory, ItemState
from ._policies import NEVER_RETRIED, RetryPolicy
from ._results import ProviderResult

__all__ = ["AUTH_CATEGORIES", "RetryRules", "item_state_for"]

AUTH_CATEGORIES = frozenset({ErrorCategory.AUTHENTICATION, ErrorCategory.AUTHORIZATION})

# The provider may have delivered the message: the outcome cannot be called a failure, and an item
# ending FAILED would be sent twice by "resend the failed items". Providers say "may have been
# delivered" with UNKNOWN (a connection lost after the request went out, an unreadable answer) or
# TIMEOUT; NETWORK means nothing reached the vendor (refused, unresolvable, TLS failed), so it is FAILED.
_AMBIGUOUS = frozenset({ErrorCategory.TIMEOUT, ErrorCategory.CANCELLED, ErrorCategory.UNKNOWN})

# Retried only when the policy lists them explicitly (the default policy does not).
_OPT_IN = frozenset({ErrorCategory.INTERNAL, ErrorCategory.UNKNOWN})


def item_state_for(result: ProviderResult) -> ItemState:
    if result.success:
        return ItemState.SUCCEEDED
    if result.category in _AMBIGUOUS:
        return ItemState.UNKNOWN
    return ItemState.FAILED


@dataclass(slots=True)
class RetryRules:
    """Decides whether another attempt is allowed and how long to wait before it."""

    policy: RetryPolicy
    safe_to_retry_on_timeout: bool
    rng: random.Random

    def should_retry(self, result: ProviderResult, attempt: int) -> bool:
        """Deadlines are checked by the caller; this covers category, policy and attempt count."""
        if result.success or result.category is None or attempt >= self.policy.max_attempts:
            return False
        category = result.category
        if category in NEVER_RETRIED or category not in self.policy.retry_on:
            return False
        if category is ErrorCategory.TIMEOUT:
            return self.safe_to_retry_on_timeout
        if category in _OPT_IN:
            return True
        # RATE_LIMITED, TEMPORARY_REMOTE, NETWORK: the provider may veto a retry it knows to be futile.
        return result.retryable

    def delay(self, result: ProviderResult, attempt: int) -> timedelta:
        """Provider ``retry_after`` wins for RATE_LIMITED; otherwise exponential backoff plus jitter, and
        never sooner than a ``retry_after`` the provider gave (a 503 with Retry-After: the server said
        when it expects to be back, and calling earlier only adds to its load)."""
        requested = None if result.retry_after is None else max(timedelta(0), result.retry_after)
        if result.category is ErrorCategory.RATE_LIMITED and requested is not None:
            return requested
        jitter = self.policy.jitter.total_seconds()
        # Jitter spreads retries; it is not security-sensitive, so a seedable PRNG is what tests need.
        extra = self.rng.uniform(0.0, jitter) if jitter > 0 else 0.0
        backoff = self.policy.backoff(attempt) + timedelta(seconds=extra)
        return backoff if requested is None else max(backoff, requested)
