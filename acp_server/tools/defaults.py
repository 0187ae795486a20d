"""The tools every session offers, in the order the model sees them."""

from __future__ import annotations

from acp_server.tools.base import Tool


def default_tools() -> list[Tool]:
    from acp_server.tools import edit, fs, job_tools, plan, search, shell

    return [
        fs.READ_FILE,
        fs.LIST_DIRECTORY,
        search.GLOB,
        search.GREP,
        edit.EDIT_FILE,
        fs.WRITE_FILE,
        shell.RUN_COMMAND,
        job_tools.COMMAND_OUTPUT,
        job_tools.STOP_COMMAND,
        plan.UPDATE_PLAN,
    ]
