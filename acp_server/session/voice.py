"""How a session tells its user something: the one way, in a turn, a command or between them.

`say` is an agent message (shown, and recorded when the voice is a turn's). `tell` is a notice
for editors that show notices (`_meta.acpServer.notices`); elsewhere it becomes an agent
message in a turn or a command, and is dropped between turns, where an unasked-for message
would start a reply the user did not ask for.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass

from acp_server import updates

Emit = Callable[[updates.Update], None]


@dataclass(frozen=True)
class Voice:
    """What the session says goes to `emit`; `notices`: the editor shows notices."""

    emit: Emit
    notices: bool
    in_turn: bool = True  # False: between turns, a notice the editor cannot show is dropped

    def say(self, text: str) -> None:
        """An agent message of its own."""
        self.emit(updates.message_chunk("agent_message_chunk", text, f"msg_{uuid.uuid4().hex}"))

    def tell(self, text: str, severity: str = "warning") -> None:
        """A notice (`severity`: info, warning or error)."""
        if self.notices:
            self.emit({"sessionUpdate": "notice", "severity": severity, "title": text})
        elif self.in_turn:
            self.emit(updates.message_chunk("agent_message_chunk", text + "\n\n", None))


@dataclass(frozen=True)
class PlainVoice(Voice):
    """A voice whose notices are agent messages like the rest of what it says: a subagent's
    (shown in its own session or inside the parent's `task` call), or a turn run on its own."""

    notices: bool = False

    def tell(self, text: str, severity: str = "warning") -> None:
        self.say(text)


def live(record: Emit, send: Emit) -> tuple[Emit, Callable[[], None]]:
    """(emit, end): updates recorded and sent until `end` is called, so that nothing of a turn
    arrives after its answer."""
    on = True

    def emit(update: updates.Update) -> None:
        if on:
            record(update)
            send(update)

    def end() -> None:
        nonlocal on
        on = False

    return emit, end
