"""One prompt turn: ask the model, run the tools it asks for, repeat until it is done.

`run_turn` never touches the wire. It gets an `emit` callable for `session/update` payloads and a
toolbox; the session owns the connection, the history and cancellation. Cancellation arrives as
`CancelledError` at any await; the `finally` blocks leave history consistent (a partial reply is
kept as what the user saw; every tool call gets exactly one result) and close every started
tool call with a final status before the turn is answered.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from acp_server import updates
from acp_server.backends import Backend
from acp_server.messages import (
    Finish,
    FinishReason,
    Message,
    ModelRequest,
    Notice,
    PrivateData,
    StreamError,
    TextDelta,
    TextPart,
    ThoughtDelta,
    ToolCall,
    ToolCallAssembler,
    ToolCallDelta,
    ToolSpec,
    Usage,
    text_message,
    unanswered_calls,
)
from acp_server.tools.base import ToolOutcome

StopReason = Literal["end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled"]
Emit = Callable[[updates.Update], None]
# (text, severity): a `notice` update when the client shows notices, else an agent message.
Tell = Callable[[str, str], None]

CANCELLED_RESULT = "The user cancelled this tool call before it finished."


class ToolRunner(Protocol):
    """The tools offered in a turn. `run` never raises for tool failures: it returns them."""

    def specs(self) -> tuple[ToolSpec, ...]: ...

    def announce(self, call: ToolCall) -> updates.Update:
        """The `tool_call` update that introduces this call to the editor."""
        ...

    async def run(self, call: ToolCall, emit: Emit) -> ToolOutcome: ...


class NoTools:
    """No tools at all: every call is answered as an unknown tool."""

    def specs(self) -> tuple[ToolSpec, ...]:
        return ()

    def announce(self, call: ToolCall) -> updates.Update:
        return updates.tool_call(call.id, call.name, name=call.name, raw_input=call.arguments)

    async def run(self, call: ToolCall, emit: Emit) -> ToolOutcome:
        return ToolOutcome(f"Unknown tool {call.name!r}: no tools are available.", ok=False)


@dataclass(frozen=True)
class TurnFailure:
    """Why a turn ended without an answer: the model failed (after any retries) or the agent
    itself did; `message` is what the user was shown."""

    reason: Literal["model", "internal"]
    message: str


@dataclass
class Turn:
    backend: Backend
    history: list[Message]
    emit: Emit
    tools: ToolRunner = field(default_factory=NoTools)
    max_requests: int = 50
    tell: Tell | None = None
    system: str = ""
    context_size: int = 0  # the model's window in tokens, for `usage_update` (0: unknown)
    usage: list[Usage] = field(default_factory=list)
    open_calls: set[str] = field(default_factory=set)
    failure: TurnFailure | None = None  # set when the turn ended on a failure


@dataclass
class _Reply:
    finish: FinishReason | None = None
    error: str | None = None
    shown_text: bool = False
    calls: list[ToolCall] = field(default_factory=list)


async def run_turn(turn: Turn) -> StopReason:
    """Run model rounds and tools until the model stops; return the ACP stop reason.
    A turn that ended on a model error also leaves it in `turn.failure`."""
    requests = 0
    try:
        while True:
            if requests >= turn.max_requests:
                return "max_turn_requests"
            requests += 1
            reply = await _model_round(turn)
            if reply.error is not None:
                # After partial text, start on a fresh paragraph: editors that ignore
                # messageId would otherwise run the error into the reply.
                _say(turn, ("\n\n" if reply.shown_text else "") + reply.error)
                turn.failure = TurnFailure("model", reply.error)
                return "max_tokens" if reply.finish == "length" else "end_turn"
            if reply.finish == "length":
                return "max_tokens"
            if reply.finish == "refusal":
                return "refusal"
            if not reply.calls:
                return "end_turn"
            for call in reply.calls:
                await _run_tool(turn, call)
    finally:
        _close_open_calls(turn)
        _answer_unanswered(turn.history)


async def _model_round(turn: Turn) -> _Reply:
    """Stream one model round to the editor; record the assistant message, even a partial one."""
    request = ModelRequest(
        messages=tuple(turn.history), tools=turn.tools.specs(), system=turn.system
    )
    reply = _Reply()
    text: list[str] = []
    thought: list[str] = []
    assembler = ToolCallAssembler()
    extra: dict[str, Any] = {}
    message_id = f"msg_{uuid.uuid4().hex}"
    chunks = _Chunks(turn.emit, message_id)
    try:
        async for event in turn.backend.stream(request):
            if isinstance(event, TextDelta) and event.text:
                text.append(event.text)
                chunks.add("agent_message_chunk", event.text)
            elif isinstance(event, ThoughtDelta) and event.text:
                thought.append(event.text)
                chunks.add("agent_thought_chunk", event.text)
            elif isinstance(event, ToolCallDelta):
                assembler.add(event)
            elif isinstance(event, Usage):
                chunks.flush()
                turn.usage.append(event)
                if turn.context_size:
                    used = event.prompt_tokens + event.completion_tokens
                    turn.emit(updates.usage(used, turn.context_size))
            elif isinstance(event, Finish):
                reply.finish = event.reason
                break
            elif isinstance(event, StreamError):
                reply.error = event.message
                break
            elif isinstance(event, Notice):
                chunks.flush()
                _tell(turn, event.text, event.severity)
            elif isinstance(event, PrivateData):
                extra.update(event.data)
    finally:
        chunks.flush()
        if reply.finish is not None:
            reply.calls = assembler.calls(f"call_{uuid.uuid4().hex[:8]}_")
        if reply.finish is None and reply.error is None and not text and not thought:
            pass  # cancelled before the model said anything: nothing to record
        else:
            turn.history.append(
                Message(
                    role="assistant",
                    content=(TextPart("".join(text)),) if text else (),
                    thought="".join(thought),
                    tool_calls=tuple(reply.calls),
                    message_id=message_id,
                    extra=extra,
                )
            )
    reply.shown_text = bool(text)
    if reply.finish is None and reply.error is None:
        reply.error = "The model's reply ended without saying whether it was finished."
    if reply.finish == "length" and not text and not reply.calls:
        reply.error = (
            "The model ran out of output tokens while it was still thinking, before it wrote "
            "an answer. Try again, or raise the model's output token limit."
        )
    return reply


class _Chunks:
    """Relays a round's text and thought deltas as `agent_message_chunk`/`agent_thought_chunk`
    updates. Deltas that arrive in the same pass of the event loop (a burst the model server
    sent in one network read) go out as one chunk; nothing waits for more text: the flush is
    queued with `call_soon`, so it runs as soon as the round waits for the model again. Any
    other update is preceded by a `flush()`, so the editor sees everything in order.
    """

    def __init__(self, emit: Emit, message_id: str) -> None:
        self._emit = emit
        self._ids = {
            "agent_message_chunk": message_id,
            "agent_thought_chunk": f"{message_id}_thought",
        }
        self._kind = ""
        self._pending: list[str] = []
        self._scheduled: asyncio.Handle | None = None

    def add(self, kind: str, text: str) -> None:
        if kind != self._kind:
            self.flush()
            self._kind = kind
        if self._scheduled is None:
            self._scheduled = asyncio.get_running_loop().call_soon(self.flush)
        self._pending.append(text)

    def flush(self) -> None:
        if self._scheduled is not None:
            self._scheduled.cancel()
            self._scheduled = None
        if self._pending:
            text = "".join(self._pending) if len(self._pending) > 1 else self._pending[0]
            self._pending.clear()
            self._emit(updates.message_chunk(self._kind, text, self._ids[self._kind]))


async def _run_tool(turn: Turn, call: ToolCall) -> None:
    """Announce, run and record one tool call; its result always lands in history."""
    turn.emit(turn.tools.announce(call))
    turn.open_calls.add(call.id)
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
    turn.history.append(text_message("tool", outcome.text, tool_call_id=call.id))


def _tell(turn: Turn, text: str, severity: str) -> None:
    if turn.tell is not None:
        turn.tell(text, severity)
    else:
        _say(turn, text)


def _say(turn: Turn, text: str) -> None:
    """Tell the user something as an agent message (shown and replayed, not sent to the model)."""
    message_id = f"msg_{uuid.uuid4().hex}"
    turn.emit(updates.message_chunk("agent_message_chunk", text, message_id))


def _close_open_calls(turn: Turn) -> None:
    for call_id in sorted(turn.open_calls):
        turn.emit(
            updates.tool_call_update(
                call_id, status="failed", content=[updates.text_content(CANCELLED_RESULT)]
            )
        )
    turn.open_calls.clear()


def _answer_unanswered(history: list[Message]) -> None:
    """Give every tool call a result (strict endpoints reject a history with unanswered calls;
    a cancel races a reply that may already have recorded some, so only the missing ones)."""
    for call_id in unanswered_calls(history):
        history.append(text_message("tool", CANCELLED_RESULT, tool_call_id=call_id))
