"""Sessions that outlive the process: session/load, resume, list, close, delete, fork.

Each handler checks its params, asks the session registry (`registry.Sessions`) and words the
answer; the registry does the work.

- load: rebuild the history and replay the whole conversation as the `session/update`s the
  editor saw (user prompts, replies and thoughts with their `messageId`s, each tool call with
  its final diff or output, plans), then answer with the modes and config options.
- resume: the same restore, without the replay.
- list: sessions with at least one prompt, newest first, optionally for one `cwd`, in pages
  with an opaque cursor.
- close: cancel like session/cancel, then forget the live session (it stays stored).
- delete: gone from list; loading it afterwards is "not found". Unknown ids succeed.
- fork (unstable): a new session id with a copy of the history (and of the system prompt).

Each takes the editor's `systemPrompt` (`session.client_prompt`), checked before anything is
restored: omitted, the one stored with the session is kept.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import TYPE_CHECKING, Any

from acp_server.errors import InvalidParams
from acp_server.protocol.params import absolute_dir, check, directories
from acp_server.session import client_prompt

if TYPE_CHECKING:
    from acp_server.session.registry import Sessions
    from acp_server.store.database import SessionRow

PAGE_SIZE = 50


async def load(sessions: Sessions, params: dict[str, Any]) -> dict[str, Any]:
    check("session/load", "acp/session_load.json", params)
    return await _restore(sessions, params, replay=True)


async def resume(sessions: Sessions, params: dict[str, Any]) -> dict[str, Any]:
    check("session/resume", "acp/session_resume.json", params)
    return await _restore(sessions, params, replay=False)


async def _restore(sessions: Sessions, params: dict[str, Any], *, replay: bool) -> dict[str, Any]:
    """Load and resume alike: the stored session made live again (replayed for load), with
    the system prompt given, else the one stored with it."""
    prompt = client_prompt.parse(params.get("systemPrompt"))  # -32602: nothing is loaded
    session = await sessions.restore(
        params["sessionId"],
        absolute_dir(params["cwd"], "cwd"),
        directories(params),
        params.get("mcpServers"),
        replay=replay,
        client_prompt=prompt,
    )
    return session.state()


async def list_sessions(sessions: Sessions, params: dict[str, Any]) -> dict[str, Any]:
    check("session/list", "acp/session_list.json", params)
    cwd = params.get("cwd")
    if cwd is not None:
        cwd = str(absolute_dir(cwd, "cwd"))
    after = _decode_cursor(params.get("cursor"))
    rows = await sessions.list_stored(cwd, after, PAGE_SIZE + 1)
    page, more = rows[:PAGE_SIZE], len(rows) > PAGE_SIZE
    result: dict[str, Any] = {"sessions": [_info(row) for row in page]}
    if more:
        last = page[-1]
        result["nextCursor"] = _encode_cursor(last.updated_at, last.id)
    return result


def _info(row: SessionRow) -> dict[str, Any]:
    info: dict[str, Any] = {"sessionId": row.id, "cwd": row.cwd, "updatedAt": row.updated_iso}
    if row.title:
        info["title"] = row.title
    if row.additional_dirs:
        info["additionalDirectories"] = row.additional_dirs
    return info


def _encode_cursor(updated_at: float, session_id: str) -> str:
    raw = json.dumps([updated_at, session_id]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_cursor(cursor: str | None) -> tuple[float, str] | None:
    if not cursor:
        return None
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        stamp, session_id = json.loads(base64.urlsafe_b64decode(padded))
        return float(stamp), str(session_id)
    except (ValueError, TypeError, binascii.Error) as exc:
        raise InvalidParams(
            "Invalid params: `cursor` is not a cursor this agent gave out; "
            "start again without one.",
            {"field": "cursor"},
        ) from exc


async def close(sessions: Sessions, params: dict[str, Any]) -> dict[str, Any]:
    check("session/close", "acp/session_close.json", params)
    await sessions.close(params["sessionId"])
    return {}


async def delete(sessions: Sessions, params: dict[str, Any]) -> dict[str, Any]:
    check("session/delete", "acp/session_delete.json", params)
    await sessions.delete(params["sessionId"])
    return {}


async def fork(sessions: Sessions, params: dict[str, Any]) -> dict[str, Any]:
    check("session/fork", "acp/session_fork.json", params)
    prompt = client_prompt.parse(params.get("systemPrompt"))  # -32602: nothing is forked
    session = await sessions.fork(
        params["sessionId"],
        absolute_dir(params["cwd"], "cwd"),
        directories(params),
        params.get("mcpServers"),
        prompt,
    )
    return {"sessionId": session.id, **session.state()}
