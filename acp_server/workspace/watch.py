"""A turn's toolbox, watched for the folders it works in: once a tool call touched a file under
a folder with its own instructions file, the turn's next request carries it (`on_new`, from
`workspace.instruct`, rebuilds the turn's system prompt). Everything else is the toolbox's own."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from acp_server import updates
from acp_server.context import ToolRoom
from acp_server.messages import ToolCall, ToolSpec
from acp_server.tools.base import ToolOutcome

if TYPE_CHECKING:
    from acp_server.agent.loop import Emit, ToolRunner


class Watched:
    """`tools`, with each call's folders noted (`touched`) after it ran."""

    def __init__(
        self, tools: ToolRunner, touched: Callable[[ToolCall], bool], on_new: Callable[[], None]
    ) -> None:
        self._tools = tools
        self._touched = touched  # `Workspace.touched`: True when new instructions apply
        self._on_new = on_new

    def specs(self, room: ToolRoom | None = None) -> tuple[ToolSpec, ...]:
        return self._tools.specs(room)

    def announce(self, call: ToolCall) -> updates.Update:
        return self._tools.announce(call)

    async def run(self, call: ToolCall, emit: Emit) -> ToolOutcome:
        outcome = await self._tools.run(call, emit)
        if self._touched(call):
            self._on_new()
        return outcome
