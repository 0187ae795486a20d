"""ACP v1 methods on top of a JSON-RPC connection: handshake, sessions, prompts, cancel.

Inbound params are checked against our schemas in `schemas/acp/` (lenient about unknown
fields, precise about the ones we use) and rejected with -32602 naming the field. Restoring
stored sessions (load, resume, list, close, delete, fork) lives in `lifecycle.py`.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from acp_server import __version__
from acp_server.config import Settings
from acp_server.errors import InvalidParams, ResourceNotFound
from acp_server.jsonrpc import Connection, NotificationHandler, Params, RequestHandler
from acp_server.params import absolute_dir, check, directories, warm_up_validation

if TYPE_CHECKING:
    # Imported where used: the session machinery is not needed to answer `initialize`,
    # and loading it later keeps the handshake ~10 ms faster.
    from acp_server.backends import Backend
    from acp_server.messages import Message
    from acp_server.permissions import Mode
    from acp_server.session import PromptOutcome, Session
    from acp_server.store import Store
    from acp_server.updates import Update

log = logging.getLogger(__name__)

PROTOCOL_VERSION = 1
# Text and resource_link are always allowed; content.admit refuses what these leave out.
PROMPT_CAPABILITIES: dict[str, bool] = {"image": False, "audio": False, "embeddedContext": True}
SESSION_CAPABILITIES: dict[str, Any] = {
    # Conforming clients send `additionalDirectories` (new, load, resume, fork) only when
    # this is advertised; without it multi-root workspaces lost their extra roots.
    "additionalDirectories": {},
    "list": {},
    "resume": {},
    "close": {},
    "delete": {},
    "fork": {},
}


class AcpAgent:
    """The agent side of ACP: one per connection."""

    def __init__(
        self, make_backend: Callable[[], Backend], settings: Settings | None = None
    ) -> None:
        self._make_backend = make_backend
        self._backend: Backend | None = None
        self.settings = settings or Settings()
        self.sessions: dict[str, Session] = {}
        self.client_capabilities: dict[str, Any] = {}
        self.conn: Connection | None = None
        self._store: Store | None = None
        self._store_failed = False

    def request_handlers(self) -> dict[str, RequestHandler]:
        from acp_server import lifecycle

        handlers: dict[str, RequestHandler] = {
            "initialize": self.initialize,
            "authenticate": self.authenticate,
            "session/new": self.new_session,
            "session/prompt": self.prompt,
            "session/set_mode": self.set_mode,
            "session/set_config_option": self.set_config_option,
        }
        for method, handler in lifecycle.HANDLERS.items():
            handlers[method] = functools.partial(handler, self)
        return handlers

    def notification_handlers(self) -> dict[str, NotificationHandler]:
        return {"session/cancel": self.cancel}

    # ----- handshake -----------------------------------------------------------------------

    async def initialize(self, params: Params) -> dict[str, Any]:
        check("initialize", "acp/initialize.json", params)
        caps = params.get("clientCapabilities")
        self.client_capabilities = caps if isinstance(caps, dict) else {}
        return {
            "protocolVersion": PROTOCOL_VERSION,
            "agentCapabilities": {
                "loadSession": True,
                "promptCapabilities": PROMPT_CAPABILITIES,
                "mcpCapabilities": {"http": False, "sse": False},
                "sessionCapabilities": SESSION_CAPABILITIES,
            },
            "authMethods": [],
            "agentInfo": {"name": "acp-server", "title": "acp-server", "version": __version__},
        }

    async def authenticate(self, params: Params) -> dict[str, Any]:
        # No authentication is needed; answering keeps clients that always call it working.
        return {}

    # ----- sessions ------------------------------------------------------------------------

    async def new_session(self, params: Params) -> dict[str, Any]:
        check("session/new", "acp/session_new.json", params)
        cwd = absolute_dir(params["cwd"], "cwd")
        session = self.open_session(
            f"sess_{uuid.uuid4().hex}", cwd, directories(params), params.get("mcpServers")
        )
        if self.store is not None:
            from acp_server.store import SessionRow

            now = time.time()
            row = SessionRow(
                session.id,
                str(cwd),
                [str(d) for d in session.additional_dirs],
                None,
                now,
                now,
                {"mode": session.mode},
            )
            self.store.create(row)
        asyncio.get_running_loop().call_soon(warm_up_validation)
        return {"sessionId": session.id, **session_state(session)}

    def open_session(
        self,
        session_id: str,
        cwd: Path,
        extra: tuple[Path, ...],
        mcp_servers: list[dict[str, Any]] | None,
        *,
        history: list[Message] | None = None,
        mode: Mode | None = None,
        title: str | None = None,
    ) -> Session:
        """A live session (new or restored), registered on this connection."""
        from acp_server.editor import Editor
        from acp_server.session import History, Session
        from acp_server.transcript import Recorder

        assert self.conn is not None
        recorder = Recorder(self.store, session_id) if self.store is not None else None
        session = Session(
            id=session_id,
            client=Editor(self.conn, session_id, self.client_capabilities),
            cwd=cwd,
            additional_dirs=extra,
            mcp_servers=list(mcp_servers or []),
            backend=self.backend,
            send_update=self.send_update,
            settings=self.settings,
            history=History(history or ()),
            recorder=recorder,
            title=title,
        )
        if mode is not None and session.permissions is not None:
            session.permissions.mode = mode
        self.sessions[session_id] = session
        return session

    @property
    def store(self) -> Store | None:
        """The durable session store, opened on first use; None if it cannot be opened."""
        if self._store is None and not self._store_failed:
            from acp_server.config import store_path
            from acp_server.store import Store

            try:
                self._store = Store(store_path())
            except Exception:
                log.exception("the session store cannot be opened; sessions will not be saved")
                self._store_failed = True
        return self._store

    def close(self) -> None:
        if self._store is not None:
            self._store.close()

    async def prompt(self, params: Params) -> dict[str, Any]:
        check("session/prompt", "acp/session_prompt.json", params)
        from acp_server.content import admit, prompt_message
        from acp_server.session import user_chunks

        admit(params["prompt"], PROMPT_CAPABILITIES)
        session = self.session(params["sessionId"])
        if not params["prompt"]:
            # CodeCompanion sends an empty prompt when a chat is submitted while it connects:
            # nothing to ask the model, nothing to store, no title.
            return {"stopReason": "end_turn"}
        message = prompt_message(params["prompt"])
        outcome = await session.prompt(message, user_chunks(params["prompt"], message.message_id))
        if self.conn is not None:
            await self.conn.drain()
        return prompt_response(outcome)

    async def set_mode(self, params: Params) -> dict[str, Any]:
        from acp_server import session_config

        check("session/set_mode", "acp/session_set_mode.json", params)
        session = self.session(params["sessionId"])
        session.set_mode(session_config.parse_mode(params["modeId"], "modeId"))
        return {}

    async def set_config_option(self, params: Params) -> dict[str, Any]:
        from acp_server import session_config

        check("session/set_config_option", "acp/session_set_config_option.json", params)
        session = self.session(params["sessionId"])
        if params["configId"] != session_config.MODE_OPTION:
            raise InvalidParams(
                f"Invalid params: unknown `configId` {params['configId']!r}; "
                f"this agent offers: {session_config.MODE_OPTION}.",
                {"field": "configId"},
            )
        session.set_mode(session_config.parse_mode(params["value"], "value"))
        return {"configOptions": session_config.config_options(session.mode)}

    def cancel(self, params: Params) -> None:
        check("session/cancel", "acp/session_cancel.json", params)
        session = self.sessions.get(params["sessionId"])
        if session is not None:
            session.cancel()

    # ----- helpers -------------------------------------------------------------------------

    @property
    def backend(self) -> Backend:
        """The model backend, made on first use (not on the path to `initialize`)."""
        if self._backend is None:
            self._backend = self._make_backend()
        return self._backend

    def session(self, session_id: str) -> Session:
        session = self.sessions.get(session_id)
        if session is None:
            raise ResourceNotFound(
                f"Unknown session {session_id!r}: create one with session/new first.",
                {"sessionId": session_id},
            )
        return session

    def send_update(self, session_id: str, update: Update) -> None:
        if self.conn is not None:
            self.conn.notify("session/update", {"sessionId": session_id, "update": update})


def prompt_response(outcome: PromptOutcome) -> dict[str, Any]:
    """The `session/prompt` result. What ACP has no field for travels in `_meta.acpServer`
    (ACP allows `_meta` on every response; documented in the README for client authors), each
    entry only when it happened: `turnFailed` when the turn ended on a failure, with the message
    the user was shown; `notSaved` when its records could not be committed. The stop reason
    stays the normal one."""
    ours: dict[str, Any] = {}
    if outcome.failure is not None:
        ours["turnFailed"] = {"reason": outcome.failure.reason, "message": outcome.failure.message}
    if outcome.not_saved is not None:
        ours["notSaved"] = outcome.not_saved
    result: dict[str, Any] = {"stopReason": outcome.stop}
    if ours:
        result["_meta"] = {"acpServer": ours}
    return result


def session_state(session: Session) -> dict[str, Any]:
    from acp_server import session_config

    return {
        "modes": session_config.modes_state(session.mode),
        "configOptions": session_config.config_options(session.mode),
    }
