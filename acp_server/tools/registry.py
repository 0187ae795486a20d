"""The tools every session offers, in the order the model sees them."""

from __future__ import annotations

from acp_server.tools.base import Tool


def default_tools() -> list[Tool]:
    from acp_server.tools import fs

    return [fs.READ_FILE]
