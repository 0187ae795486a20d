"""The sessions of one connection: the live ones, and the store that keeps them all.

`protocol` maps ACP methods here and `lifecycle` restores stored sessions through it; this
module takes paths and ids. `answer_new`: a fresh id and state, the session built and saved
right after the answer (`new` builds it at once); `restore`: a stored session live again
(load, resume, fork), an interrupted last turn mended and, when asked, what the editor saw
replayed; `close` (it stays stored), `delete`, `fork`, `list_stored` (newest first).

Each session gets its collaborators here: a backend from the `backends` factory, an editor for
its id, a recorder (a `NullRecorder` when the store cannot be opened: the session still works,
unsaved), its permissions and its MCP servers. The store is opened at the first session.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from acp_server.errors import InternalError, ResourceNotFound
from acp_server.modes import Mode, is_mode
from acp_server.session import options
from acp_server.settings import Settings, store_path

# The session machinery (session, store, transcript: ~25 ms of imports) is imported where it
# is used: `answer_new` answers session/new without it, and it is built right after.
if TYPE_CHECKING:
    from acp_server.backends import Backend
    from acp_server.editor_api import EditorApi
    from acp_server.messages import Message
    from acp_server.models.catalogue import Catalogue
    from acp_server.models.source import ModelSource
    from acp_server.session.choice import ModelChoice
    from acp_server.session.session import SendUpdate, Session
    from acp_server.store.database import SessionRow, Store
    from acp_server.store.transcript import NullRecorder, Recorder
    from acp_server.tools.mcp_config import ServerConfig

log = logging.getLogger(__name__)

McpServers = Sequence[dict[str, Any]] | None


class Sessions:
    def __init__(
        self,
        *,
        backends: Callable[[], Backend],
        editors: Callable[[str], EditorApi],
        send_update: SendUpdate,
        settings: Settings,
        models: ModelSource | None = None,
    ) -> None:
        self._backends = backends  # the backend of a session without a model choice
        self._editors = editors  # the editor as the session of this id sees it
        self.send_update = send_update
        self._settings = settings
        self._live: dict[str, Session] = {}
        self._pending: dict[str, Callable[[], None]] = {}  # answered, not built yet
        self._closed = False
        self._store: Store | None = None
        self._store_failed = False
        self._background: set[asyncio.Task[None]] = set()  # work started after session/new
        self._models = models  # the models to choose from (None: one fixed backend)
        if models is not None:
            models.listeners.append(self._catalogue_grew)

    @property
    def store(self) -> Store | None:
        """The durable session store, opened on first use; None if it cannot be opened."""
        if self._store is None and not self._store_failed:
            from acp_server.store.database import Store

            try:
                self._store = Store(store_path())
            except Exception:
                log.exception("the session store cannot be opened; sessions will not be saved")
                self._store_failed = True
        return self._store

    def shutdown(self) -> None:
        """At exit: every MCP server process ends, and the store is closed."""
        self._closed = True
        self._settled()  # their rows reach the store before it closes
        for task in self._background:
            task.cancel()
        from acp_server.tools import mcp_procs

        mcp_procs.end_all()
        if self._store is not None:
            self._store.close()

    def find(self, session_id: str) -> Session | None:
        return self._settled().get(session_id)

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
        self, cwd: Path, extra: tuple[Path, ...], mcp_servers: McpServers
    ) -> tuple[str, dict[str, Any]]:
        """session/new: the id and state (modes, config options) of a new session, which is
        built at its first lookup: the protocol looks it up once the answer has been written,
        and any request that names it finds it built. Its store row was never committed before
        the answer either (the store writes from a queue)."""
        servers = self._mcp_servers(mcp_servers)  # -32602 before anything is answered
        session_id, mode, choice = self._fresh()
        build = functools.partial(self._build, session_id, cwd, extra, servers, mode, choice)
        self._pending[session_id] = lambda: self._after_new(build())
        return session_id, options.state(mode, choice.options() if choice else [])

    def _settled(self) -> dict[str, Session]:
        """The live sessions, once those answered but not built yet are built (every lookup
        comes here, so none misses a session whatever the order of events)."""
        while self._pending:
            self._pending.pop(next(iter(self._pending)))()
        return self._live

    def _fresh(self) -> tuple[str, Mode, ModelChoice | None]:
        """A new session's id, mode and model choice."""
        choice = self._choice({})
        mode = self._models.default_mode if self._models is not None else None
        return f"sess_{uuid.uuid4().hex}", mode if is_mode(mode) else "ask", choice

    def _build(
        self,
        session_id: str,
        cwd: Path,
        extra: tuple[Path, ...],
        servers: Sequence[ServerConfig],
        mode: Mode,
        choice: ModelChoice | None,
    ) -> Session:
        """A new session, stored and live."""
        from acp_server.store.database import SessionRow

        store = self.store
        if store is not None:
            now = time.time()
            dirs = [str(d) for d in extra]
            state = {"mode": mode, **(choice.stored() if choice else {})}
            store.create(SessionRow(session_id, str(cwd), dirs, None, now, now, state))
        recorder = self._recorder(session_id)
        session = self._open(session_id, cwd, extra, servers, recorder, mode=mode, choice=choice)
        return session

    async def restore(
        self,
        session_id: str,
        cwd: Path,
        extra: tuple[Path, ...],
        mcp_servers: McpServers,
        *,
        replay: bool,
    ) -> Session:
        """The stored session, live again (a live one of that id is cancelled and replaced)."""
        from acp_server.store import transcript

        servers = self._mcp_servers(mcp_servers)
        store, row = await self._stored(session_id)
        await self._end(self._settled().pop(session_id, None))
        await store.flush()
        restored = transcript.restore(store.events(session_id), store.blob)
        recorder = transcript.Recorder(store, session_id)
        for message in restored.repairs:
            recorder.message(message)
        for update in restored.shown_repairs:
            recorder.shown(update)
        mode = row.state.get("mode")
        session = self._open(
            session_id,
            cwd,
            extra,
            servers,
            recorder,
            history=restored.history,
            mode=mode if is_mode(mode) else "ask",
            title=row.title,
            choice=self._choice(row.state),
        )
        if replay:
            for update in restored.replay:
                for shown in session.replayed(update):
                    self.send_update(session_id, shown)
            if row.title:
                title = {"title": row.title, "updatedAt": row.updated_iso}
                self.send_update(session_id, {"sessionUpdate": "session_info_update", **title})
        return session

    async def list_stored(
        self, cwd: str | None, after: tuple[float, str] | None, limit: int
    ) -> list[SessionRow]:
        """Stored sessions, newest first, after the (updated_at, id) of a previous page. Only
        sessions with a prompt: editors offer the list to resume from, and a session that was
        opened and never used (CodeCompanion opens one per chat buffer) is only noise there."""
        store = self._required_store()
        await store.flush()
        return store.list(cwd=cwd, after=after, limit=limit, prompted_only=True)

    async def close(self, session_id: str) -> None:
        """Cancel the live session and forget it; it stays stored. Not live: it must be stored."""
        session = self._settled().pop(session_id, None)
        if session is None:
            await self._stored(session_id)
            return
        await self._end(session)
        if self._store is not None:
            await self._store.flush()

    async def delete(self, session_id: str) -> None:
        """Gone from the list, and loading it is "not found". Unknown ids are fine."""
        await self._end(self._settled().pop(session_id, None))
        store = self._required_store()
        store.delete(session_id)
        await _committed(store, session_id, "The deletion of this session")

    async def fork(
        self, session_id: str, cwd: Path, extra: tuple[Path, ...], mcp_servers: McpServers
    ) -> Session:
        """A new session with a copy of the stored one's history (and its roots, unless `extra`
        gives others)."""
        from acp_server.store.database import SessionRow

        self._mcp_servers(mcp_servers)  # checked before anything is stored
        store, source = await self._stored(session_id)
        new_id = f"sess_{uuid.uuid4().hex}"
        now = time.time()
        title = f"{source.title} (fork)" if source.title else None
        extra = extra or tuple(Path(d) for d in source.additional_dirs)
        dirs = [str(d) for d in extra]
        store.create(SessionRow(new_id, str(cwd), dirs, title, now, now, source.state))
        for event in store.events(source.id):
            store.append(new_id, event.kind, event.body)
        await _committed(store, new_id, "The forked session")
        return await self.restore(new_id, cwd, extra, mcp_servers, replay=False)

    def _open(
        self,
        session_id: str,
        cwd: Path,
        extra: tuple[Path, ...],
        mcp_servers: Sequence[ServerConfig],
        recorder: Recorder | NullRecorder,
        *,
        history: Sequence[Message] = (),
        mode: Mode = "ask",
        title: str | None = None,
        choice: ModelChoice | None = None,
    ) -> Session:
        """A live session with its collaborators, registered under its id."""
        from acp_server.permissions import Permissions, RuleStore
        from acp_server.session.session import Session

        session = Session(
            session_id,
            cwd=cwd,
            additional_dirs=extra,
            mcp_servers=mcp_servers,
            backend=self._backend(choice),
            editor=self._editors(session_id),
            recorder=recorder,
            permissions=Permissions(RuleStore(cwd), mode),
            settings=self._settings,
            send_update=self.send_update,
            history=history,
            title=title,
            choice=choice,
        )
        self._live[session_id] = session
        return session

    def _mcp_servers(self, given: McpServers) -> list[ServerConfig]:
        """The editor's MCP servers and the configuration file's (`session_mcp.configured`)."""
        from_file = self._models.mcp_servers if self._models else ()
        if not given and not from_file:
            return []  # what nearly every session/new asks: nothing to import or check
        from acp_server.session.mcp import configured

        return configured(given, from_file)

    @staticmethod
    async def _end(session: Session | None) -> None:
        if session is not None:
            await session.close()

    # ----- the models to choose from (models.source, session.choice) -----------------------------

    def _choice(self, stored: dict[str, Any]) -> ModelChoice | None:
        if self._models is None:
            return None
        from acp_server.session.choice import ModelChoice

        return ModelChoice.start(self._models, stored)

    def _backend(self, choice: ModelChoice | None) -> Backend:
        """The model's backend; one that explains, while the configuration cannot be used."""
        problem = self._models.problem if self._models is not None else None
        if problem is not None:
            from acp_server.backends.unconfigured import UnconfiguredBackend

            return UnconfiguredBackend(problem)
        if choice is not None and choice.entry is not None:
            return choice.backend()
        return self._backends()

    def _after_new(self, session: Session) -> None:
        """Work started once the session/new answer is written (the one place for it): what
        the first prompt needs, and the discovery of local models."""
        from acp_server.session.warmup import prepare_first_turn

        if self._closed:
            return
        task = asyncio.create_task(prepare_first_turn(session), name="first-turn-warm-up")
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        if self._models is None:
            return
        if self._models.problem is not None:
            session.tell(self._models.problem, "error")
        # After the warm-up: beside it, the look for local models (an HTTP client, a request
        # per server) delayed a first prompt sent at once by ~20 ms.
        task.add_done_callback(self._discover)

    def _discover(self, _warm_up: asyncio.Task[None]) -> None:
        if not self._closed and self._models is not None:
            self._models.start_discovery()

    def _catalogue_grew(self, catalogue: Catalogue) -> None:
        """Discovery found more models: every live session offers them."""
        if self._models is not None and self._models.problem is not None:
            return
        for session in list(self._settled().values()):
            session.catalogue_grew(catalogue)

    def _recorder(self, session_id: str) -> Recorder | NullRecorder:
        from acp_server.store.transcript import NullRecorder, Recorder

        store = self.store
        return Recorder(store, session_id) if store is not None else NullRecorder()

    def _required_store(self) -> Store:
        store = self.store
        if store is None:
            raise ResourceNotFound(
                "Stored sessions are unavailable: the session store could not be opened "
                "(the agent's log says why)."
            )
        return store

    async def _stored(self, session_id: str) -> tuple[Store, SessionRow]:
        """The store and the session's row, read once every write queued so far is done (so
        that a session created a moment ago, its row still on the writer's queue, is found)."""
        self._settled()
        store = self._required_store()
        await store.flush()
        row = store.get(session_id)
        if row is None:
            raise ResourceNotFound(
                f"Unknown session {session_id!r}: it was never saved here, or it was deleted.",
                {"sessionId": session_id},
            )
        return store, row


async def _committed(store: Store, session_id: str, what: str) -> None:
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
