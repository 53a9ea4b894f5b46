"""A unit-of-work factory a test puts between the code under test and the real one, to step into chosen
repository statements (fail them, note them, hold them at a gate) or to act once a unit of work has ended.

A test subclasses :class:`InterceptingUnitOfWork` and says in the subclass where it steps in and what it
does there; everything else (the units themselves, ``concurrent``, ``reader_beside_writer``, …) is the
real factory's.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import Any, cast

from wepush.server.domain import UnitOfWork, UnitOfWorkFactory

Statement = tuple[str, str]
"""A repository statement: the unit of work's repository attribute and its method, ("leases", "release")."""
Proceed = Callable[[], Awaitable[Any]]
"""The statement as the caller called it: awaiting it runs the real one."""


class InterceptedUnit:
    """One unit of work the factory handed out, as its hooks see it (the same object from the unit's
    first intercepted statement to its end, so a hook may remember it)."""

    def __init__(self, factory: InterceptingUnitOfWork, inner: UnitOfWork, read_only: bool) -> None:
        self._factory = factory
        self._inner = inner
        self.read_only = read_only

    async def __aenter__(self) -> Any:
        unit = await self._inner.__aenter__()
        for repository, method in self._factory.statements:
            self._intercept(getattr(unit, repository), (repository, method))
        return unit

    def _intercept(self, target: Any, statement: Statement) -> None:
        real: Callable[..., Awaitable[Any]] = getattr(target, statement[1])

        async def intercepted(*args: Any, **kwargs: Any) -> Any:
            return await self._factory.around(self, statement, lambda: real(*args, **kwargs))

        setattr(target, statement[1], intercepted)

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self._inner.__aexit__(kind, exc, tb)
        await self._factory.after(self, committed=kind is None)


class InterceptingUnitOfWork:
    """The real unit-of-work factory, with a test's hand in every unit of work it opens.

    ``statements`` are the repository statements :meth:`around` is called in place of; :meth:`after`
    is called once a unit of work has ended (``committed``: without an exception). Both do nothing more
    than the real factory unless a subclass overrides them.
    """

    def __init__(self, inner: UnitOfWorkFactory, statements: Iterable[Statement] = ()) -> None:
        self.inner = inner
        self.statements = tuple(statements)

    def __call__(self, *, read_only: bool = False) -> UnitOfWork:
        return cast(UnitOfWork, InterceptedUnit(self, self.inner(read_only=read_only), read_only))

    async def around(self, unit: InterceptedUnit, statement: Statement, proceed: Proceed) -> Any:
        """Called instead of ``statement`` in ``unit``; ``await proceed()`` runs the real one."""
        return await proceed()

    async def after(self, unit: InterceptedUnit, *, committed: bool) -> None:
        """Called once ``unit`` has ended (committed or rolled back) without failing to."""

    @property
    def concurrent(self) -> bool:
        return self.inner.concurrent

    @property
    def writers_side_by_side(self) -> bool:
        return self.inner.writers_side_by_side

    def reader_beside_writer(self) -> AbstractAsyncContextManager[tuple[UnitOfWork | None, UnitOfWork]]:
        return self.inner.reader_beside_writer()
