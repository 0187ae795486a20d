"""Sessions that outlive the process: session/load, resume, list, close, delete, fork.

- load: rebuild the history and replay the whole conversation as the `session/update`s the
  editor saw (user prompts, replies and thoughts with their `messageId`s, each tool call with
  its final diff or output, plans), then answer with the modes and config options.
- resume: the same restore, without the replay.
- list: sessions with at least one prompt, newest first, optionally for one `cwd`, in pages
  with an opaque cursor.
- close: cancel like session/cancel, then forget the live session (it stays stored).
- delete: gone from list; loading it afterwards is "not found". Unknown ids succeed.
- fork (unstable): a new session id with a copy of the history.
"""

from __future__ import annotations

import base64
import binascii
import json
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from acp_server.errors import InternalError, InvalidParams, ResourceNotFound
from acp_server.params import absolute_dir, check, directories

if TYPE_CHECKING:
    from acp_server.protocol import AcpAgent
    from acp_server.session import Session
    from acp_server.store import SessionRow, Store

PAGE_SIZE = 50


def _store(agent: AcpAgent) -> Store:
    store = agent.store
    if store is None:
        raise ResourceNotFound(
            "Stored sessions are unavailable: the session store could not be opened "
            "(the agent's log says why)."
        )
    return store


def _stored(agent: AcpAgent, session_id: str) -> SessionRow:
    row = _store(agent).get(session_id)
    if row is None:
        raise ResourceNotFound(
            f"Unknown session {session_id!r}: it was never saved here, or it was deleted.",
            {"sessionId": session_id},
        )
    return row


async def _committed(store: Store, session_id: str, what: str) -> None:
    """Wait for the session's writes; a failed one is an error for the client, not a success."""
    from acp_server.store import SaveFailed

    try:
        await store.flush(session_id)
    except SaveFailed as exc:
        raise InternalError(
            f"{what} could not be saved to the session store ({store.path}). Check that the "
            "disk is not full and that the file is writable; the agent's log has the details.",
            {"sessionId": session_id},
        ) from exc


async def _restore(agent: AcpAgent, params: dict[str, Any], *, replay: bool) -> Session:
    from acp_server.permissions import is_mode
    from acp_server.transcript import restore

    session_id = params["sessionId"]
    cwd = absolute_dir(params["cwd"], "cwd")
    row = _stored(agent, session_id)
    store = _store(agent)
    live = agent.sessions.pop(session_id, None)
    if live is not None:
        live.cancel()
    await store.flush()
    restored = restore(store.events(session_id), store.blob)
    mode = row.state.get("mode")
    session = agent.open_session(
        session_id,
        cwd,
        directories(params),
        params.get("mcpServers"),
        history=restored.history,
        mode=mode if is_mode(mode) else None,
        title=row.title,
    )
    if session.recorder is not None:
        for message in restored.repairs:
            session.recorder.message(message)
        for update in restored.shown_repairs:
            session.recorder.shown(update)
    if replay:
        for update in restored.replay:
            agent.send_update(session_id, update)
        if row.title:
            agent.send_update(
                session_id,
                {
                    "sessionUpdate": "session_info_update",
                    "title": row.title,
                    "updatedAt": row.updated_iso,
                },
            )
    return session


async def load(agent: AcpAgent, params: dict[str, Any]) -> dict[str, Any]:
    from acp_server.protocol import session_state

    check("session/load", "acp/session_load.json", params)
    session = await _restore(agent, params, replay=True)
    return session_state(session)


async def resume(agent: AcpAgent, params: dict[str, Any]) -> dict[str, Any]:
    from acp_server.protocol import session_state

    check("session/resume", "acp/session_resume.json", params)
    session = await _restore(agent, params, replay=False)
    return session_state(session)


async def list_sessions(agent: AcpAgent, params: dict[str, Any]) -> dict[str, Any]:
    check("session/list", "acp/session_list.json", params)
    cwd = params.get("cwd")
    if cwd is not None:
        cwd = str(absolute_dir(cwd, "cwd"))
    store = _store(agent)
    await store.flush()
    after = _decode_cursor(params.get("cursor"))
    # Only sessions with a prompt: editors offer the list to resume from, and a session that
    # was opened and never used (CodeCompanion opens one per chat buffer) is only noise there.
    rows = store.list(cwd=cwd, after=after, limit=PAGE_SIZE + 1, prompted_only=True)
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


async def close(agent: AcpAgent, params: dict[str, Any]) -> dict[str, Any]:
    check("session/close", "acp/session_close.json", params)
    session_id = params["sessionId"]
    session = agent.sessions.pop(session_id, None)
    if session is None:
        _stored(agent, session_id)  # known but not active: fine; unknown: not found
        return {}
    session.cancel()
    if session.recorder is not None:
        await session.recorder.store.flush()
    return {}


async def delete(agent: AcpAgent, params: dict[str, Any]) -> dict[str, Any]:
    check("session/delete", "acp/session_delete.json", params)
    session_id = params["sessionId"]
    session = agent.sessions.pop(session_id, None)
    if session is not None:
        session.cancel()
    store = _store(agent)
    store.delete(session_id)
    await _committed(store, session_id, "The deletion of this session")
    return {}


async def fork(agent: AcpAgent, params: dict[str, Any]) -> dict[str, Any]:
    from acp_server.protocol import session_state
    from acp_server.store import SessionRow

    check("session/fork", "acp/session_fork.json", params)
    source = _stored(agent, params["sessionId"])
    store = _store(agent)
    await store.flush()
    new_id = f"sess_{uuid.uuid4().hex}"
    now = time.time()
    title = f"{source.title} (fork)" if source.title else None
    extra = directories(params) or tuple(Path(d) for d in source.additional_dirs)
    cwd = absolute_dir(params["cwd"], "cwd")
    store.create(
        SessionRow(new_id, str(cwd), [str(d) for d in extra], title, now, now, source.state)
    )
    for event in store.events(source.id):
        store.append(new_id, event.kind, event.body)
    await _committed(store, new_id, "The forked session")
    copy = {
        "sessionId": new_id,
        "cwd": str(cwd),
        "mcpServers": params.get("mcpServers"),
        "additionalDirectories": [str(d) for d in extra],
    }
    session = await _restore(agent, copy, replay=False)
    return {"sessionId": session.id, **session_state(session)}


Handler = Callable[["AcpAgent", dict[str, Any]], Awaitable[dict[str, Any]]]
HANDLERS: dict[str, Handler] = {
    "session/load": load,
    "session/resume": resume,
    "session/list": list_sessions,
    "session/close": close,
    "session/delete": delete,
    "session/fork": fork,
}
