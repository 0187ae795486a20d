"""The conversation `acp-server run` has with its server: initialize, a session (new, or a stored
one resumed with `--session ID`), the mode, one prompt.

A stored session is resumed with `session/resume`: the server gives the model the earlier
history and replays nothing (the user saw it already). Without `--cwd` the session goes on in
the directory it was started in, which `session/list` tells.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from acp_server.errors import RemoteError
from acp_server.wire.jsonrpc import Connection

RESOURCE_NOT_FOUND = -32002


class UnknownSession(Exception):
    """`--session ID` names no stored session; the message says how to find one."""

    def __init__(self, session_id: str) -> None:
        super().__init__(
            f"there is no stored session {session_id!r}; `acp-server sessions` lists them "
            "(with their ids), newest first."
        )


async def initialize(conn: Connection) -> dict[str, Any]:
    result: dict[str, Any] = await conn.request(
        "initialize",
        {
            "protocolVersion": 1,
            "clientCapabilities": {
                "fs": {"readTextFile": False, "writeTextFile": False},
                "session": {"notices": {}},  # retry notices go to stderr, not into the reply
                "elicitation": {"form": {}},  # asked on the terminal (`elicit`)
            },
            "clientInfo": {"name": "acp-server-run", "version": "1"},
        },
    )
    return result


async def open_session(conn: Connection, args: argparse.Namespace) -> str:
    """A new session, or the stored one `--session` names resumed; its id."""
    stored: str | None = getattr(args, "session", None)
    if stored is None:
        cwd = str((args.cwd or Path.cwd()).resolve())
        session = await conn.request("session/new", {"cwd": cwd, "mcpServers": []})
        return str(session["sessionId"])
    cwd = str(args.cwd.resolve()) if args.cwd else await stored_cwd(conn, stored)
    try:
        await conn.request("session/resume", {"sessionId": stored, "cwd": cwd, "mcpServers": []})
    except RemoteError as exc:
        if exc.code == RESOURCE_NOT_FOUND:
            raise UnknownSession(stored) from exc
        raise
    return stored


async def stored_cwd(conn: Connection, session_id: str) -> str:
    """The directory the stored session works in (UnknownSession if none is stored)."""
    params: dict[str, Any] = {}
    while True:
        page = await conn.request("session/list", params)
        for info in page.get("sessions") or []:
            if info.get("sessionId") == session_id:
                return str(info["cwd"])
        cursor = page.get("nextCursor")
        if not cursor:
            raise UnknownSession(session_id)
        params = {"cursor": cursor}


async def prompt(conn: Connection, session_id: str, text: str) -> dict[str, Any]:
    result: dict[str, Any] = await conn.request(
        "session/prompt",
        {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]},
    )
    return result
