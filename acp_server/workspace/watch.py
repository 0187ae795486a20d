"""A turn's system prompt and toolbox, watched for the folders it works in: once a tool call
touched a file under a folder with its own instructions file, the turn's next request carries
it (`instruct` rebuilds the turn's system prompt). Everything else is the toolbox's own."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from acp_server import updates
from acp_server.messages import ToolCall, ToolSpec
from acp_server.tools.base import ToolOutcome
from acp_server.workspace.workspace import Tell, Workspace

if TYPE_CHECKING:
    from acp_server.agent.loop import Emit, ToolRunner, Turn


async def instruct(
    turn: Turn,
    tools: Callable[[], ToolRunner],
    where: Workspace,
    base: str,
    tell: Tell,
    mcp: Awaitable[str],
) -> None:
    """Set the turn's system prompt (`base`, the project instructions and the environment, the
    MCP note) and its tools, watched: a nested instructions file joins from the next request.
    The tools are made after the MCP servers were waited for (`mcp`): theirs are among them."""
    part = await where.prompt_part(tell)
    note = await mcp
    turn.system = base + part + note

    def rebuild() -> None:
        turn.system = base + where.current() + note
        where.tell_news(tell)

    turn.tools = Watched(tools(), where, rebuild)


class Watched:
    """`tools`, with each call's folders noted in `workspace` after it ran."""

    def __init__(self, tools: ToolRunner, workspace: Workspace, on_new: Callable[[], None]) -> None:
        self._tools = tools
        self._workspace = workspace
        self._on_new = on_new

    def specs(self) -> tuple[ToolSpec, ...]:
        return self._tools.specs()

    def announce(self, call: ToolCall) -> updates.Update:
        return self._tools.announce(call)

    async def run(self, call: ToolCall, emit: Emit) -> ToolOutcome:
        outcome = await self._tools.run(call, emit)
        if self._workspace.touched(call):
            self._on_new()
        return outcome
