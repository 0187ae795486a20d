"""One prompt turn: ask the model, run the tools it asks for, repeat until it is done.

`run_turn` never touches the wire. It gets an `emit` callable for `session/update` payloads, a
toolbox and the session's `History`; the session owns the connection, the store and
cancellation. Every message the turn adds goes through `_add`, which appends it to the history
(which records it: the session's recorder writes it to the store). Cancellation arrives as
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
from acp_server.agent.history import History
from acp_server.agent.turn_context import TurnContext
from acp_server.backends import Backend
from acp_server.messages import (
    ContextOverflow,
    Event,
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

    reason: Literal["model", "internal", "context"]
    message: str


@dataclass
class Turn:
    backend: Backend
    history: History  # records each message the turn adds
    emit: Emit
    tools: ToolRunner = field(default_factory=NoTools)
    max_requests: int = 50
    tell: Tell | None = None
    system: str = ""
    context: TurnContext | None = None  # fits every request, compacts, reports usage
    thought_level: str | None = None  # how hard the model thinks first (thought.LEVELS)
    open_calls: set[str] = field(default_factory=set)
    failure: TurnFailure | None = None  # set when the turn ended on a failure


@dataclass
class _Reply:
    """One model round as it streams in: what the user was shown, and how the round ended."""

    message_id: str
    chunks: _Chunks
    text: list[str] = field(default_factory=list)
    thought: list[str] = field(default_factory=list)
    assembler: ToolCallAssembler = field(default_factory=ToolCallAssembler)
    extra: dict[str, Any] = field(default_factory=dict)
    finish: FinishReason | None = None
    error: str | None = None
    failure: Literal["model", "context"] = "model"
    overflow: ContextOverflow | None = None  # the server refused the request as too long
    usage: Usage | None = None
    calls: list[ToolCall] = field(default_factory=list)

    @property
    def shown_text(self) -> bool:
        return bool(self.text)

    @property
    def said_anything(self) -> bool:
        """False for a round cancelled before the model said anything, or refused as too long."""
        if self.text or self.thought or self.finish is not None:
            return True
        return self.error is not None and self.overflow is None


async def run_turn(turn: Turn) -> StopReason:
    """Run model rounds and tools until the model stops; return the ACP stop reason.
    A turn that ended on a model error also leaves it in `turn.failure`."""
    requests = 0
    try:
        while True:
            if requests >= turn.max_requests:
                return "max_turn_requests"
            requests += 1
            reply = await _request(turn)
            if reply.error is not None:
                # After partial text, start on a fresh paragraph: editors that ignore
                # messageId would otherwise run the error into the reply.
                _say(turn, ("\n\n" if reply.shown_text else "") + reply.error)
                turn.failure = TurnFailure(reply.failure, reply.error)
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
        _answer_unanswered(turn)
        if turn.context is not None:
            for warning in turn.context.warnings:
                _tell(turn, warning, "warning")


async def _request(turn: Turn) -> _Reply:
    """One model request, fitted to the context window first (compacting when needed). A
    request the server refused as too long is compacted and retried once."""
    context = turn.context
    if context is None:
        return await _model_round(turn, turn.tools.specs())
    for attempt in range(2):
        # Chosen again for the retry: the overflow may have lowered the window (a smaller
        # window may take the compact profile).
        tools = await context.offer(turn.system, turn.tools.specs(), turn.history)
        problem = await context.prepare(turn.system, tools, turn.history)
        if problem is not None:
            return _Reply("", _Chunks(turn.emit, ""), error=problem, failure="context")
        reply = await _model_round(turn, tools)
        if reply.overflow is None or reply.said_anything or attempt:
            break
        context.after_overflow(reply.overflow)
    # The usage shown and the truncation guard count against the window the server reports
    # (looked up beside the first request; by now it has usually answered).
    await context.session.settle(wait=True)
    context.after_round(reply.usage, context.budget.estimator.text("".join(reply.text)))
    return reply


async def _model_round(turn: Turn, tools: tuple[ToolSpec, ...]) -> _Reply:
    """Stream one model round to the editor; record the assistant message, even a partial one."""
    context = turn.context
    used = context.fit.used if context is not None and context.fit is not None else None
    limit = context.session.reply_limit(used) if context is not None else None
    request = ModelRequest(
        messages=turn.history.messages,
        tools=tools,
        system=turn.system,
        max_tokens=limit,
        thought_level=turn.thought_level,
    )
    message_id = f"msg_{uuid.uuid4().hex}"
    reply = _Reply(message_id, _Chunks(turn.emit, message_id))
    try:
        async for event in turn.backend.stream(request):
            if _relay(turn, reply, event):
                break
    finally:
        reply.chunks.flush()
        _record(turn, reply)
    if reply.error is None:
        reply.error = _bad_ending(reply)
    return reply


def _relay(turn: Turn, reply: _Reply, event: Event) -> bool:
    """Show one event to the editor and keep it in the reply; True when the round is over."""
    match event:
        case TextDelta(text) if text:
            reply.text.append(text)
            reply.chunks.add("agent_message_chunk", text)
        case ThoughtDelta(text) if text:
            reply.thought.append(text)
            reply.chunks.add("agent_thought_chunk", text)
        case ToolCallDelta():
            reply.assembler.add(event)
        case Usage():
            reply.usage = event
        case Notice(text, severity):
            reply.chunks.flush()
            _tell(turn, text, severity)
        case PrivateData(data):
            reply.extra.update(data)
        case Finish(reason):
            reply.finish = reason
            return True
        case StreamError(message, overflow):
            reply.error = message
            reply.overflow = overflow
            return True
    return False


def _record(turn: Turn, reply: _Reply) -> None:
    """Append the round's assistant message to history: a partial reply is kept as what the user
    saw; a round cancelled before the model said anything leaves nothing."""
    if reply.finish is not None:
        reply.calls = reply.assembler.calls(f"call_{uuid.uuid4().hex[:8]}_")
    if reply.said_anything:
        _add(
            turn,
            Message(
                role="assistant",
                content=(TextPart("".join(reply.text)),) if reply.text else (),
                thought="".join(reply.thought),
                tool_calls=tuple(reply.calls),
                message_id=reply.message_id,
                extra=reply.extra,
            ),
        )


def _bad_ending(reply: _Reply) -> str | None:
    """Why a round that ended without a backend error still cannot count as an answer."""
    if reply.finish is None:
        return "The model's reply ended without saying whether it was finished."
    if reply.finish == "length" and not reply.text and not reply.calls:
        return (
            "The model ran out of output tokens while it was still thinking, before it wrote "
            "an answer. Try again, or raise the model's output token limit."
        )
    return None


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
    text = outcome.text
    if turn.context is not None:  # the model gets what fits; the editor was shown it all
        text = turn.context.clip(text, call.name, turn.history)
    parts = ((TextPart(text),) if text else ()) + outcome.images
    _add(turn, Message(role="tool", content=parts, tool_call_id=call.id))


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


def _answer_unanswered(turn: Turn) -> None:
    """Give every tool call a result (strict endpoints reject a history with unanswered calls;
    a cancel races a reply that may already have recorded some, so only the missing ones)."""
    for call_id in unanswered_calls(turn.history):
        _add(turn, text_message("tool", CANCELLED_RESULT, tool_call_id=call_id))


def _add(turn: Turn, message: Message) -> None:
    """The one place the turn writes history (which records the message)."""
    turn.history.append(message)
