"""The one key scheme of every artifact store: ``<owner kind>/<owner id>/<artifact id>.<extension>``.

Keys are built from opaque ids only, never from names or file names a user typed, and every key a store
is handed back is checked against the same pattern, so no key can leave its root or prefix."""

from __future__ import annotations

import re
from typing import Final

from wepush.server.domain import ArtifactOwnerType

__all__ = ["GeneratedKeys", "artifact_key", "checked_key"]

_OWNER_DIRS: Final = {
    ArtifactOwnerType.RUN: "runs",
    ArtifactOwnerType.AUDIENCE_SNAPSHOT: "audiences",
    ArtifactOwnerType.IMPORT: "imports",
}
_ID: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]{0,63}$")
_EXTENSION: Final = re.compile(r"^[a-z0-9]{1,8}$")
_KEY: Final = re.compile(
    r"^(runs|audiences|imports)/[A-Za-z0-9][A-Za-z0-9-]{0,63}/[A-Za-z0-9][A-Za-z0-9-]{0,63}\.[a-z0-9]{1,8}$"
)


def artifact_key(owner_type: ArtifactOwnerType, owner_id: str, artifact_id: str, extension: str) -> str:
    # Ids are globally unique and the artifact's row keeps its workspace.
    if not _ID.match(owner_id) or not _ID.match(artifact_id) or not _EXTENSION.match(extension):
        raise ValueError("artifact keys are built from opaque ids and a short lower-case extension")
    return f"{_OWNER_DIRS[owner_type]}/{owner_id}/{artifact_id}.{extension}"


def checked_key(key: str) -> str:
    if not _KEY.match(key):
        raise ValueError("not a key this store generated")
    return key


class GeneratedKeys:
    """``new_key`` of the ArtifactStore port, the same for every store (the workspace is not part of it)."""

    def new_key(
        self,
        *,
        workspace_id: str,
        owner_type: ArtifactOwnerType,
        owner_id: str,
        artifact_id: str,
        extension: str,
    ) -> str:
        return artifact_key(owner_type, owner_id, artifact_id, extension)
