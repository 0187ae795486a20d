"""A session: its roots, its model, its history, the running turn and the prompts queued behind it.

A session is made by the registry (`registry.Sessions`) with everything it works with: the
model backend, the editor, the recorder, the permissions, the settings and where its updates
go. `set_backend` changes the model between turns and keeps the history: a turn already
running finishes with the backend it started with, and the next turn uses the new one.

Prompts on one session are served in arrival order (an `asyncio.Lock` is FIFO). A cancel ends
the running turn and every prompt queued at that moment; each answers `cancelled`. The one
place that turns cancellation into a stop reason is `_serve_turn`. Updates of a turn are
dropped once that turn has ended, so nothing arrives after its answer.

Every history message and every shown update goes to the recorder as it happens (a
`NullRecorder` when there is no store), and a prompt is answered only after its writes are
committed. If they could not be, the user is told so and the answer says `notSaved`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
import uuid
from collections.abc import Callable, Coroutine, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from acp_server import updates
from acp_server.backends import Backend
from acp_server.editor_api import EditorApi
from acp_server.messages import Message
from acp_server.permissions import Mode, Permissions
from acp_server.session import options
from acp_server.session.choosing import ModelChoosing, SendUpdate
from acp_server.session.command_table import BUILTIN, CHOICE_COMMANDS, CommandTable, Invocation
from acp_server.session.commands import CommandServing, Emit, PromptOutcome
from acp_server.session.mcp import McpServers
from acp_server.session.text import INTERNAL_FAILURE, NOT_SAVED, system_prompt, title_for
from acp_server.settings import Settings
from acp_server.store.database import SaveFailed, iso
from acp_server.store.transcript import NullRecorder, Recorder
from acp_server.tools.jobs import Jobs
from acp_server.tools.mcp_config import ServerConfig
from acp_server.workspace.workspace import Workspace, instruct, user_folder

if TYPE_CHECKING:
    from acp_server.agent.loop import StopReason, ToolRunner
    from acp_server.agent.spending import Spending
    from acp_server.agent.turn_context import SessionContext, TurnContext
    from acp_server.models.catalogue import ModelEntry
    from acp_server.session.choice import ModelChoice

__all__ = ["PromptOutcome", "Session"]  # PromptOutcome: from session_commands

log = logging.getLogger(__name__)


class Session(ModelChoosing, CommandServing):
    """One conversation: created by the registry, prompted by the protocol."""

    def __init__(
        self,
        session_id: str,
        *,
        cwd: Path,
        backend: Backend,
        editor: EditorApi,
        recorder: Recorder | NullRecorder,
        permissions: Permissions,
        settings: Settings,
        send_update: SendUpdate,
        additional_dirs: tuple[Path, ...] = (),
        mcp_servers: Sequence[ServerConfig] = (),
        history: Iterable[Message] = (),
        title: str | None = None,
        choice: ModelChoice | None = None,
    ) -> None:
        self.id = session_id
        self.cwd = cwd
        self.additional_dirs = additional_dirs
        self.mcp = McpServers.start(mcp_servers, cwd, self.tell if editor.can_notice else None)
        self.history: list[Message] = list(history)
        self.title = title
        self._backend = backend
        self._editor = editor
        self._recorder = recorder
        self._permissions = permissions
        self._settings = settings
        self._send_update = send_update
        self._tools: ToolRunner | None = None
        self._jobs = Jobs()  # background commands: they outlive turns, not the session
        self._context: SessionContext | None = None  # made at the first turn
        self.workspace = Workspace(cwd, additional_dirs, user_folder(settings.config_option))
        self._spending: Spending | None = None  # what the session cost (made with the context)
        self.commands = CommandTable((*BUILTIN, *CHOICE_COMMANDS))
        self._command_emit: Emit | None = None  # while a slash command runs
        self.plan_shown = False  # a plan was shown and not removed since (/clear removes it)
        self._queue = asyncio.Lock()
        self._epoch = 0  # incremented by each cancel; queued prompts of an older epoch end
        self._turn: asyncio.Task[PromptOutcome] | None = None
        self._cancelled: asyncio.Task[PromptOutcome] | None = None
        self._metered: asyncio.Task[None] | None = None  # the usage shown after a load
        self.choice = choice  # the model and thought level; None: one fixed backend
        # A history carried over to this model before the next prompt joins it (a stored
        # history may have been made by another model).
        self._carry: ModelEntry | None = choice.entry if choice else None

    @property
    def backend(self) -> Backend:
        return self._backend

    def set_backend(self, backend: Backend) -> None:
        """Answer with `backend` from the next turn on, with the same history. A running turn
        is not interrupted: it finishes with the backend it started with. The context budget
        is made anew for it (its window is its own)."""
        self._backend = backend
        self._context = None

    def _toolbox(self) -> ToolRunner:
        """The session's tools, made at the first turn."""
        if self._tools is None or self.mcp is not None:  # MCP tools: as they are now
            # Imported at the first turn: `session/new` does not need the tools (~20 ms).
            from acp_server.tools.defaults import default_tools
            from acp_server.tools.toolbox import Toolbox

            self._tools = Toolbox(
                [*default_tools(self._settings.fetch), *(self.mcp.tools() if self.mcp else ())],
                cwd=self.cwd,
                roots=self.roots,
                client=self._editor,
                permissions=self._permissions,
                jobs=self._jobs,
            )
        return self._tools

    @property
    def mode(self) -> Mode:
        return self._permissions.mode

    def state(self) -> dict[str, Any]:
        """The session's modes and config options, as ACP's answers carry them."""
        return options.state(self.mode, self._model_options())

    def set_mode(self, mode: Mode) -> None:
        """Switch the permission mode and announce it both ways (legacy modes, config option)."""
        self._permissions.mode = mode
        self._recorder.mode(mode)
        for update in options.mode_updates(mode, self._model_options()):
            self._send_update(self.id, update)

    def _shown(self, update: updates.Update) -> updates.Update:
        """A plan in the form this editor takes (live and on load); notes that one is shown."""
        if updates.is_plan(update):
            self.plan_shown = update.get("sessionUpdate") != "plan_removed"
            return updates.plan_view(update, self._editor.can_plan)
        return update

    def replayed(self, update: updates.Update) -> list[updates.Update]:
        """A stored update as this session's editor is shown it on load: a plan in the form
        it takes, a compaction as a card when the editor does not show compactions."""
        update = self._shown(update)
        if update.get("sessionUpdate") != "compaction_update" or self._editor.can_show_compaction:
            return [update]
        from acp_server.agent.compaction_view import as_card

        return as_card(update)

    @property
    def roots(self) -> tuple[Path, ...]:
        return (self.cwd, *self.additional_dirs)

    async def prompt(self, message: Message, shown: Iterable[updates.Update] = ()) -> PromptOutcome:
        """Queue a user message behind any running turn, run it, say how it ended.
        `shown` are the user_message_chunk updates that replay the prompt on load."""

        def start() -> Coroutine[Any, Any, PromptOutcome]:
            self._begin(message, shown)
            return self._serve_turn(message)

        return await self._queued(start)

    async def command(
        self, invocation: Invocation, shown: Iterable[updates.Update] = ()
    ) -> PromptOutcome:
        """Run a slash command in its place among the prompts; it is never sent to the model
        and adds nothing to the history (the prompt that invoked it is shown on load)."""

        def start() -> Coroutine[Any, Any, PromptOutcome]:
            for update in shown:
                self._recorder.shown(update)
            return self._serve_command(invocation)

        return await self._queued(start)

    async def _queued(
        self, start: Callable[[], Coroutine[Any, Any, PromptOutcome]]
    ) -> PromptOutcome:
        epoch = self._epoch
        async with self._queue:
            if epoch != self._epoch:
                return PromptOutcome("cancelled")
            self._carry_over()
            turn = asyncio.create_task(start())
            self._turn = turn
            try:
                # `wait` (not `await turn`) so that a cancelled *turn* is told apart from a
                # cancelled *request*; only the latter propagates.
                await asyncio.wait({turn})
            except asyncio.CancelledError:
                turn.cancel()
                await asyncio.wait({turn})
                raise
            finally:
                self._turn = None
            outcome = PromptOutcome("cancelled") if turn.cancelled() else turn.result()
            return dataclasses.replace(outcome, not_saved=await self._end(outcome.stop))

    async def close(self) -> None:
        """The session goes: its turn is cancelled, its background commands and MCP servers end."""
        self.cancel()
        await self._jobs.close()
        if self._metered is not None:
            self._metered.cancel()
        self.workspace.close()
        if self.mcp is not None:
            await self.mcp.close()

    def cancel(self) -> None:
        """End the running turn and every prompt queued now (no-op when idle)."""
        self._epoch += 1
        # Once per turn: a second cancel must not interrupt the first one's cleanup
        # (releasing terminals, killing processes).
        if self._turn is not None and self._cancelled is not self._turn:
            self._cancelled = self._turn
            self._jobs.turn_cancelled(self._turn)
            self._turn.cancel()

    def _add(self, message: Message) -> None:
        """The one place the session writes history: append the message, and record it."""
        self.history.append(message)
        self._recorder.message(message)

    def _begin(self, message: Message, shown: Iterable[updates.Update]) -> None:
        for update in shown:
            self._recorder.shown(update)
        self._add(message)
        if self.title is None:
            self.title = title_for(message)
            self._recorder.title(self.title)
            self._send_update(
                self.id,
                {
                    "sessionUpdate": "session_info_update",
                    "title": self.title,
                    "updatedAt": iso(time.time()),
                },
            )

    async def _end(self, stop: StopReason) -> str | None:
        """Record the end of the turn and wait for the turn's writes. None when all of them
        are committed; else the message that told the user the turn was not saved."""
        self._recorder.turn_ended(stop)
        try:
            await self._recorder.committed()
        except SaveFailed as exc:
            log.error("turn of session %s not saved: %s", self.id, exc)
            text = NOT_SAVED.format(path=self._recorder.where)
            # Live only: it is about the store itself, which just failed to take this turn.
            chunk = updates.message_chunk("agent_message_chunk", text, f"msg_{uuid.uuid4().hex}")
            self._send_update(self.id, chunk)
            return text
        return None

    async def _turn_context(self, backend: Backend, emit: Emit) -> TurnContext:
        """The context steps for a turn with `backend`; the server's window is looked up beside
        the turn (`SessionContext.look_up`)."""
        from acp_server.agent.turn_context import TurnContext

        context = self._session_context()
        context.look_up(backend)
        return TurnContext(
            context,
            backend,
            emit,
            store=self._recorder.history,
            compaction_updates=self._editor.can_show_compaction,
            price=self.choice.entry.price if self.choice and self.choice.entry else None,
            summarizer=self._summarizer(),
        )

    def _session_context(self) -> SessionContext:
        """The session's budget, made at the first turn and for each new backend."""
        from acp_server.agent.turn_context import SessionContext

        if self._context is None:
            entry = self.choice.entry if self.choice is not None else None
            settings = entry.budget_settings(self._settings) if entry else self._settings
            self._context = SessionContext.made(settings, self._spending)
            if entry is not None and entry.facts is not None:
                self._context.output_limit = entry.facts.output
            self._spending = self._context.spending  # the session's, across model switches
        return self._context

    def show_usage(self) -> None:
        """After `session/load`: one `usage_update` for the loaded conversation, once the
        window the server reports is known (asked beside the load). It is the meter, not the
        conversation: sent, not recorded."""
        if self._metered is None:
            self._metered = asyncio.create_task(self._show_usage(), name="loaded-usage")

    async def _show_usage(self) -> None:
        try:
            context = self._session_context()
            context.look_up(self._backend)
            await context.settle(wait=True)
            system = system_prompt(self.cwd, self.additional_dirs) + self.workspace.current()
            usage = context.usage(system, self._toolbox().specs(), self.history)
        except Exception:
            log.exception("the usage of loaded session %s could not be shown", self.id)
            return
        if self._turn is None:  # a turn that started meanwhile shows its own
            self._send_update(self.id, usage)

    def warm(self) -> None:
        """Ahead of the first turn (`warmup`): the tools, the context budget, git's status."""
        self._toolbox()
        self._session_context()
        self.workspace.start()

    def _emitter(self) -> tuple[Emit, Callable[[], None]]:
        """(emit, end): updates shown and recorded until `end` is called."""
        live = True

        def emit(update: updates.Update) -> None:
            if live:
                self._recorder.shown(update)
                self._send_update(self.id, self._shown(update))

        def end() -> None:
            nonlocal live
            live = False

        return emit, end

    def _tell(self, emit: Emit) -> Callable[[str, str], None]:
        def tell(text: str, severity: str) -> None:
            if self._editor.can_notice:
                emit({"sessionUpdate": "notice", "severity": severity, "title": text})
            else:
                emit(updates.message_chunk("agent_message_chunk", text + "\n\n", None))

        return tell

    async def _serve_turn(self, message: Message) -> PromptOutcome:
        # Imported at the first turn: `session/new` does not need the loop (~10 ms).
        from acp_server.agent.loop import Turn, TurnFailure, run_turn
        from acp_server.tools.base import CancelledByUser

        emit, end = self._emitter()
        backend = self._backend  # kept for the whole turn, whatever set_backend does meanwhile
        turn = Turn(
            backend=backend,
            history=self.history,
            emit=emit,
            record=self._recorder.message,
            max_requests=self._settings.max_turn_requests,
            tell=self._tell(emit),
            system=system_prompt(self.cwd, self.additional_dirs),
            context=await self._turn_context(backend, emit),
            thought_level=self.choice.level if self.choice else None,
        )
        window = self._session_context().window.size  # the instructions take a share at most
        await instruct(turn, self._toolbox, self.workspace, self._mcp_turn(emit), window)
        try:
            stop = await run_turn(turn)
        except (asyncio.CancelledError, CancelledByUser):
            return PromptOutcome("cancelled")
        except Exception:
            log.exception("turn failed in session %s", self.id)
            emit(updates.message_chunk("agent_message_chunk", INTERNAL_FAILURE, None))
            return PromptOutcome("end_turn", TurnFailure("internal", INTERNAL_FAILURE))
        finally:
            end()
        if stop == "refusal":
            self._forget_refused(message)
        return PromptOutcome(stop, turn.failure)

    async def _mcp_turn(self, emit: Emit) -> str:
        """Wait for MCP servers still connecting, say which failed; a note for the model."""
        return await self.mcp.before_turn(self._tell(emit)) if self.mcp else ""

    def _forget_refused(self, message: Message) -> None:
        """The refused prompt and everything after it stay out of later requests (found by
        identity: a compaction during the turn may have rebuilt the history before it)."""
        start = next((i for i, m in enumerate(self.history) if m is message), None)
        if start is not None:
            del self.history[start:]
            self._recorder.truncate(start)
