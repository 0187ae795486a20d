"""A session's MCP servers: connected in the background, offered as tools, failures told once.

`session/new` (or load, resume) answers at once: `McpServers` starts one background task per
server and nothing waits for them. The first prompt waits for the pending connections, each
bounded by its server's start-up timeout, then proceeds with what connected. A server that
failed is reported once: the session's `report` callback shows a notice at once when the editor
shows notices, otherwise the report waits for the next turn and is said as an agent message
(`take_reports`). The model hears of it too: `note_for_model` is a line for its system prompt,
so it does not promise a tool that is not there, and names the servers with their number of
tools (their tools may be deferred behind `search_tools`: see `tools.mcp.tool_search`).

The `mcp` package is imported off the event loop, and only here, when a session has servers:
it costs most of a second, which `initialize` and sessions without servers never pay.

Why here and not in `tools/mcp/`: this is the session's side of its servers (when they connect,
how a failure reaches the user through the session, what the model is told), and it reports
through the session's voice; `tools/mcp/` is what one server is, and sits below the sessions.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from acp_server.tools.mcp.config import ServerConfig, from_editor, merged

if TYPE_CHECKING:
    from acp_server.tools.base import Tool
    from acp_server.tools.mcp.connection import McpConnection
    from acp_server.tools.mcp.tool_search import ToolCatalog

log = logging.getLogger(__name__)

Report = Callable[[str], None]


def configured(
    given: Sequence[Mapping[str, Any]] | None, from_file: Sequence[ServerConfig]
) -> list[ServerConfig]:
    """The editor's MCP servers (checked: -32602 when one cannot be used) and the configuration
    file's; the editor's wins on a name clash."""
    return merged(from_editor(given, acp_allowed=False), from_file)


class McpServers:
    """The MCP servers of one session (see the module docstring)."""

    def __init__(
        self,
        servers: Sequence[ServerConfig],
        cwd: Path,
        notify: Report | None,
        tool_share: float | None = None,
    ) -> None:
        self.servers = list(servers)
        self._share = tool_share  # of the window for MCP tools (None: the default)
        self._catalog: ToolCatalog | None = None
        self._new_turn = True  # the next catalog() starts a turn (`before_turn` was called)
        self._cwd = cwd
        self._notify = notify  # shows a notice now; None: reports wait for the next turn
        self._reports: list[str] = []
        self._connected: list[McpConnection] = []
        self._unavailable: dict[str, str] = {}  # server name: why, for the model
        self._pending: set[asyncio.Task[None]] = set()
        self._closed = False
        for server in self.servers:
            task = asyncio.get_running_loop().create_task(self._connect(server))
            self._pending.add(task)
            task.add_done_callback(self._pending.discard)

    @classmethod
    def start(
        cls,
        servers: Sequence[ServerConfig],
        cwd: Path,
        notify: Report | None,
        tool_share: float | None = None,
    ) -> McpServers | None:
        """Start connecting to `servers` in the background (None when there are none)."""
        return cls(servers, cwd, notify, tool_share) if servers else None

    async def _connect(self, server: ServerConfig) -> None:
        reason = None
        try:
            name = "acp_server.tools.mcp.connection"
            module = await asyncio.to_thread(importlib.import_module, name)
            connection: McpConnection = module.McpConnection(server, self._cwd, self.report)
            await connection.connect()
        except Exception as exc:  # McpUnavailable says why; anything else is our failure
            if type(exc).__name__ != "McpUnavailable":
                log.exception("connecting to the MCP server %s failed", server.name)
            reason = str(exc) or repr(exc)
        if reason is not None:
            self._unavailable[server.name] = reason
            self.report(
                f"The MCP server {server.name!r} (from {server.origin}) is not available: "
                f"{reason}. Its tools are left out of this session; `acp-server doctor --mcp` "
                "can check its configuration."
            )
        elif self._closed:
            await connection.close()
        else:
            self._connected.append(connection)
            log.info("MCP server %s: %d tool(s)", server.name, len(connection.tools))

    def report(self, text: str) -> None:
        """Tell the user once: a notice now, or an agent message at the next turn."""
        if self._closed:
            return
        log.warning("%s", text)
        if self._notify is not None:
            self._notify(text)
        else:
            self._reports.append(text)

    async def before_turn(self, tell: Callable[[str, str], None]) -> str:
        """Wait for pending connections, say what failed since the last turn; the note for the
        model's system prompt ("" or a paragraph)."""
        await self.ready()
        self._new_turn = True
        reports, self._reports = self._reports, []
        for text in reports:
            tell(text, "warning")
        note = self.note_for_model()
        return f"\n\n{note}" if note else ""

    async def ready(self) -> None:
        """Wait for the connections still being made (each within its start-up timeout)."""
        if self._pending:
            await asyncio.wait(set(self._pending))

    def tools(self) -> list[Tool]:
        """The tools of the connected servers, uniquely named."""
        return [tool for _, tool in self._tools()]

    def _tools(self) -> list[tuple[McpConnection, Tool]]:
        if not self._connected:
            return []
        from acp_server.tools.mcp.tools import tools_of

        taken: set[str] = set()
        return [(c, tool) for c in self._connected for tool in tools_of(c, taken)]

    def catalog(self) -> ToolCatalog:
        """The session's tool catalog, told of a new turn with the servers' tools as now."""
        from acp_server.tools.mcp.tool_search import TOOL_SHARE, McpTool, ToolCatalog

        if self._catalog is None:
            self._catalog = ToolCatalog(self._share or TOOL_SHARE)
        tools = [McpTool(t, c.name, c.config.tools) for c, t in self._tools()]
        self._catalog.begin_turn(tools, new=self._new_turn)
        self._new_turn = False
        return self._catalog

    def note_for_model(self) -> str:
        """Lines for the model: the servers and their number of tools, and the servers whose
        tools are missing ("" when there are neither)."""
        counts = [f"{c.name} ({len(c.tools)} tools)" for c in self._connected if c.tools]
        have = (
            "Tools of these MCP servers are available in this session: "
            + ", ".join(counts)
            + ". When search_tools is among your tools, some of theirs are not listed yet: "
            "search_tools finds and loads the ones a task needs."
            if counts
            else ""
        )
        missing_note = self._missing_note()
        return "\n\n".join(n for n in (have, missing_note) if n)

    def _missing_note(self) -> str:
        missing = dict(self._unavailable)
        for connection in self._connected:
            if connection.broken and connection.restarted:
                missing[connection.name] = connection.broken
        if not missing:
            return ""
        listed = "; ".join(f"{name} ({why})" for name, why in missing.items())
        return (
            "These MCP servers the user configured are not available in this session, so "
            f"their tools are missing; do not offer or promise them: {listed}."
        )

    async def close(self) -> None:
        """Disconnect every server and end its processes."""
        self._closed = True
        for task in list(self._pending):
            task.cancel()
        if self._pending:
            await asyncio.wait(set(self._pending), timeout=5.0)
        connections, self._connected = self._connected, []
        await asyncio.gather(*(c.close() for c in connections), return_exceptions=True)
