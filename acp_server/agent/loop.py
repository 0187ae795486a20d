"""One prompt turn: ask the model, run the tools it asks for, repeat until it is done.

`run_turn` never touches the wire. It gets an `emit` callable for `session/update` payloads, a
toolbox and the session's `History`; the session owns the connection, the store and
cancellation. Every message the turn adds goes through `_add`, which appends it to the history
(which records it: the session's recorder writes it to the store). Cancellation arrives as
`CancelledError` at any await; the `finally` blocks leave history consistent (a partial reply is
kept as what the user saw; every tool call gets exactly one result) and close every started
tool call with a final status before the turn is answered.

The loop asks its `Context` two questions per model round: the request to send (fitted to the
window, compacted first when needed; or why it cannot be sent), and, given the round's reply,
whether to send it again (once, after the server refused it as too long). One round streaming
in is `agent.round`'s.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from acp_server import updates
from acp_server.agent.guards import REPEATED_RESULT, repeated
from acp_server.agent.history import History
from acp_server.agent.round import Reply, stream_round
from acp_server.agent.turn_text import (
    CANCELLED_RESULT,
    CUT_OFF_CALL,
    CUT_OFF_RESULT,
    CUT_OFF_TEXT,
    LAST_ROUND_NOTE,
    LIMIT_RESULT,
    LIMIT_TEXT,
    OUR_LIMIT,
    SERVER_LIMIT,
)
from acp_server.backends import Backend
from acp_server.context import ToolRoom
from acp_server.messages import (
    Message,
    ModelRequest,
    TextPart,
    ToolCall,
    ToolSpec,
    note_message,
    text_message,
    unanswered_calls,
)
from acp_server.tools.base import ToolOutcome

StopReason = Literal["end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled"]
Emit = Callable[[updates.Update], None]


class ToolRunner(Protocol):
    """The tools offered in a turn. `run` never raises for tool failures: it returns them."""

    def specs(self, room: ToolRoom | None = None) -> tuple[ToolSpec, ...]:
        """The tools for the next request (in `room`: as many as its window allows)."""
        ...

    def announce(self, call: ToolCall) -> updates.Update:
        """The `tool_call` update that introduces this call to the editor."""
        ...

    async def run(self, call: ToolCall, emit: Emit) -> ToolOutcome: ...


class NoTools:
    """No tools at all: every call is answered as an unknown tool."""

    def specs(self, room: ToolRoom | None = None) -> tuple[ToolSpec, ...]:
        return ()

    def announce(self, call: ToolCall) -> updates.Update:
        return updates.tool_call(call.id, call.name, name=call.name, raw_input=call.arguments)

    async def run(self, call: ToolCall, emit: Emit) -> ToolOutcome:
        return ToolOutcome(f"Unknown tool {call.name!r}: no tools are available.", ok=False)


# The tools offered in a window (None: no window, every tool but the search).
ToolsFor = Callable[[ToolRoom | None], Sequence[ToolSpec]]


class Context(Protocol):
    """What the loop asks about the context window (`agent.turn_context.TurnContext`)."""

    warnings: list[str]  # said when the turn ends

    async def request(
        self,
        system: str,
        specs: ToolsFor,
        history: History,
        *,
        thought_level: str | None = None,
    ) -> ModelRequest | str:
        """The next request, fitted (and compacted first when needed); else the problem."""
        ...

    async def took(self, reply: Reply, *, retry: bool) -> bool:
        """Take a round's reply; True when the same request is to be made again."""
        ...

    def clip(self, text: str, tool_name: str, history: Sequence[Message]) -> str:
        """A tool result as the model gets it (clipped to the room that remains)."""
        ...


class Unbounded:
    """No context steps: every request as it is, nothing clipped (the loop tested alone)."""

    def __init__(self) -> None:
        self.warnings: list[str] = []

    async def request(
        self,
        system: str,
        specs: ToolsFor,
        history: History,
        *,
        thought_level: str | None = None,
    ) -> ModelRequest | str:
        return ModelRequest(
            history.messages, tuple(specs(None)), system, thought_level=thought_level
        )

    async def took(self, reply: Reply, *, retry: bool) -> bool:
        return False

    def clip(self, text: str, tool_name: str, history: Sequence[Message]) -> str:
        return text


@dataclass(frozen=True)
class TurnFailure:
    """Why a turn ended without an answer: the model failed (after any retries) or the agent
    itself did; `message` is what the user was shown."""

    reason: Literal["model", "internal", "context"]
    message: str


class Voice(Protocol):
    """How the turn tells the user something of its own: `say` an agent message (shown and
    replayed, never sent to the model), `tell` a notice. A session passes its `session.voice`."""

    def say(self, text: str) -> None: ...

    def tell(self, text: str, severity: str = "warning") -> None: ...


@dataclass
class Turn:
    backend: Backend
    history: History  # records each message the turn adds
    emit: Emit
    voice: Voice
    tools: ToolRunner = field(default_factory=NoTools)
    max_requests: int = 50
    system: str = ""
    context: Context = field(default_factory=Unbounded)  # fits requests, compacts, meters
    thought_level: str | None = None  # how hard the model thinks first (thought.LEVELS)
    open_calls: set[str] = field(default_factory=set)
    failure: TurnFailure | None = None  # set when the turn ended on a failure
    # What changed since the model was last told (git's status, an instruction file found):
    # appended to the conversation before the next request, never written into the system
    # prompt (a provider's prompt cache serves only a prefix that stays the same).
    notes: list[str] = field(default_factory=list)


