"""What a session's turns are made of, kept between turns: the tools and the context budget.

The tools are made at the first turn (and again while MCP servers may add some); the context
budget (`agent.turn_context.SessionContext`: window, estimates, what the user was told) at the
first turn and anew for each new backend, with what the session spent carried across. After a
`session/load` the meter is shown once for the loaded conversation.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from acp_server.agent.history import History
from acp_server.backends import Backend
from acp_server.editor_api import EditorApi
from acp_server.permissions import Mode, Permissions
from acp_server.session.client_prompt import ClientPrompt
from acp_server.session.mcp import McpServers
from acp_server.session.model import SessionModel
from acp_server.session.text import system_prompt
from acp_server.session.voice import Emit
from acp_server.settings import Settings
from acp_server.tools.commands.jobs import Jobs

if TYPE_CHECKING:
    from acp_server.agent.loop import ToolRunner
    from acp_server.agent.spending import Spending
    from acp_server.agent.turn_context import SessionContext, TurnContext
    from acp_server.confine.sandbox import Sandbox
    from acp_server.tools.base import Tool
    from acp_server.tools.task import Delegate

D = TypeVar("D", bound="Delegate")
log = logging.getLogger(__name__)

# What the meter of a loaded session imports (`import_in_steps`): the last bytes of a long
# replay leave between them instead of waiting for all (~45 ms).
METER_MODULES = (
    "acp_server.agent.turn_context",
    "acp_server.tools.toolbox",
    "acp_server.tools.files.edit",
    "acp_server.tools.search.glob",
    "acp_server.tools.commands.shell",
    "acp_server.tools.web",
    "acp_server.tools.task",
)


async def import_in_steps(names: Iterable[str]) -> None:
    """Import `names`, one a pass of the event loop: what waits meanwhile (a request, the
    rest of a long reply being written) waits for one module at most. The meter below and
    the first turn's warm-up (`warmup`) import this way."""
    for name in names:
        await asyncio.sleep(0)
        importlib.import_module(name)


