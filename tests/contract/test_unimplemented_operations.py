"""Operations whose handler is not written yet answer 501 problem+json; this list only ever shrinks.

When a handler lands, remove its operationId here (the test fails until you do, so the list stays true).
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.helpers_app import running_app, standalone_config
from wepush.server.composition import load_openapi
from wepush.server.composition._resolver import unimplemented_operations

#: Still answering 501. Agents, enrollment and the agent JSON API belong to the remote-agent work;
#: schedules to the scheduler work.
EXPECTED_UNIMPLEMENTED = {
    "commitLeaseArtifact",
    "createArtifactUploadPlan",
    "createEnrollmentToken",
    "createSchedule",
    "deleteSchedule",
    "disableAgent",
    "enrollAgent",
    "getAgent",
    "getLeaseAudience",
    "getLeaseSnapshot",
    "getSchedule",
    "listAgents",
    "listSchedules",
    "rotateAgentCredential",
    "updateSchedule",
    "uploadLeaseArtifactContent",
}


def test_the_list_of_unimplemented_operations_is_current() -> None:
    assert set(unimplemented_operations(load_openapi())) == EXPECTED_UNIMPLEMENTED


async def test_an_unimplemented_operation_answers_501_problem(tmp_path: Path) -> None:
    spec = load_openapi()
    gets = sorted(
        (path, item["get"]["operationId"])
        for path, item in spec["paths"].items()
        if "get" in item
        and item["get"]["operationId"] in EXPECTED_UNIMPLEMENTED
        and item["get"].get("security") != []
        and not path.startswith("/internal/")
    )
    if not gets:
        # Nothing left to probe over GET: the list above is then down to non-GET operations.
        assert all(op not in {o for _, o in gets} for op in EXPECTED_UNIMPLEMENTED)
        return
    template, operation_id = gets[0]
    path = re.sub(r"\{[^}]+\}", "01900000-0000-7000-8000-000000000000", template)
    async with running_app(standalone_config(tmp_path)) as app:
        response = await app.client.get(path, headers=app.admin())
    assert response.status_code == 501, operation_id
    assert response.headers["content-type"].startswith("application/problem+json")
    assert response.json()["code"] == "NOT_IMPLEMENTED"
