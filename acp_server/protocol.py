"""ACP v1 methods on top of a JSON-RPC connection: handshake, sessions, prompts, cancel.

Inbound params are checked against our schemas in `schemas/acp/` (lenient about unknown
fields, precise about the ones we use) and rejected with -32602 naming the field.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from acp_server import __version__, schemas
from acp_server.config import Settings
from acp_server.errors import InvalidParams, ResourceNotFound
from acp_server.jsonrpc import Connection, NotificationHandler, Params, RequestHandler

if TYPE_CHECKING:
    # Imported where used: the session machinery is not needed to answer `initialize`,
    # and loading it later keeps the handshake ~10 ms faster.
    from acp_server.backends import Backend
    from acp_server.messages import Message
    from acp_server.session import Session
    from acp_server.updates import Update

log = logging.getLogger(__name__)

PROTOCOL_VERSION = 1


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
        self.client_info: dict[str, Any] = {}
        self.conn: Connection | None = None

    def request_handlers(self) -> dict[str, RequestHandler]:
        return {
            "initialize": self.initialize,
            "authenticate": self.authenticate,
            "session/new": self.new_session,
            "session/prompt": self.prompt,
            "session/set_mode": self.set_mode,
            "session/set_config_option": self.set_config_option,
        }

    def notification_handlers(self) -> dict[str, NotificationHandler]:
        return {"session/cancel": self.cancel}

    # ----- handshake -----------------------------------------------------------------------

    async def initialize(self, params: Params) -> dict[str, Any]:
        _check("initialize", "acp/initialize.json", params)
        caps = params.get("clientCapabilities")
        self.client_capabilities = caps if isinstance(caps, dict) else {}
        info = params.get("clientInfo")
        self.client_info = info if isinstance(info, dict) else {}
        return {
            "protocolVersion": PROTOCOL_VERSION,
            "agentCapabilities": {
                "loadSession": False,
                "promptCapabilities": {"image": False, "audio": False, "embeddedContext": True},
                "mcpCapabilities": {"http": False, "sse": False},
                "sessionCapabilities": {},
            },
            "authMethods": [],
            "agentInfo": {"name": "acp-server", "title": "acp-server", "version": __version__},
        }

    async def authenticate(self, params: Params) -> dict[str, Any]:
        # No authentication is needed; answering keeps clients that always call it working.
        return {}

    # ----- sessions ------------------------------------------------------------------------

    async def new_session(self, params: Params) -> dict[str, Any]:
        from acp_server.editor import Editor
        from acp_server.session import Session

        _check("session/new", "acp/session_new.json", params)
        cwd = _absolute_dir(params["cwd"], "cwd")
        extra = tuple(
            _absolute_dir(d, f"additionalDirectories[{i}]")
            for i, d in enumerate(params.get("additionalDirectories") or [])
        )
        session_id = f"sess_{uuid.uuid4().hex}"
        assert self.conn is not None
        session = Session(
            id=session_id,
            client=Editor(self.conn, session_id, self.client_capabilities),
            cwd=cwd,
            additional_dirs=extra,
            mcp_servers=list(params.get("mcpServers") or []),
            backend=self.backend,
            send_update=self._send_update,
            settings=self.settings,
        )
        self.sessions[session.id] = session
        asyncio.get_running_loop().call_soon(_warm_up_validation)
        return {"sessionId": session.id, **_session_state(session)}

    async def prompt(self, params: Params) -> dict[str, Any]:
        _check("session/prompt", "acp/session_prompt.json", params)
        session = self._session(params["sessionId"])
        stop = await session.prompt(prompt_message(params["prompt"]))
        if self.conn is not None:
            await self.conn.drain()
        return {"stopReason": stop}

    async def set_mode(self, params: Params) -> dict[str, Any]:
        from acp_server import session_config

        _check("session/set_mode", "acp/session_set_mode.json", params)
        session = self._session(params["sessionId"])
        session.set_mode(session_config.parse_mode(params["modeId"], "modeId"))
        return {}

    async def set_config_option(self, params: Params) -> dict[str, Any]:
        from acp_server import session_config

        _check("session/set_config_option", "acp/session_set_config_option.json", params)
        session = self._session(params["sessionId"])
        if params["configId"] != session_config.MODE_OPTION:
            raise InvalidParams(
                f"Invalid params: unknown `configId` {params['configId']!r}; "
                f"this agent offers: {session_config.MODE_OPTION}.",
                {"field": "configId"},
            )
        session.set_mode(session_config.parse_mode(params["value"], "value"))
        return {"configOptions": session_config.config_options(session.mode)}

    def cancel(self, params: Params) -> None:
        session = self.sessions.get(params.get("sessionId", ""))
        if session is not None:
            session.cancel()

    # ----- helpers -------------------------------------------------------------------------

    @property
    def backend(self) -> Backend:
        """The model backend, made on first use (not on the path to `initialize`)."""
        if self._backend is None:
            self._backend = self._make_backend()
        return self._backend

    def _session(self, session_id: str) -> Session:
        session = self.sessions.get(session_id)
        if session is None:
            raise ResourceNotFound(
                f"Unknown session {session_id!r}: create one with session/new first.",
                {"sessionId": session_id},
            )
        return session

    def _send_update(self, session_id: str, update: Update) -> None:
        if self.conn is not None:
            self.conn.notify("session/update", {"sessionId": session_id, "update": update})


def _session_state(session: Session) -> dict[str, Any]:
    from acp_server import session_config

    return {
        "modes": session_config.modes_state(session.mode),
        "configOptions": session_config.config_options(session.mode),
    }


def _check(method: str, schema: str, params: Params) -> None:
    found = schemas.problems(schema, params)
    if found:
        raise InvalidParams(
            f"Invalid params for {method}: " + "; ".join(found) + ".",
            {"errors": found},
        )


def _absolute_dir(value: str, field: str) -> Path:
    if not os.path.isabs(value):
        raise InvalidParams(
            f"Invalid params: `{field}` must be an absolute path, got {value!r}.",
            {"field": field},
        )
    return Path(os.path.normpath(value))


def prompt_message(blocks: list[dict[str, Any]]) -> Message:
    """An ACP prompt as a neutral user message."""
    from acp_server.messages import ContentPart, ImagePart, Message, TextPart

    parts: list[ContentPart] = []
    for block in blocks:
        kind = block.get("type")
        if kind == "text":
            parts.append(TextPart(block["text"]))
        elif kind == "image":
            parts.append(ImagePart(block["data"], block["mimeType"], block.get("uri")))
        elif kind == "resource_link":
            parts.append(TextPart(f"[Referenced: {block['name']} <{block['uri']}>]"))
        elif kind == "resource":
            parts.append(TextPart(_embedded(block["resource"])))
        elif kind == "audio":
            parts.append(TextPart("[An audio clip was attached; this agent cannot hear audio.]"))
        else:
            parts.append(TextPart(f"[An attachment of unknown type {kind!r} was left out.]"))
    return Message(role="user", content=tuple(parts), message_id=f"user_{uuid.uuid4().hex}")


def _embedded(resource: dict[str, Any]) -> str:
    uri = resource["uri"]
    if isinstance(resource.get("text"), str):
        return f'<resource uri="{uri}">\n{resource["text"]}\n</resource>'
    mime = resource.get("mimeType") or "binary data"
    return f"[Attached {uri} ({mime}); its binary content is not shown.]"


def _warm_up_validation() -> None:
    """Import jsonschema in the background once a session exists (scheduled to run after the
    answer is written), so the first tool call does not wait for it."""

    def load() -> None:
        try:
            schemas.validator("acp/session_prompt.json")
        except Exception:
            log.exception("could not load the session/new schema")

    threading.Thread(target=load, name="schema-warmup", daemon=True).start()
