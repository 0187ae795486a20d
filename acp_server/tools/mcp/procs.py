"""The stdio MCP server processes this agent started, so that none outlives it.

Each server runs in a process group of its own; its group id is kept here while it runs. At
exit (stdin EOF, SIGTERM, or the agent failing) `end_all` stops every group still running:
leftover MCP processes after the editor closes are a common complaint about other agents. No
`mcp` import here: the registry calls `end_all` whether or not a session used MCP.
"""

from __future__ import annotations

import atexit
import logging

from acp_server.tools.commands.procgroup import end_groups

log = logging.getLogger(__name__)

END_GRACE = 0.3  # seconds between SIGTERM and SIGKILL at exit (the agent is going away)

_running: set[int] = set()


def started(pgid: int) -> None:
    _running.add(pgid)


def ended(pgid: int) -> None:
    _running.discard(pgid)


def running() -> frozenset[int]:
    return frozenset(_running)


def end_all() -> None:
    """SIGTERM every group still running, then SIGKILL what is left after END_GRACE."""
    groups = list(_running)
    if not groups:
        return
    log.info("ending %d MCP server process group(s)", len(groups))
    end_groups(_running, END_GRACE)


atexit.register(end_all)  # also when the agent fails on its way out