class TurnParts:
    """A session's tools and context budget, made when first needed."""

    def __init__(
        self,
        roots: tuple[Path, ...],
        *,
        editor: EditorApi,
        permissions: Permissions,
        settings: Settings,
        mcp: McpServers | None,
        jobs: Jobs,
        client_prompt: ClientPrompt | None = None,
        cache_key: str | None = None,
    ) -> None:
        self._roots = roots  # the first is the working directory
        self._cache_key = cache_key  # the session's, for the servers' prompt caches
        self.client_prompt = client_prompt  # the editor's system prompt (client_prompt.py)
        self.delegate: Delegate | None = None  # runs the task tool's jobs (subagents/children.py)
        # Changes the session's mode and announces it (Session.set_mode), for plan_ready.
        self.switch_mode: Callable[[Mode], None] | None = None
        self._editor = editor
        self._permissions = permissions
        self._settings = settings
        self._mcp = mcp
        self._jobs = jobs
        self._tools: ToolRunner | None = None
        self._sandbox: Sandbox | None = None  # where commands run: made with the tools
        self._sandbox_said = False
        self._context: SessionContext | None = None
        self._spending: Spending | None = None  # what the session cost (made with the context)
        self._metered: asyncio.Task[None] | None = None  # the usage shown after a load

    @property
    def system(self) -> str:
        """Our prompt, or the client's override (our rules kept); the project instructions,
        the environment and the MCP note follow it, then `appendix`."""
        client = self.client_prompt
        return system_prompt(self._roots[0], self._roots[1:], client.override if client else None)

    @property
    def appendix(self) -> str:
        """The client's appended prompt: the system prompt's last part."""
        return self.client_prompt.appendix if self.client_prompt else ""

    def offer(self, delegate: D) -> D:
        """Offer the `task` tool, its jobs run by `delegate` (the session's `Subagents`)."""
        self.delegate = delegate
        return delegate

    def tools(self) -> ToolRunner:
        """The session's tools, made at the first turn."""
        if self._tools is None or self._mcp is not None:  # MCP tools: as they are now
            # Imported at the first turn: `session/new` does not need the tools (~20 ms).
            from acp_server.confine.sandbox import DEFAULT_LEVEL, Sandbox, parse_level
            from acp_server.tools.defaults import default_tools
            from acp_server.tools.task import task_tool
            from acp_server.tools.toolbox import Toolbox

            if self._sandbox is None:
                level = parse_level(self._settings.sandbox or DEFAULT_LEVEL, "sandbox")
                passed = self._settings.command_env
                self._sandbox = Sandbox(level, self._roots, passed)
            tools = [
                *default_tools(self._settings.fetch),
                *self._questions(),
                *(self._mcp.tools() if self._mcp else ()),
            ]
            if self.delegate is not None:
                tools.append(task_tool(self.delegate))
            self._tools = Toolbox(
                tools,
                cwd=self._roots[0],
                roots=self._roots,
                client=self._editor,
                permissions=self._permissions,
                jobs=self._jobs,
                sandbox=self._sandbox,
                catalog=self._mcp.catalog() if self._mcp else None,
            )
        return self._tools

    def _questions(self) -> list[Tool]:
        """ask_user and plan_ready, for an editor that shows forms (never offered to one that
        does not); plan_ready switches the mode through `switch_mode`, set by the session."""
        if not self._editor.can_elicit_form:
            return []
        from acp_server.tools.ask import ASK_USER
        from acp_server.tools.plan_ready import plan_ready_tool

        permissions, switch = self._permissions, self.switch_mode
        if switch is None:
            return [ASK_USER]
        return [ASK_USER, plan_ready_tool(lambda: permissions.mode, switch)]

    def budget(self, model: SessionModel) -> SessionContext:
        """The session's budget, made at the first turn and for each new backend."""
        from acp_server.agent.turn_context import SessionContext

        if self._context is None:
            entry = model.choice.entry if model.choice is not None else None
            settings = entry.budget_settings(self._settings) if entry else self._settings
            self._context = SessionContext.made(settings, self._spending)
            self._context.cache_key = self._cache_key
            if entry is not None and entry.facts is not None:
                self._context.output_limit = entry.facts.output
            self._spending = self._context.spending  # the session's, across model switches
        return self._context

    def new_backend(self) -> None:
        """The backend changed: the budget is made anew (its window is its own)."""
        self._context = None

    def cleared(self) -> None:
        """The history was emptied: no compaction is due."""
        if self._context is not None:
            self._context.due = False

    async def turn_context(self, model: SessionModel, backend: Backend, emit: Emit) -> TurnContext:
        """The context steps for a turn with `backend`, once the window the server reports is
        known (`SessionContext.look_up`; the catalogue's for a hosted model it knows, so no
        request): the first request is shaped as the second (the same tools, the same share
        of the window for the instructions), or a provider's cache serves it nothing."""
        from acp_server.agent.turn_context import TurnContext

        context = self.budget(model)
        context.look_up(backend)
        await context.settle(wait=True)
        return TurnContext(
            context,
            backend,
            emit,
            compaction_updates=self._editor.can_show_compaction,
            price=model.price,
            summarizer=model.summarizer(),
        )

    def show_usage(
        self, model: SessionModel, history: History, send: Emit, idle: Callable[[], bool]
    ) -> None:
        """After `session/load`: one `usage_update` for the loaded conversation, once the
        window the server reports is known (asked beside the load). It is the meter, not the
        conversation: sent, not recorded; not when a turn started meanwhile (it shows its own)."""
        if self._metered is None:
            work = self._show_usage(model, history, send, idle)
            self._metered = asyncio.create_task(work, name="loaded-usage")

    async def _show_usage(
        self, model: SessionModel, history: History, send: Emit, idle: Callable[[], bool]
    ) -> None:
        try:
            await import_in_steps(METER_MODULES)
            context = self.budget(model)
            context.look_up(model.backend)
            await context.settle(wait=True)
            usage = context.usage(
                self.system + self.appendix, self.tools().specs(context.tool_room()), history
            )
        except Exception:
            log.exception("the usage of a loaded session could not be shown")
            return
        if idle():
            send(usage)

    def probe_sandbox(self) -> None:
        """Have the way commands are confined found in the background (`start_probe`)."""
        from acp_server.confine import sandbox

        if (self._settings.sandbox or sandbox.DEFAULT_LEVEL).strip().lower() != "off":
            sandbox.start_probe()

    def say_sandbox(self, tell: Callable[[str, str], None]) -> None:
        """Once per session: a sandbox level this machine cannot keep (commands then ask).
        Told at a turn's start when the machine's answer is known (the warm-up found it while
        the user typed), else once the turn's first command has it worked out: a prompt sent
        at once does not wait for bubblewrap to start (~8 ms) before its first request."""
        box = self._sandbox
        if box is None or self._sandbox_said:
            return
        if box.decided:
            self._tell_sandbox(box, tell)
        else:
            box.when_decided(lambda: self._tell_sandbox(box, tell))

    def _tell_sandbox(self, box: Sandbox, tell: Callable[[str, str], None]) -> None:
        problem = box.unavailable()
        if problem is not None and not self._sandbox_said:
            self._sandbox_said = True
            tell(problem, "warning")

    def close(self) -> None:
        if self._metered is not None:
            self._metered.cancel()
        if self._sandbox is not None:
            self._sandbox.close()
