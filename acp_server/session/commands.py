"""Slash commands as a session serves them: the part of `Session` that is their
`CommandContext` (commands.py) — `/compact`, `/clear`, and what a command says.

A command runs in the prompt queue like a turn (`Session.command`), shows what it says as
agent messages recorded like a turn's, and adds nothing to the history. `Session` (session.py)
inherits this class; it lives here so that each module holds one concept.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from acp_server import updates
from acp_server.backends import Backend
from acp_server.messages import Message
from acp_server.session.text import CLEARED, INTERNAL_FAILURE, system_prompt
from acp_server.store.transcript import NullRecorder, Recorder

if TYPE_CHECKING:
    from acp_server.agent.loop import StopReason, ToolRunner, TurnFailure
    from acp_server.agent.turn_context import SessionContext, TurnContext
    from acp_server.session.command_table import CommandTable, Invocation
    from acp_server.workspace.workspace import Workspace

log = logging.getLogger(__name__)

Emit = Callable[[updates.Update], None]


@dataclass(frozen=True)
class PromptOutcome:
    """How a prompt ended: its stop reason, the failure if the turn failed, and the message the
    user was shown if its records could not be saved."""

    stop: StopReason
    failure: TurnFailure | None = None
    not_saved: str | None = None


class CommandServing:
    """Slash commands; the attributes and methods below come from `Session`."""

    id: str
    cwd: Path
    additional_dirs: tuple[Path, ...]
    history: list[Message]
    _backend: Backend
    _recorder: Recorder | NullRecorder
    _context: SessionContext | None
    _command_emit: Emit | None  # while a slash command runs
    plan_shown: bool
    _emitter: Callable[[], tuple[Emit, Callable[[], None]]]
    _toolbox: Callable[[], ToolRunner]
    workspace: Workspace
    commands: CommandTable
    choose: Callable[[str, object], list[dict[str, Any]]]
    describe_choices: Callable[[str], str]

    async def _turn_context(self, backend: Backend, emit: Emit) -> TurnContext:
        raise NotImplementedError  # Session's

    async def _serve_command(self, invocation: Invocation) -> PromptOutcome:
        from acp_server.agent.loop import TurnFailure

        emit, end = self._emitter()
        self._command_emit = emit
        try:
            note = invocation.ignored_note()
            if note is not None:
                await self.say(note)
            await invocation.run(self)
        except asyncio.CancelledError:
            return PromptOutcome("cancelled")
        except Exception:
            log.exception("/%s failed in session %s", invocation.command.name, self.id)
            emit(updates.message_chunk("agent_message_chunk", INTERNAL_FAILURE, None))
            return PromptOutcome("end_turn", TurnFailure("internal", INTERNAL_FAILURE))
        finally:
            end()
            self._command_emit = None
        return PromptOutcome("end_turn")

    def _command_emitter(self) -> Emit:
        if self._command_emit is None:
            raise RuntimeError("a command context is used outside a command")
        return self._command_emit

    async def compact(self, focus: str) -> None:
        """`/compact [focus]`: compact now, whatever the fit, and say how it went."""
        emit = self._command_emitter()
        context = await self._turn_context(self._backend, emit)
        system = system_prompt(self.cwd, self.additional_dirs) + self.workspace.current()
        await self.say(
            await context.compact_now(system, self._toolbox().specs(), self.history, focus)
        )

    async def clear(self) -> None:
        """`/clear`: an empty model context; the stored transcript keeps the conversation."""
        self.history.clear()
        self._recorder.history([])
        if self._context is not None:
            self._context.due = False
        if self.plan_shown:  # the model's plan went with the context it belonged to
            self._command_emitter()(updates.plan_removed())
        await self.say(CLEARED)

    async def say(self, text: str) -> None:
        chunk = updates.message_chunk("agent_message_chunk", text, f"msg_{uuid.uuid4().hex}")
        self._command_emitter()(chunk)
