"""The sessions of one connection: the live map, and the sessions answered but not built yet.

`protocol` maps ACP methods here and `lifecycle` restores stored sessions through it; this
module takes paths and ids. `answer_new`: a fresh id and state, the session built at its first
lookup (the protocol looks it up once the answer has been written; `new` builds it at once);
`restore`: a stored session live again (load, resume, fork; restore.py); `close` (it stays
stored), `delete`, `fork`, `list_stored` (newest first). Its parts are wired by the factory
(factory.py); the work after a new session (warm-up, discovery) is warmup.py's.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

from acp_server.errors import ResourceNotFound
from acp_server.session import options
from acp_server.session.factory import McpServers, SessionFactory
from acp_server.settings import Settings

if TYPE_CHECKING:
    from acp_server.backends import Backend
    from acp_server.editor_api import EditorApi
    from acp_server.models.catalogue import Catalogue
    from acp_server.models.source import ModelSource
    from acp_server.session.client_prompt import ClientPrompt
    from acp_server.session.session import SendUpdate, Session
    from acp_server.session.warmup import AfterNew
    from acp_server.store.database import SessionRow, Store


Roots = tuple[Path, ...]  # the additional directories
Prompt: TypeAlias = "ClientPrompt | None"  # the editor's system prompt (client_prompt.py)


class Sessions:
    """A connection's live sessions, by id."""

    def __init__(
        self,
        *,
        backends: Callable[[], Backend],
        editors: Callable[[str], EditorApi],
        send_update: SendUpdate,
        settings: Settings,
        models: ModelSource | None = None,
    ) -> None:
        self.send_update = send_update
        self._factory = SessionFactory(
            backends=backends,
            editors=editors,
            send_update=send_update,
            settings=settings,
            models=models,
        )
        self._after_new: AfterNew | None = None  # made at the first new session built
        self._live: dict[str, Session] = {}
        self._pending: dict[str, Callable[[], None]] = {}  # answered, not built yet
        self._closing = False
        if models is not None:
            models.listeners.append(self._catalogue_grew)

    @property
    def store(self) -> Store | None:
        """The durable session store, opened on first use; None if it cannot be opened."""
        return self._factory.store

    def shutdown(self) -> None:
        """At exit: every MCP server process and background command ends, each session's
        private temp dir is removed, and the store is closed."""
        self._closing = True  # sessions built from now on start no work
        live = self._settled()  # their rows reach the store before it closes
        if self._after_new is not None:
            self._after_new.close()
        from acp_server.tools.commands import background
        from acp_server.tools.mcp import procs as mcp_procs

        mcp_procs.end_all()
        background.end_all()
        for session in live.values():  # after its commands ended: they may write there
            session.release()
        self._factory.close()

    def find(self, session_id: str) -> Session | None:
        return self._settled().get(session_id)

    def cancel(self, session_id: str) -> None:
        """session/cancel: the session's turn, or only a subagent's work."""
        live = self._settled()
        if session_id in live:
            live[session_id].cancel()
            return
        for parent in live.values():  # a subagent's id is no live session's
            if parent.subagents.cancel(session_id):
                return

    def get(self, session_id: str) -> Session:
        session = self._settled().get(session_id)
        if session is None:
            raise ResourceNotFound(
                f"Unknown session {session_id!r}: create one with session/new first.",
                {"sessionId": session_id},
            )
        return session

    def new(self, cwd: Path, extra: tuple[Path, ...], mcp_servers: McpServers) -> Session:
        """A session built now: `answer_new`, then its id looked up."""
        return self.get(self.answer_new(cwd, extra, mcp_servers)[0])

    def answer_new(
        self, cwd: Path, extra: Roots, mcp_servers: McpServers, client_prompt: Prompt = None
    ) -> tuple[str, dict[str, Any]]:
        """session/new: the id and state (modes, config options) of a new session, which is
        built at its first lookup: the protocol looks it up once the answer has been written,
        and any request that names it finds it built. Its store row was never committed before
        the answer either (the store writes from a queue)."""
        servers = self._factory.mcp_servers(mcp_servers)  # -32602 before anything is answered
        session_id, mode, choice = self._factory.fresh()
        build = functools.partial(
            self._factory.build, session_id, cwd, extra, servers, client_prompt=client_prompt
        )
        self._pending[session_id] = lambda: self._built(build(mode, choice))
        return session_id, options.state(mode, choice.options() if choice else [])

    def _built(self, session: Session) -> None:
        self._live[session.id] = session
        if self._closing:
            return
        if self._after_new is None:
            from acp_server.session.warmup import AfterNew

            self._after_new = AfterNew(self._factory.models)
        self._after_new.start(session)

    def _settled(self) -> dict[str, Session]:
        """The live sessions, once those answered but not built yet are built (every lookup
        comes here, so none misses a session whatever the order of events)."""
        while self._pending:
            self._pending.pop(next(iter(self._pending)))()
        return self._live

    async def restore(
        self,
        session_id: str,
        cwd: Path,
        extra: tuple[Path, ...],
        mcp_servers: McpServers,
        *,
        replay: bool,
        client_prompt: Prompt = None,
    ) -> Session:
        """The stored session, live again (a live one of that id is cancelled and replaced);
        `client_prompt` replaces the stored one, None keeps it."""
        from acp_server.session import restore

        servers = self._factory.mcp_servers(mcp_servers)
        row = await self._stored(session_id)
        await self._end(self._settled().pop(session_id, None))
        session = await restore.restore(
            self._factory, row, cwd, extra, servers, replay=replay, prompt=client_prompt
        )
        self._live[session_id] = session
        return session

    async def list_stored(
        self, cwd: str | None, after: tuple[float, str] | None, limit: int
    ) -> list[SessionRow]:
        """Stored sessions, newest first, after the (updated_at, id) of a previous page. Only
        sessions with a prompt: editors offer the list to resume from, and a session that was
        opened and never used (CodeCompanion opens one per chat buffer) is only noise there."""
        store = self._factory.required_store()
        await store.flush()
        return store.list(cwd=cwd, after=after, limit=limit, prompted_only=True)

    async def close(self, session_id: str) -> None:
        """Cancel the live session and forget it; it stays stored. Not live: it must be stored."""
        session = self._settled().pop(session_id, None)
        if session is None:
            await self._stored(session_id)
            return
        await self._end(session)
        if self.store is not None:
            await self.store.flush()

    async def delete(self, session_id: str) -> None:
        """Gone from the list, and loading it is "not found". Unknown ids are fine."""
        from acp_server.session import restore

        await self._end(self._settled().pop(session_id, None))
        store = self._factory.required_store()
        store.delete(session_id)
        await restore.committed(store, session_id, "The deletion of this session")

    async def fork(
        self, session_id: str, cwd: Path, extra: Roots, servers: McpServers, prompt: Prompt = None
    ) -> Session:
        """A new session with a copy of the stored one's history (and its roots, unless `extra`
        gives others, and its system prompt, unless `prompt` gives another)."""
        from acp_server.session import restore

        self._factory.mcp_servers(servers)  # checked before anything is stored
        source = await self._stored(session_id)
        extra = extra or tuple(Path(d) for d in source.additional_dirs)
        store = self._factory.required_store()
        new_id = await restore.fork(store, source, cwd, extra, prompt)
        return await self.restore(new_id, cwd, extra, servers, replay=False)

    async def _stored(self, session_id: str) -> SessionRow:
        from acp_server.session import restore

        self._settled()
        return await restore.stored(self._factory.required_store(), session_id)

    @staticmethod
    async def _end(session: Session | None) -> None:
        if session is not None:
            await session.close()

    def _catalogue_grew(self, catalogue: Catalogue) -> None:
        """Discovery found more models: every live session offers them."""
        models = self._factory.models
        if models is not None and models.problem is not None:
            return
        for session in list(self._settled().values()):
            session.catalogue_grew(catalogue)
