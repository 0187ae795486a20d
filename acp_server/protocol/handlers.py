"""ACP v1 methods on top of a JSON-RPC connection: handshake, sessions, prompts, cancel.

Inbound params are checked against our schemas in `schemas/acp/` (lenient about unknown
fields, precise about the ones we use) and rejected with -32602 naming the field. The sessions
themselves are kept by the registry (`registry.Sessions`, made at the first session method);
the methods on stored sessions (load, resume, list, close, delete, fork) are in `lifecycle.py`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from acp_server import __version__
from acp_server.protocol import auth, lifecycle
from acp_server.protocol.params import absolute_dir, check, directories
from acp_server.session import client_prompt
from acp_server.settings import Settings
from acp_server.wire.jsonrpc import NotificationHandler, Params, RequestHandler

if TYPE_CHECKING:
    from acp_server.backends import Backend
    from acp_server.editor_api import EditorApi
    from acp_server.models.source import ModelSource
    from acp_server.session.queue import PromptOutcome
    from acp_server.session.registry import Sessions
    from acp_server.updates import Update

log = logging.getLogger(__name__)

PROTOCOL_VERSION = 1
# Text and resource_link are always allowed; content.admit refuses what these leave out.
# Images go to models that read them; a text-only model gets a short note in their place.
PROMPT_CAPABILITIES: dict[str, bool] = {"image": True, "audio": False, "embeddedContext": True}
SESSION_CAPABILITIES: dict[str, Any] = {
    # Conforming clients send `additionalDirectories` (new, load, resume, fork) only when
    # this is advertised; without it multi-root workspaces lost their extra roots.
    "additionalDirectories": {},
    "list": {},
    "resume": {},
    "close": {},
    "delete": {},
    "fork": {},
    # The editor's system prompt on new, load, resume and fork: append, and override.
    "systemPrompt": client_prompt.CAPABILITY,
}


class Peer(Protocol):
    """What the agent needs of its connection (`jsonrpc.Connection`)."""

    def notify(self, method: str, params: Params) -> None: ...

    async def request(self, method: str, params: Params, *, withdraw: bool = False) -> Any: ...

    async def drain(self) -> None: ...

    def after_reply(self, callback: Callable[[], None]) -> None: ...


class AcpAgent:
    """The agent side of ACP: one per connection. `models` makes (at the first session) the
    source of the models sessions choose from; `backends` makes the backend of a session
    without that choice (a script, or no model configured yet)."""

    def __init__(
        self,
        backends: Callable[[], Backend],
        settings: Settings | None = None,
        models: Callable[[], ModelSource | None] | None = None,
    ) -> None:
        self._backends = backends
        self._models = models
        self.settings = settings or Settings()
        self.client_capabilities: dict[str, Any] = {}
        self.conn: Peer | None = None
        self._sessions: Sessions | None = None
        self._source: ModelSource | None = None
        self._source_made = False
        self._auth_methods: list[dict[str, Any]] = auth.methods(None, {})

    def request_handlers(self) -> dict[str, RequestHandler]:
        return {
            "initialize": self.initialize,
            "authenticate": self.authenticate,
            "logout": self.logout,
            "session/new": self.new_session,
            "session/prompt": self.prompt,
            "session/set_mode": self.set_mode,
            "session/set_config_option": self.set_config_option,
            # Removed from ACP, still called by some clients (JetBrains, agent-shell, avante).
            "session/set_model": self.set_model,
            "session/load": self.load_session,
            "session/resume": self.resume_session,
            "session/list": lambda params: lifecycle.list_sessions(self.sessions, params),
            "session/close": lambda params: lifecycle.close(self.sessions, params),
            "session/delete": lambda params: lifecycle.delete(self.sessions, params),
            "session/fork": lambda params: lifecycle.fork(self.sessions, params),
        }

    def notification_handlers(self) -> dict[str, NotificationHandler]:
        return {"session/cancel": self.cancel}

    @property
    def sessions(self) -> Sessions:
        """This connection's sessions, made at the first session method."""
        if self._sessions is None:
            # Imported here: the session machinery (session, store, transcript, permissions:
            # ~30 ms) is not needed to answer `initialize`.
            from acp_server.session.registry import Sessions

            self._sessions = Sessions(
                backends=self._backends,
                editors=self._editor,
                send_update=self.send_update,
                settings=self.settings,
                models=self.model_source(),
            )
        return self._sessions

    def model_source(self) -> ModelSource | None:
        """The models of this connection, made once (None: a fixed backend, e.g. a script)."""
        if not self._source_made:
            self._source = self._models() if self._models is not None else None
            self._source_made = True
        return self._source

    def _missing_key(self) -> tuple[str, str] | None:
        """The variable the default model lacks (see `auth`). A configuration that cannot be
        read is not an authentication matter: `session/new` and the prompts report it."""
        try:
            source = self.model_source()
            return source.missing_key() if source is not None else None
        except Exception:
            log.exception("cannot tell whether the default model needs a key")
            return None

    def close(self) -> None:
        if self._sessions is not None:
            self._sessions.shutdown()

    # ----- handshake -----------------------------------------------------------------------

    async def initialize(self, params: Params) -> dict[str, Any]:
        check("initialize", "acp/initialize.json", params)
        caps = params.get("clientCapabilities")
        self.client_capabilities = caps if isinstance(caps, dict) else {}
        self._auth_methods = auth.methods(self._missing_key(), self.client_capabilities)
        return {
            "protocolVersion": PROTOCOL_VERSION,
            "agentCapabilities": {
                "loadSession": True,
                "promptCapabilities": PROMPT_CAPABILITIES,
                # Both connect through the `mcp` package (tests/e2e/test_mcp_e2e.py).
                "mcpCapabilities": {"http": True, "sse": True},
                "sessionCapabilities": SESSION_CAPABILITIES,
                "auth": {"logout": {}},
            },
            "authMethods": self._auth_methods,
            "agentInfo": {"name": "acp-server", "title": "acp-server", "version": __version__},
        }

    async def authenticate(self, params: Params) -> dict[str, Any]:
        """Check again, for a method we offered, that a model can answer (see `auth`): the
        key that was missing is there now, or a setup run chose a model that works."""
        check("authenticate", "acp/authenticate.json", params)
        auth.check_method(params["methodId"], self._auth_methods)
        missing = self._missing_key()
        if missing is not None:
            raise auth.required(missing)
        source = self.model_source()
        problem = await source.unusable() if source is not None else None
        if problem is not None:
            raise auth.not_ready(problem)
        return {}

    async def logout(self, params: Params) -> dict[str, Any]:
        """Forget the keys `acp-server login` stored: new sessions need one again."""
        source = self.model_source()
        if source is not None:
            source.forget_stored_keys()
        return {}

    # ----- sessions ------------------------------------------------------------------------

    async def new_session(self, params: Params) -> dict[str, Any]:
        check("session/new", "acp/session_new.json", params)
        cwd = absolute_dir(params["cwd"], "cwd")
        prompt = client_prompt.parse(params.get("systemPrompt"))  # -32602: nothing is made
        missing = self._missing_key()
        if missing is not None:
            raise auth.required(missing)
        roots = directories(params)
        servers = params.get("mcpServers")
        session_id, state = self.sessions.answer_new(cwd, roots, servers, prompt)
        self._announce_commands(session_id)
        return {"sessionId": session_id, **state}

    async def load_session(self, params: Params) -> dict[str, Any]:
        result = await lifecycle.load(self.sessions, params)
        session_id = params["sessionId"]
        self._announce_commands(session_id)
        self._after_answer(lambda: self._show_meter(session_id))
        return result

    async def resume_session(self, params: Params) -> dict[str, Any]:
        result = await lifecycle.resume(self.sessions, params)
        self._announce_commands(params["sessionId"])
        return result

    def _announce_commands(self, session_id: str) -> None:
        """Once the answer the handler returns has been written (JetBrains hangs on a
        notification before the response of `session/new`): the session is looked up, which
        builds a new one (`Sessions.answer_new` answers before it is built), and its commands
        are announced (`available_commands_update`)."""

        def announce() -> None:
            session = self.sessions.find(session_id)
            if session is not None:
                self.send_update(session_id, session.commands.update())

        self._after_answer(announce)

    def _show_meter(self, session_id: str) -> None:
        """After a load's answer and its replay have left (its work imports the tools: done
        before, it held up the writing of a long replay), the meter of the loaded session."""
        session = self.sessions.find(session_id)
        if session is not None:
            session.show_usage()

    def _after_answer(self, work: Callable[[], None]) -> None:
        if self.conn is not None:
            self.conn.after_reply(work)
        else:  # no connection (in process): no answer to wait for
            asyncio.get_running_loop().call_soon(work)

    async def prompt(self, params: Params) -> dict[str, Any]:
        check("session/prompt", "acp/session_prompt.json", params)
        # Imported here, like the registry: prompts are not needed to answer `initialize`.
        from acp_server.protocol.content import admit, prompt_message, user_chunks

        admit(params["prompt"], PROMPT_CAPABILITIES)
        session = self.sessions.get(params["sessionId"])
        if not params["prompt"]:
            # CodeCompanion sends an empty prompt when a chat is submitted while it connects:
            # nothing to ask the model, nothing to store, no title.
            return {"stopReason": "end_turn"}
        message = prompt_message(params["prompt"])
        shown = user_chunks(params["prompt"], message.message_id)
        invocation = session.commands.parse(params["prompt"])
        if invocation is None:
            outcome = await session.prompt(message, shown)
        else:
            outcome = await session.command(invocation, shown)
        if self.conn is not None:
            await self.conn.drain()
        return prompt_response(outcome)

    async def set_mode(self, params: Params) -> dict[str, Any]:
        check("session/set_mode", "acp/session_set_mode.json", params)
        # Imported here, like the registry: modes are not needed to answer `initialize`.
        from acp_server.session.options import parse_mode

        session = self.sessions.get(params["sessionId"])
        session.set_mode(parse_mode(params["modeId"], "modeId"))
        return {}

    async def set_config_option(self, params: Params) -> dict[str, Any]:
        check("session/set_config_option", "acp/session_set_config_option.json", params)
        session = self.sessions.get(params["sessionId"])
        return {"configOptions": session.choose(params["configId"], params["value"])}

    async def set_model(self, params: Params) -> dict[str, Any]:
        """The removed unstable `session/set_model`: the same as setting the `model` option."""
        check("session/set_model", "acp/session_set_model.json", params)
        session = self.sessions.get(params["sessionId"])
        session.set_model(params["modelId"])
        return {}

    def cancel(self, params: Params) -> None:
        check("session/cancel", "acp/session_cancel.json", params)
        self.sessions.cancel(params["sessionId"])

    # ----- the connection --------------------------------------------------------------------

    def send_update(self, session_id: str, update: Update) -> None:
        if self.conn is not None:
            self.conn.notify("session/update", {"sessionId": session_id, "update": update})

    def _editor(self, session_id: str) -> EditorApi:
        """The editor as the session of this id sees it (none before a connection is attached)."""
        # Imported with the registry, at the first session: not needed for `initialize`.
        from acp_server.editor_api import NoEditor
        from acp_server.protocol.editor import Editor

        if self.conn is None:
            return NoEditor()
        return Editor(self.conn, session_id, self.client_capabilities)


def prompt_response(outcome: PromptOutcome) -> dict[str, Any]:
    """The `session/prompt` result. What ACP has no field for travels in `_meta.acpServer`
    (ACP allows `_meta` on every response; documented in docs/client-authors.md), each
    entry only when it happened: `turnFailed` when the turn ended on a failure, with the message
    the user was shown; `notSaved` when its records could not be committed; `sessionUsage`, the
    session's tokens so far (the turn's are `usage`, as ACP's unstable `Usage` type). The stop
    reason stays the normal one."""
    ours: dict[str, Any] = {}
    if outcome.failure is not None:
        ours["turnFailed"] = {"reason": outcome.failure.reason, "message": outcome.failure.message}
    if outcome.not_saved is not None:
        ours["notSaved"] = outcome.not_saved
    if outcome.session_usage is not None:
        ours["sessionUsage"] = outcome.session_usage
    result: dict[str, Any] = {"stopReason": outcome.stop}
    if outcome.usage is not None:
        result["usage"] = outcome.usage
    if ours:
        result["_meta"] = {"acpServer": ours}
    return result