async def run_turn(turn: Turn) -> StopReason:
    """Run model rounds and tools until the model stops; return the ACP stop reason.
    A turn that ended on a model error also leaves it in `turn.failure`."""
    requests = 0
    try:
        while True:
            if requests >= turn.max_requests:
                await _last_round(turn)
                return "max_turn_requests"
            requests += 1
            reply = await _request(turn)
            if reply.error is not None:
                # After partial text, start on a fresh paragraph: editors that ignore
                # messageId would otherwise run the error into the reply.
                turn.voice.say(("\n\n" if reply.shown_text else "") + reply.error)
                turn.failure = TurnFailure(reply.failure, reply.error)
                return "max_tokens" if reply.finish == "length" else "end_turn"
            if reply.finish == "length":
                _cut_off(turn, reply)
                return "max_tokens"
            if reply.finish == "refusal":
                return "refusal"
            if not reply.calls:
                return "end_turn"
            for call in reply.calls:
                await _run_tool(turn, call)
    finally:
        _close_open_calls(turn)
        _answer_unanswered(turn)
        for warning in turn.context.warnings:
            turn.voice.tell(warning, "warning")


async def _last_round(turn: Turn) -> None:
    """At the request limit: one more round in which the model may only say where it stopped
    (the tools stay offered, as strict endpoints want for a history with tool calls; a call
    it still makes is answered as not run). Then the user is told why the turn ended."""
    turn.notes.append(LAST_ROUND_NOTE.format(n=turn.max_requests))
    reply = await _request(turn)
    if reply.error is not None:
        turn.voice.say(("\n\n" if reply.shown_text else "") + reply.error)
    for call_id in unanswered_calls(turn.history):
        _add(turn, text_message("tool", LIMIT_RESULT, tool_call_id=call_id))
    turn.voice.tell(LIMIT_TEXT.format(n=turn.max_requests), "info")


async def _request(turn: Turn) -> Reply:
    """One model request, fitted to the context window first (compacting when needed), the
    turn's pending notes appended to the conversation first. A request the server refused as
    too long is compacted and retried once."""
    if turn.notes:
        _add(turn, note_message("\n\n".join(turn.notes)))
        turn.notes.clear()
    for attempt in range(2):
        request = await turn.context.request(
            turn.system,
            turn.tools.specs,
            turn.history,
            thought_level=turn.thought_level,
        )
        if isinstance(request, str):
            return Reply.refused(turn.emit, request)
        reply = await _model_round(turn, request)
        if not await turn.context.took(reply, retry=attempt == 0):
            break
    return reply


async def _model_round(turn: Turn, request: ModelRequest) -> Reply:
    """Stream one model round to the editor; record the assistant message, even a partial one."""
    reply = Reply.start(turn.emit)
    reply.limit = request.max_tokens
    try:
        await stream_round(turn.backend, request, reply, turn.voice.tell)
    finally:
        reply.end()
        message = reply.message()
        if message is not None:
            _add(turn, message)
    if reply.error is None:
        reply.error = reply.problem()
    return reply


def _cut_off(turn: Turn, reply: Reply) -> None:
    """A round cut off by the output limit: the user is told, and a tool call it cut is
    answered as cut off (it is never run: its arguments are incomplete)."""
    advice = OUR_LIMIT.format(limit=reply.limit) if reply.limit else SERVER_LIMIT
    if reply.text:
        turn.voice.tell(CUT_OFF_TEXT.format(advice=advice), "warning")
    for call in reply.calls:
        turn.voice.tell(CUT_OFF_CALL.format(name=call.name, advice=advice), "warning")
    for call_id in unanswered_calls(turn.history):
        _add(turn, text_message("tool", CUT_OFF_RESULT, tool_call_id=call_id))


async def _run_tool(turn: Turn, call: ToolCall) -> None:
    """Announce, run and record one tool call; its result always lands in history."""
    turn.emit(turn.tools.announce(call))
    turn.open_calls.add(call.id)
    if repeated(call, turn.history.messages):  # a small model asking again for what it has
        outcome = ToolOutcome(REPEATED_RESULT.format(name=call.name), ok=False)
    else:
        outcome = await turn.tools.run(call, turn.emit)
    status = "completed" if outcome.ok else "failed"
    content = (
        outcome.content if outcome.content is not None else [updates.text_content(outcome.text)]
    )
    turn.emit(
        updates.tool_call_update(
            call.id,
            status=status,
            content=content,
            raw_output=outcome.raw_output,
            locations=outcome.locations,
        )
    )
    turn.open_calls.discard(call.id)
    # The model gets what fits; the editor was shown it all.
    text = turn.context.clip(outcome.text, call.name, turn.history)
    parts = ((TextPart(text),) if text else ()) + outcome.images
    _add(turn, Message(role="tool", content=parts, tool_call_id=call.id))


def _close_open_calls(turn: Turn) -> None:
    for call_id in sorted(turn.open_calls):
        turn.emit(
            updates.tool_call_update(
                call_id, status="failed", content=[updates.text_content(CANCELLED_RESULT)]
            )
        )
    turn.open_calls.clear()


def _answer_unanswered(turn: Turn) -> None:
    """Give every tool call a result (strict endpoints reject a history with unanswered calls;
    a cancel races a reply that may already have recorded some, so only the missing ones)."""
    for call_id in unanswered_calls(turn.history):
        _add(turn, text_message("tool", CANCELLED_RESULT, tool_call_id=call_id))


def _add(turn: Turn, message: Message) -> None:
    """The one place the turn writes history (which records the message)."""
    turn.history.append(message)
