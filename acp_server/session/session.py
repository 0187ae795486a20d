"""A session: a small coordinator of the parts it *has*, each owning one concern.

- `history` (`agent.history.History`): the conversation the model sees, changed only through
  it, each change recorded as made;
- a `PromptQueue` (queue.py): prompts served one at a time in arrival order; a cancel ends the
  running turn and every prompt queued at that moment, each answered `cancelled`;
- a `SessionModel` (model.py): the backend, the model and thought level it was chosen by, and
  the carry-over a new choice needs before the next prompt joins the history;
- a `CommandTable` (commands/table.py), run by a `CommandRun` (commands/run.py) per invocation;
- a `Voice` (voice.py): the one way it tells the user something;
- its MCP servers (mcp.py), its tools, its context budget, its permissions.

The registry's factory makes it with what it works with (backend, editor, recorder,
permissions, settings, where updates go). Updates of a turn are dropped once it has ended, so
nothing arrives after its answer; every message and shown update is recorded as it happens,
and a prompt is answered once its writes are committed (else the answer says `notSaved`).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections.abc import Callable, Coroutine, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from acp_server import updates
from acp_server.agent.history import History
from acp_server.backends import Backend
from acp_server.editor_api import EditorApi
from acp_server.errors import InvalidParams
from acp_server.messages import Message
from acp_server.permissions import Mode, Permissions
from acp_server.session import options
from acp_server.session.commands.run import CommandRun
from acp_server.session.commands.table import BUILTIN, CHOICE_COMMANDS, CommandTable, Invocation
from acp_server.session.mcp import McpServers
from acp_server.session.model import SessionModel
from acp_server.session.queue import PromptOutcome, PromptQueue
from acp_server.session.subagents.children import Parent, Subagents
from acp_server.session.text import INTERNAL_FAILURE, NOT_SAVED, title_for
from acp_server.session.turn_parts import TurnParts
from acp_server.session.voice import Emit, Voice, live
from acp_server.settings import Settings
from acp_server.store.database import SaveFailed, iso
from acp_server.store.transcript import NullRecorder, Recorder
from acp_server.tools.commands.jobs import Jobs
from acp_server.tools.mcp.config import ServerConfig
from acp_server.workspace.workspace import Workspace, instruct, user_folder

if TYPE_CHECKING:
    from acp_server.models.catalogue import Catalogue
    from acp_server.session.client_prompt import ClientPrompt
    from acp_server.session.model import ModelChoice

__all__ = ["PromptOutcome", "Session"]  # PromptOutcome: from queue

log = logging.getLogger(__name__)

SendUpdate = Callable[[str, updates.Update], None]


class Session:
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
        mcp_tool_share: float | None = None,
        history: Iterable[Message] = (),
        title: str | None = None,
        choice: ModelChoice | None = None,
        client_prompt: ClientPrompt | None = None,
    ) -> None:
        self.id = session_id
        self.cwd = cwd
        self.additional_dirs = additional_dirs
        self.title = title
        self.history = History(history, recorder)
        self.commands = CommandTable((*BUILTIN, *CHOICE_COMMANDS))
        self._model = SessionModel(backend, choice)
        self._jobs = Jobs()  # background commands: they outlive turns, not the session
        self._queue = PromptQueue(self._end, self._jobs.turn_cancelled)
        self._editor = editor
        self._recorder = recorder
        self._permissions = permissions
        self._settings = settings
        self._send_update = send_update
        self.workspace = Workspace(cwd, additional_dirs, user_folder(settings.config_option))
        self._voice = Voice(self._send, editor.can_notice, in_turn=False)  # between turns
        notify = self.tell if editor.can_notice else None
        self.mcp = McpServers.start(mcp_servers, cwd, notify, mcp_tool_share)
        self._parts = TurnParts(
            self.roots,
            editor=editor,
            permissions=permissions,
            settings=settings,
            mcp=self.mcp,
            jobs=self._jobs,
            client_prompt=client_prompt,
            cache_key=hashlib.sha256(session_id.encode()).hexdigest()[:32],
        )
        self._parts.switch_mode = self.set_mode  # the plan's approval (plan_ready)
        lent = Parent(session_id, self.roots, settings, permissions, editor, send_update, recorder)
        self.subagents = self._parts.offer(Subagents(lent, self._subagent_model, self._parts.tools))
        self.plan_shown = False  # a plan was shown and not removed since (/clear removes it)

    def _send(self, update: updates.Update) -> None:  # to this session's editor
        self._send_update(self.id, update)

    # ----- the model -----------------------------------------------------------------------

    @property
    def backend(self) -> Backend:
        return self._model.backend

    @property
    def choice(self) -> ModelChoice | None:
        return self._model.choice

    def set_backend(self, backend: Backend) -> None:
        """`backend` from the next turn on (a running turn finishes with its own)."""
        self._model.backend = backend
        self._parts.new_backend()

    def set_model(self, value: object) -> None:
        """Switch the model; the history is carried over to it before the next prompt."""
        self._model.switch(value)
        self._model_changed()

    def catalogue_grew(self, catalogue: Catalogue) -> None:
        """Discovery found more models: offer them (a session without one adopts one)."""
        before = self.backend
        if self._model.grew(catalogue):
            if self.backend is not before:
                self._parts.new_backend()
            self._choice_changed()

    def _model_changed(self) -> None:
        self._parts.new_backend()
        if not self._queue.busy:
            self._model.carry_over(self.history)
        self._choice_changed()

    def _choice_changed(self) -> None:
        stored = self._model.stored()
        if stored is not None:
            self._recorder.choice(stored)
        self._send(options.options_update(self.mode, self._model.options()))

    def _subagent_model(self) -> Backend:
        """The configuration file's `subagent_model` when usable, else the session's model."""
        found = self.choice.subagent() if self.choice is not None else None
        return found[0] if found is not None else self.backend

    # ----- options -------------------------------------------------------------------------

    @property
    def mode(self) -> Mode:
        return self._permissions.mode

    def state(self) -> dict[str, Any]:
        """The session's modes and config options, as ACP's answers carry them."""
        return options.state(self.mode, self._model.options())

    def config_options(self) -> list[dict[str, Any]]:
        """Every config option: mode, then model and thought level when there is a choice."""
        return options.config_options(self.mode, self._model.options())

    def set_mode(self, mode: Mode) -> None:
        """Switch the permission mode and announce it both ways (legacy modes, config option)."""
        self._permissions.mode = mode
        self._recorder.mode(mode)
        for update in options.mode_updates(mode, self._model.options()):
            self._send(update)

    def choose(self, config_id: str, value: object) -> list[dict[str, Any]]:
        """Set a config option (-32602 naming an unknown option or value); the whole list."""
        from acp_server.session.model import LEVEL_KEY, MODEL_KEY

        if config_id == options.MODE_OPTION:
            self.set_mode(options.parse_mode(value, "value"))
        elif self.choice is not None and config_id in (MODEL_KEY, LEVEL_KEY):
            self._model.choose(config_id, value)
            if config_id == MODEL_KEY:
                self._model_changed()
            else:
                self._choice_changed()
        else:
            offered = ", ".join(o["id"] for o in self.config_options())
            raise InvalidParams(
                f"Invalid params: unknown `configId` {config_id!r}; this agent offers: {offered}.",
                {"field": "configId"},
            )
        return self.config_options()

    def describe_choices(self, config_id: str) -> str:
        """A config option's choices in words, for /model and /mode."""
        return options.describe(self.config_options(), config_id)

    # ----- what the editor is shown --------------------------------------------------------

    def tell(self, text: str, severity: str = "warning") -> None:
        """A notice for the user between turns (dropped when the editor shows no notices)."""
        self._voice.tell(text, severity)

    def _shown(self, update: updates.Update) -> updates.Update:
        """A plan in the form this editor takes (live and on load); notes that one is shown."""
        if updates.is_plan(update):
            self.plan_shown = update.get("sessionUpdate") != "plan_removed"
            return updates.plan_view(update, self._editor.can_plan)
        return update

    def replayed(self, update: updates.Update) -> list[tuple[str, updates.Update]]:
        """A stored update as this session's editor is shown it on load, with the session it
        goes to: a plan in the form it takes, a compaction as a card when the editor does not
        show compactions, a subagent's work as the editor takes it (subagents/view)."""
        children = self.subagents.replayed(update)
        if children is not None:
            return children
        update = self._shown(update)
        if update.get("sessionUpdate") != "compaction_update" or self._editor.can_show_compaction:
            return [(self.id, update)]
        from acp_server.agent.compaction_view import as_card

        return [(self.id, card) for card in as_card(update)]

    @property
    def roots(self) -> tuple[Path, ...]:
        return (self.cwd, *self.additional_dirs)

    # ----- prompts -------------------------------------------------------------------------

    async def prompt(self, message: Message, shown: Iterable[updates.Update] = ()) -> PromptOutcome:
        """Queue a user message behind any running turn, run it, say how it ended.
        `shown` are the user_message_chunk updates that replay the prompt on load."""

        def start() -> Coroutine[Any, Any, PromptOutcome]:
            self._model.carry_over(self.history)  # before the prompt joins it
            self._begin(message, shown)
            return self._serve_turn(message)

        return await self._queue.run(start)

    async def command(
        self, invocation: Invocation, shown: Iterable[updates.Update] = ()
    ) -> PromptOutcome:
        """Run a slash command in its place among the prompts; it is never sent to the model
        and adds nothing to the history (the prompt that invoked it is shown on load)."""

        def start() -> Coroutine[Any, Any, PromptOutcome]:
            self._model.carry_over(self.history)
            for update in shown:
                self._recorder.shown(update)
            return self._serve_command(invocation)

        return await self._queue.run(start)

    async def idle(self) -> None:
        """Once the prompts running or queued now have ended (at once when there are none)."""
        await self._queue.idle()

    async def close(self) -> None:
        """The session goes: its turn is cancelled, its background commands and MCP servers end."""
        self.cancel()
        self.subagents.close()
        await self._jobs.close()
        self._parts.close()
        self.workspace.close()
        if self.mcp is not None:
            await self.mcp.close()

    def release(self) -> None:
        """At exit, when there is no time to close: what the session keeps on disk for its
        commands (the sandbox's private temp dir) is removed."""
        self._parts.close()

    def cancel(self) -> None:
        """End the running turn and every prompt queued now (no-op when idle)."""
        self._queue.cancel()

    def _begin(self, message: Message, shown: Iterable[updates.Update]) -> None:
        for update in shown:
            self._recorder.shown(update)
        self.history.append(message)
        if self.title is None:
            self.title = title_for(message)
            self._recorder.title(self.title)
            info = {"title": self.title, "updatedAt": iso(time.time())}
            self._send({"sessionUpdate": "session_info_update", **info})

    async def _end(self, outcome: PromptOutcome) -> str | None:
        """Record the end of the turn and wait for the turn's writes. None when all of them
        are committed; else the message that told the user the turn was not saved."""
        self._recorder.turn_ended(outcome.stop)
        try:
            await self._recorder.committed()
        except SaveFailed as exc:
            log.error("turn of session %s not saved: %s", self.id, exc)
            # Live only: it is about the store itself, which just failed to take this turn.
            text = NOT_SAVED.format(path=self._recorder.where)
            Voice(self._send, notices=False).say(text)
            return text
        return None

    # ----- turns ---------------------------------------------------------------------------

    def warm(self) -> None:
        """Ahead of the first turn (`warmup`): the tools, the context budget, git's status."""
        self._parts.tools()
        self._parts.budget(self._model)
        self.workspace.start()

    def probe_sandbox(self) -> None:
        """After the warm-up, unless a prompt came: how commands are confined, found meanwhile
        (beside a prompt's imports, bubblewrap starting slows them by as much as it takes)."""
        if not self._queue.busy:
            self._parts.probe_sandbox()

    def show_usage(self) -> None:
        """After `session/load`: the meter for the loaded conversation (`TurnParts`)."""
        self._parts.show_usage(self._model, self.history, self._send, lambda: not self._queue.busy)

    def _emitter(self) -> tuple[Emit, Callable[[], None]]:
        """(emit, end): updates shown and recorded until `end` is called."""
        return live(self._recorder.shown, lambda update: self._send(self._shown(update)))

    async def _serve_turn(self, message: Message) -> PromptOutcome:
        # Imported at the first turn: `session/new` does not need the loop (~10 ms).
        from acp_server.agent.loop import Turn, TurnFailure, run_turn
        from acp_server.tools.base import CancelledByUser

        emit, end = self._emitter()
        voice = Voice(emit, self._editor.can_notice)
        backend = self.backend  # kept for the whole turn, whatever set_backend does meanwhile
        note = await self._mcp_turn(voice)  # before the turn's context and tools, as before
        context = await self._parts.turn_context(self._model, backend, emit)
        turn = Turn(
            backend=backend,
            history=self.history,
            emit=emit,
            max_requests=self._settings.max_turn_requests,
            voice=voice,
            system=self._parts.system,
            context=context,
            thought_level=self._model.level,
        )
        window = self._parts.budget(self._model).window.size  # instructions: a share at most
        # The client's appended prompt goes last, after the instructions and the MCP note.
        note += self._parts.appendix
        await instruct(turn, self._parts.tools, self.workspace, note, window)
        self._parts.say_sandbox(voice.tell)
        told = context.session.spending.tokens  # the usage told with the answer
        try:
            stop = await run_turn(turn)
        except (asyncio.CancelledError, CancelledByUser):
            return PromptOutcome("cancelled", None, None, context.tokens.wire(), told.wire())
        except Exception:
            log.exception("turn failed in session %s", self.id)
            emit(updates.message_chunk("agent_message_chunk", INTERNAL_FAILURE, None))
            return PromptOutcome("end_turn", TurnFailure("internal", INTERNAL_FAILURE))
        finally:
            end()
        too_large = turn.failure is not None and turn.failure.reason == "context"
        if stop == "refusal" or (too_large and self.history.last_prompt_is(message)):
            # Refused, or too large for the window (never sent): kept out of later requests.
            self.history.cut(message)
        return PromptOutcome(stop, turn.failure, None, context.tokens.wire(), told.wire())

    async def _mcp_turn(self, voice: Voice) -> str:
        """Wait for MCP servers still connecting, say which failed; a note for the model."""
        return await self.mcp.before_turn(voice.tell) if self.mcp else ""

    # ----- slash commands (commands.CommandHost) ---------------------------------------------

    async def _serve_command(self, invocation: Invocation) -> PromptOutcome:
        emit, end = self._emitter()
        try:
            return await CommandRun(self, Voice(emit, self._editor.can_notice)).serve(invocation)
        finally:
            end()

    async def compact(self, emit: Emit, focus: str) -> str:
        """`/compact`: compact now, whatever the fit; the one-line result for a person."""
        context = await self._parts.turn_context(self._model, self.backend, emit)
        specs = self._parts.tools().specs
        system = self.workspace.system or (
            self._parts.system + self.workspace.current() + self._parts.appendix
        )
        return await context.compact_now(system, specs, self.history, focus)

    def clear(self, emit: Emit) -> None:
        """`/clear`: an empty model context; the stored transcript keeps the conversation."""
        self.history.clear()
        self._parts.cleared()
        if self.plan_shown:  # the model's plan went with the context it belonged to
            emit(updates.plan_removed())
