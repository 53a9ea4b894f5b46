"""How a background loop tells that a pass failed, without flooding the log.

The Service runs passes in the background (the sweeps, the embedded agent's claimer, heartbeat, renewer
and reaper, the event pollers), and a pass that fails is simply tried again by the next one. Through a
database outage every pass fails the same, expected way for as long as the outage lasts: a traceback per
pass buried the log (several loops, every few seconds) and said nothing the first line had not. So an
outage (``DatabaseUnavailable`` or ``DatabaseBusy``, or a failure raised from one) is one warning without
a traceback when it starts, silence (debug) while it lasts, and one line once a pass succeeds again.

Any other failure is a fault worth its traceback, and gets it the first time. The same fault again (the
same type raised at the same place) is one line with its count: a fault that fails every pass costs a line
a pass, not a traceback a pass, yet is never silent, since nothing says it will pass as an outage does.

This module only decides what to log; the lines go to the logger each loop gives (its module's), through
the Service's redacting formatter like every other line. An outage line names its cause's type, never its
text (a driver's error can quote a statement's parameters); a fault's traceback is redacted as any is.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import Final, NoReturn

from wepush.server.domain import DatabaseBusy, DatabaseUnavailable

__all__ = ["PassFailures", "database_outage", "repeat_every"]

_EVENT_CODE: Final = re.compile(r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+")


def database_outage(error: BaseException) -> DatabaseUnavailable | DatabaseBusy | None:
    """The database outage ``error`` is, or was raised from (``raise … from``); ``None`` for any other
    failure."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, DatabaseUnavailable | DatabaseBusy):
            return current
        seen.add(id(current))
        current = current.__cause__
    return None


@dataclass(slots=True)
class _Stretch:
    """Failed passes in a row."""

    since: float
    """When the first failed (monotonic seconds)."""
    what: str
    """What failed them: the outage ("unavailable", "busy") or the fault's type."""
    fault: tuple[str, str, int] | None = None
    """The fault's type and where it was raised (``None`` for an outage)."""
    count: int = 1


class PassFailures:
    """Tells the failed passes of one background loop; the loop's owner makes one and keeps it.

    ``loop`` names the loop in each line (and in the ``loop`` field); ``event`` is the loop's failure code,
    the ``event`` of its failure lines. Pass ``event`` as a literal: a test checks that every loop's code is
    one, as it checks the literal ``event`` of every log call. A pass that succeeds after failed ones is
    one ``BACKGROUND_PASS_RECOVERED`` line (with ``loop`` and ``failedPasses``).

    A loop whose pass has parts that fail on their own (one run's commands, one run's lease) names each
    part with a ``key`` (``"run <id>"``): a fault is followed per part, so one broken run cannot hide
    another; an outage per loop, since it is the database's and not a part's. :meth:`forget` a part that
    is gone (its run ended), or its failures are kept for good.
    """

    def __init__(
        self,
        logger: logging.Logger,
        loop: str,
        *,
        event: str,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not _EVENT_CODE.fullmatch(event):
            raise ValueError(f"a failure event is an UPPER_SNAKE code, not {event!r}")
        self.loop = loop
        self.event = event
        self._log = logger
        self._clock = clock
        self._outage: _Stretch | None = None
        self._faults: dict[str | None, _Stretch] = {}

    @contextmanager
    def attempt(self, key: str | None = None, *, extra: Mapping[str, object] | None = None) -> Iterator[None]:
        """One pass (or ``key``'s part of one): a failure (any ``Exception``) is told and suppressed, a
        success ends what was told before. Cancellation goes through untouched."""
        try:
            yield
        except Exception as error:
            self.failed(error, key, extra=extra)
        else:
            self.succeeded(key, extra=extra)

    def failed(
        self, error: Exception, key: str | None = None, *, extra: Mapping[str, object] | None = None
    ) -> None:
        fields = {**(extra or {}), "loop": self.loop}
        outage = database_outage(error)
        if outage is not None:
            self._outage_pass(outage, fields)
            return
        label = self._label(key)
        fault = _fault_of(error)
        stretch = self._faults.get(key)
        if stretch is not None and stretch.fault == fault:
            stretch.count += 1
            self._log.warning(
                "%s failed again with the same %s (%d passes in a row); its traceback is at the first",
                label,
                stretch.what,
                stretch.count,
                extra={**fields, "event": self.event},
            )
            return
        # A fault not seen in this stretch yet: its traceback, once. The stretch goes on (and counts on).
        since, count = (stretch.since, stretch.count + 1) if stretch is not None else (self._clock(), 1)
        self._faults[key] = _Stretch(since, type(error).__name__, fault, count)
        self._log.error(
            "%s failed; retrying on the next pass",
            label,
            exc_info=error,
            extra={**fields, "event": self.event},
        )

    def succeeded(self, key: str | None = None, *, extra: Mapping[str, object] | None = None) -> None:
        fields = {**(extra or {}), "loop": self.loop}
        outage, self._outage = self._outage, None
        if outage is not None:
            self._recovered(self.loop, outage, f"the database was {outage.what}", fields)
        fault = self._faults.pop(key, None)
        if fault is not None:
            self._recovered(self._label(key), fault, fault.what, fields)

    def forget(self, key: str) -> None:
        """``key``'s part is gone: what it failed with is no longer followed."""
        self._faults.pop(key, None)

    def _outage_pass(self, outage: DatabaseUnavailable | DatabaseBusy, fields: dict[str, object]) -> None:
        what = "busy" if isinstance(outage, DatabaseBusy) else "unavailable"
        stretch = self._outage
        if stretch is not None:
            stretch.count += 1
            self._log.debug(
                "%s failed again: the database is still %s (%d passes in a row)",
                self.loop,
                what,
                stretch.count,
                extra={**fields, "event": self.event},
            )
            return
        self._outage = _Stretch(self._clock(), what)
        cause = outage.__cause__
        # The driver's error, not SQLAlchemy's wrapper; its type only (see the module text).
        cause = getattr(cause, "orig", None) or cause
        self._log.warning(
            "%s failed: the database is %s%s; retrying, quietly until a pass succeeds again",
            self.loop,
            what,
            f" ({type(cause).__name__})" if cause is not None else "",
            extra={**fields, "event": self.event},
        )

    def _recovered(self, label: str, stretch: _Stretch, cause: str, fields: dict[str, object]) -> None:
        self._log.info(
            "%s succeeded again after %d failed pass(es) over %.1f s (%s)",
            label,
            stretch.count,
            max(0.0, self._clock() - stretch.since),
            cause,
            extra={**fields, "event": "BACKGROUND_PASS_RECOVERED", "failedPasses": stretch.count},
        )

    def _label(self, key: str | None) -> str:
        return self.loop if key is None else f"{key}: {self.loop}"


def _fault_of(error: BaseException) -> tuple[str, str, int]:
    """The same type raised at the same place is the same fault again, whatever its message says (an id,
    a time): where the traceback ends."""
    kind = f"{type(error).__module__}.{type(error).__qualname__}"
    tb = error.__traceback__
    if tb is None:
        return kind, "", 0
    while tb.tb_next is not None:
        tb = tb.tb_next
    return kind, tb.tb_frame.f_code.co_filename, tb.tb_lineno


async def repeat_every(
    interval: timedelta, one_pass: Callable[[], Awaitable[object]], failures: PassFailures
) -> NoReturn:
    """Run ``one_pass`` now and then every ``interval`` until cancelled; ``failures`` tells a failed pass,
    which the next one retries."""
    while True:
        with failures.attempt():
            await one_pass()
        await asyncio.sleep(interval.total_seconds())
