"""The tools every session offers, in the order the model sees them."""

from __future__ import annotations

from acp_server.settings import FetchSettings
from acp_server.tools.base import Tool


def default_tools(fetch: FetchSettings | None = None) -> list[Tool]:
    """`fetch` says whether fetch_url is offered and what it may reach (default: offered,
    public addresses only)."""
    from acp_server.tools import plan, web
    from acp_server.tools.commands import job_tools, shell
    from acp_server.tools.files import edit, fs
    from acp_server.tools.search import glob

    fetch = fetch or FetchSettings()
    return [
        fs.READ_FILE,
        fs.LIST_DIRECTORY,
        glob.GLOB,
        glob.GREP,
        edit.EDIT_FILE,
        fs.WRITE_FILE,
        shell.RUN_COMMAND,
        job_tools.COMMAND_OUTPUT,
        job_tools.STOP_COMMAND,
        *([web.fetch_tool(bool(fetch.allow_private))] if fetch.enabled is not False else []),
        plan.UPDATE_PLAN,
    ]
