"""Stored sessions live again: load and resume (`restore`), `fork`, and what load replays.

A stored session's events become its history (an interrupted last turn mended: the repairs are
recorded, so the next load finds them too) and, when the editor asks for it (`session/load`),
the updates it was shown, replayed in order (a compaction as a card for an editor that does not
show compactions) and its title.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

from acp_server.errors import InternalError, ResourceNotFound
from acp_server.modes import is_mode

if TYPE_CHECKING:
    from collections.abc import Sequence

    from acp_server.session.client_prompt import ClientPrompt
    from acp_server.session.factory import SessionFactory
    from acp_server.session.session import Session
    from acp_server.store.database import SessionRow, Store
    from acp_server.tools.mcp.config import ServerConfig


async def restore(
    factory: SessionFactory,
    row: SessionRow,
    cwd: Path,
    extra: tuple[Path, ...],
    servers: Sequence[ServerConfig],
    *,
    replay: bool,
    prompt: ClientPrompt | None = None,
) -> Session:
    """The session of `row`, made from its stored events once every write queued so far is
    done (a live session of that id was just ended: its last writes are read back too), with
    the editor's system prompt `prompt` (stored for next time), else the one stored."""
    from acp_server.session import client_prompt
    from acp_server.store import transcript

    store = factory.required_store()
    await store.flush()
    restored = transcript.restore(store.events(row.id), store.blob)
    recorder = transcript.Recorder(store, row.id)
    for message in restored.repairs:
        recorder.message(message)
    for update in restored.shown_repairs:
        recorder.shown(update)
    mode = row.state.get("mode")
    if prompt is not None:
        store.update(row.id, **client_prompt.state_of(prompt))
    session = factory.make(
        row.id,
        cwd,
        extra,
        servers,
        recorder,
        history=restored.history,
        mode=mode if is_mode(mode) else "ask",
        title=row.title,
        choice=factory.choice(row.state),
        prompt=prompt or client_prompt.from_state(row.state),
    )
    if replay:
        for update in restored.replay:
            for target, shown in session.replayed(update):  # a subagent's under its own id
                factory.send_update(target, shown)
        if row.title:
            title = {"title": row.title, "updatedAt": row.updated_iso}
            factory.send_update(row.id, {"sessionUpdate": "session_info_update", **title})
    return session


async def fork(
    store: Store,
    source: SessionRow,
    cwd: Path,
    extra: tuple[Path, ...],
    prompt: ClientPrompt | None = None,
) -> str:
    """A new stored session with a copy of `source`'s events (and its roots, unless `extra`
    gives others, and its system prompt, unless `prompt` gives another); its id once it is
    committed."""
    from acp_server.session import client_prompt
    from acp_server.store.database import SessionRow

    new_id = f"sess_{uuid.uuid4().hex}"
    now = time.time()
    title = f"{source.title} (fork)" if source.title else None
    dirs = [str(d) for d in extra]
    state = {**source.state, **client_prompt.state_of(prompt)}
    store.create(SessionRow(new_id, str(cwd), dirs, title, now, now, state))
    for event in store.events(source.id):
        store.append(new_id, event.kind, event.body)
    await committed(store, new_id, "The forked session")
    return new_id


async def stored(store: Store, session_id: str) -> SessionRow:
    """The session's row, read once every write queued so far is done (so that a session
    created a moment ago, its row still on the writer's queue, is found)."""
    await store.flush()
    row = store.get(session_id)
    if row is None:
        raise ResourceNotFound(
            f"Unknown session {session_id!r}: it was never saved here, or it was deleted.",
            {"sessionId": session_id},
        )
    return row


async def committed(store: Store, session_id: str, what: str) -> None:
    """Wait for the session's writes; a failed one is an error for the client, not a success."""
    from acp_server.store.database import SaveFailed

    try:
        await store.flush(session_id)
    except SaveFailed as exc:
        raise InternalError(
            f"{what} could not be saved to the session store ({store.path}). Check that the "
            "disk is not full and that the file is writable; the agent's log has the details.",
            {"sessionId": session_id},
        ) from exc
