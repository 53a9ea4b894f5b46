"""Every standard provider passes the shared provider contract suite against its local vendor."""

from __future__ import annotations

import pytest

from wepush.agent.providers.spi import ErrorCategory
from wepush.agent.providers.testing import CONTRACT_CHECKS, ContractCheck

from ._stages import Stage, contract_subject


@pytest.mark.parametrize("check", CONTRACT_CHECKS, ids=str)
async def test_standard_provider_honours_the_provider_contract(check: ContractCheck, stage: Stage) -> None:
    await check(contract_subject(stage))


async def test_every_category_a_standard_provider_reports_is_claimed_and_provoked(stage: Stage) -> None:
    subject = contract_subject(stage)
    # Everything except INTERNAL (a provider defect, unit-tested) is provoked from outside.
    assert subject.claimed_categories | {ErrorCategory.INTERNAL} == stage.table.categories
    assert set(subject.scenarios) == set(subject.claimed_categories)
