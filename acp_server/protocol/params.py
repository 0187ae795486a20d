"""Checking inbound ACP params: against our schemas in `schemas/acp/`, plus path rules."""

from __future__ import annotations

import os
from pathlib import Path

from acp_server import schemas
from acp_server.errors import InvalidParams
from acp_server.wire.jsonrpc import Params


def check(method: str, schema: str, params: Params) -> None:
    found = schemas.problems(schema, params)
    if found:
        raise InvalidParams(
            f"Invalid params for {method}: " + "; ".join(found) + ".",
            {"errors": found},
        )


def absolute_dir(value: str, field: str) -> Path:
    if not os.path.isabs(value):
        raise InvalidParams(
            f"Invalid params: `{field}` must be an absolute path, got {value!r}.",
            {"field": field},
        )
    return Path(os.path.normpath(value))


def directories(params: Params) -> tuple[Path, ...]:
    """`additionalDirectories`, each absolute."""
    return tuple(
        absolute_dir(d, f"additionalDirectories[{i}]")
        for i, d in enumerate(params.get("additionalDirectories") or [])
    )
