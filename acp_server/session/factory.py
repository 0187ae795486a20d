"""Wiring a session's parts: what `Sessions` (registry.py) asks for to make a session live.

A session gets its collaborators here: a backend (its model's, from the model source; with
`--script`, or no model named anywhere, the backend the factory of `backends` makes), an editor
for its id, a recorder (a `NullRecorder` when the store cannot be opened: the session still
works, unsaved), its permissions, its MCP servers and its model choice. The store is opened at
the first session that needs it.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from acp_server.errors import ResourceNotFound
from acp_server.modes import Mode, is_mode
from acp_server.session import client_prompt as client_prompts
from acp_server.settings import Settings, store_path

# The session machinery (session, store, transcript: ~25 ms of imports) is imported where it
# is used: `session/new` is answered without it, and the session is built right after.
if TYPE_CHECKING:
    from acp_server.backends import Backend
    from acp_server.editor_api import EditorApi
    from acp_server.messages import Message
    from acp_server.models.source import ModelSource
    from acp_server.session.client_prompt import ClientPrompt
    from acp_server.session.model import ModelChoice
    from acp_server.session.session import SendUpdate, Session
    from acp_server.store.database import Store
    from acp_server.store.transcript import NullRecorder, Recorder
    from acp_server.tools.mcp.config import ServerConfig

log = logging.getLogger(__name__)

McpServers = Sequence[dict[str, Any]] | None


class SessionFactory:
    """Makes sessions with their parts; holds the store they record to."""

    def __init__(
        self,
        *,
        backends: Callable[[], Backend],
        editors: Callable[[str], EditorApi],
        send_update: SendUpdate,
        settings: Settings,
        models: ModelSource | None,
    ) -> None:
        self._backends = backends  # the backend of a session without a model choice
        self._editors = editors  # the editor as the session of this id sees it
        self.send_update = send_update
        self._settings = settings
        self.models = models  # the models to choose from (None: one fixed backend)
        self._store: Store | None = None
        self._store_failed = False

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

    def required_store(self) -> Store:
        store = self.store
        if store is None:
            raise ResourceNotFound(
                "Stored sessions are unavailable: the session store could not be opened "
                "(the agent's log says why)."
            )
        return store

    def close(self) -> None:
        if self._store is not None:
            self._store.close()

    def mcp_servers(self, given: McpServers) -> list[ServerConfig]:
        """The editor's MCP servers and the configuration file's (`session.mcp.configured`)."""
        from_file = self.models.mcp_servers if self.models else ()
        if not given and not from_file:
            return []  # what nearly every session/new asks: nothing to import or check
        from acp_server.session.mcp import configured

        return configured(given, from_file)

    def fresh(self) -> tuple[str, Mode, ModelChoice | None]:
        """A new session's id, mode and model choice."""
        choice = self.choice({})
        mode = self.models.default_mode if self.models is not None else None
        return f"sess_{uuid.uuid4().hex}", mode if is_mode(mode) else "ask", choice

    def choice(self, stored: dict[str, Any]) -> ModelChoice | None:
        """The model choice of a session (from what its store row kept, if anything)."""
        if self.models is None:
            return None
        from acp_server.session.model import ModelChoice

        return ModelChoice.start(self.models, stored)

    def build(
        self,
        session_id: str,
        cwd: Path,
        extra: tuple[Path, ...],
        servers: Sequence[ServerConfig],
        mode: Mode,
        choice: ModelChoice | None,
        *,
        client_prompt: ClientPrompt | None = None,
    ) -> Session:
        """A new session, stored (with the editor's system prompt, if it gave one)."""
        from acp_server.store.database import SessionRow

        store = self.store
        if store is not None:
            now = time.time()
            dirs = [str(d) for d in extra]
            state = {"mode": mode, **(choice.stored() if choice else {})}
            state.update(client_prompts.state_of(client_prompt))
            store.create(SessionRow(session_id, str(cwd), dirs, None, now, now, state))
        recorder = self.recorder(session_id)
        return self.make(
            session_id,
            cwd,
            extra,
            servers,
            recorder,
            mode=mode,
            choice=choice,
            prompt=client_prompt,
        )

    def make(
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
        prompt: ClientPrompt | None = None,
    ) -> Session:
        """A session with its collaborators (`prompt`: the editor's system prompt)."""
        from acp_server.permissions import Permissions, RuleStore
        from acp_server.session.session import Session

        session = Session(
            session_id,
            cwd=cwd,
            additional_dirs=extra,
            mcp_servers=mcp_servers,
            mcp_tool_share=self.models.mcp_tool_share if self.models else None,
            backend=self._backend(choice),
            editor=self._editors(session_id),
            recorder=recorder,
            permissions=Permissions(RuleStore(cwd), mode),
            settings=self._settings.with_file(
                self.models.fetch if self.models else None,
                self.models.sandbox if self.models else None,
                self.models.command_env if self.models else (),
            ),
            send_update=self.send_update,
            history=history,
            title=title,
            choice=choice,
            client_prompt=prompt,
        )
        session.subagents.lend_editors(self._editors)  # a child's requests carry its id
        return session

    def recorder(self, session_id: str) -> Recorder | NullRecorder:
        from acp_server.store.transcript import NullRecorder, Recorder

        store = self.store
        return Recorder(store, session_id) if store is not None else NullRecorder()

    def _backend(self, choice: ModelChoice | None) -> Backend:
        """The model's backend; one that explains, while the configuration cannot be used."""
        problem = self.models.problem if self.models is not None else None
        if problem is not None:
            from acp_server.backends.unconfigured import UnconfiguredBackend

            return UnconfiguredBackend(problem)
        if choice is not None and choice.entry is not None:
            return choice.backend()
        return self._backends()
