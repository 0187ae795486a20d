"""Slash commands as a session runs them: one `CommandRun` per invocation, the command's
`CommandContext` (see table.py): `/compact`, `/clear`, `/model`, `/mode`, `/help`.

A command runs in the prompt queue like a turn (`Session.command`), shows what it says as agent
messages recorded like a turn's (its `Voice`), and adds nothing to the history. It reaches the
session only through `CommandHost`, the few things a command may ask of it.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any, Protocol

from acp_server import updates
from acp_server.session.queue import PromptOutcome
from acp_server.session.text import CLEARED, INTERNAL_FAILURE
from acp_server.session.voice import Emit, Voice

if TYPE_CHECKING:
    from acp_server.session.commands.table import CommandTable, Invocation

log = logging.getLogger(__name__)


class CommandHost(Protocol):
    """What a command may ask of its session."""

    id: str

    @property
    def commands(self) -> CommandTable: ...

    async def compact(self, emit: Emit, focus: str) -> str:
        """Compact now, whatever the fit; the one-line result for a person."""
        ...

    def clear(self, emit: Emit) -> None:
        """An empty model context (a plan shown is removed through `emit`)."""

    def choose(self, config_id: str, value: object) -> list[dict[str, Any]]: ...

    def describe_choices(self, config_id: str) -> str: ...


class CommandRun:
    """One slash command as it runs: the session it acts on and its voice."""

    def __init__(self, host: CommandHost, voice: Voice) -> None:
        self._host = host
        self._voice = voice

    @property
    def commands(self) -> CommandTable:
        return self._host.commands

    async def serve(self, invocation: Invocation) -> PromptOutcome:
        """Run the command; how it ended, as a prompt's outcome."""
        from acp_server.agent.loop import TurnFailure

        try:
            note = invocation.ignored_note()
            if note is not None:
                await self.say(note)
            await invocation.run(self)
        except asyncio.CancelledError:
            return PromptOutcome("cancelled")
        except Exception:
            log.exception("/%s failed in session %s", invocation.command.name, self._host.id)
            self._voice.emit(updates.message_chunk("agent_message_chunk", INTERNAL_FAILURE, None))
            return PromptOutcome("end_turn", TurnFailure("internal", INTERNAL_FAILURE))
        return PromptOutcome("end_turn")

    async def compact(self, focus: str) -> None:
        """`/compact [focus]`: compact now, whatever the fit, and say how it went."""
        await self.say(await self._host.compact(self._voice.emit, focus))

    async def clear(self) -> None:
        """`/clear`: an empty model context; the stored transcript keeps the conversation."""
        self._host.clear(self._voice.emit)
        await self.say(CLEARED)

    async def say(self, text: str) -> None:
        self._voice.say(text)

    def choose(self, config_id: str, value: object) -> list[dict[str, Any]]:
        return self._host.choose(config_id, value)

    def describe_choices(self, config_id: str) -> str:
        return self._host.describe_choices(config_id)
