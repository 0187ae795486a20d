"""One model round as it streams in: relayed to the editor as it comes, kept as a `Reply`.

`stream_round` plays a backend's events into a `Reply`: text and thought deltas go out as
`agent_message_chunk`/`agent_thought_chunk` updates (`Chunks`), notices through `tell`, and
the rest (tool call deltas, usage, private data, how it ended) is kept. When the round is over
(or cancelled) `Reply.end` assembles its tool calls; `Reply.message` is the assistant message
it leaves in history (None: nothing worth keeping) and `Reply.problem` why a round that ended
without a backend error still cannot count as an answer.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from acp_server import updates
from acp_server.agent.turn_text import CUT_OFF_MARK, EMPTY_REPLY, THOUGHT_ONLY
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
    Usage,
)

Emit = Callable[[updates.Update], None]
# (text, severity): a `notice` update when the client shows notices, else an agent message.
Tell = Callable[[str, str], None]


@dataclass
class Reply:
    """One model round: what the user was shown, and how the round ended."""

    message_id: str
    chunks: Chunks
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
    limit: int | None = None  # the request's `max_tokens` (None: the server's own limit)

    @classmethod
    def start(cls, emit: Emit) -> Reply:
        message_id = f"msg_{uuid.uuid4().hex}"
        return cls(message_id, Chunks(emit, message_id))

    @classmethod
    def refused(cls, emit: Emit, problem: str) -> Reply:
        """A round never sent: the request cannot fit the context window."""
        return cls("", Chunks(emit, ""), error=problem, failure="context")

    @property
    def shown_text(self) -> bool:
        return bool(self.text)

    @property
    def said_anything(self) -> bool:
        """False for a round cancelled before the model said anything, or refused as too long."""
        if self.text or self.thought or self.finish is not None:
            return True
        return self.error is not None and self.overflow is None

    def end(self) -> None:
        """The round is over (or cancelled): show what is pending, assemble the tool calls."""
        self.chunks.flush()
        if self.finish is not None:
            self.calls = self.assembler.calls(f"call_{uuid.uuid4().hex[:8]}_")

    def message(self) -> Message | None:
        """The assistant message the round leaves: a partial reply is kept as what the user
        saw (one cut off by the output limit marked so); a round that said nothing, or nothing
        but thought, leaves none (strict endpoints reject an empty assistant message later)."""
        if not self.said_anything or not (self.text or self.calls):
            return None
        text = "".join(self.text)
        if self.finish == "length" and text:
            text += CUT_OFF_MARK
        return Message(
            role="assistant",
            content=(TextPart(text),) if text else (),
            thought="".join(self.thought),
            tool_calls=tuple(self.calls),
            message_id=self.message_id,
            extra=self.extra,
        )

    def problem(self) -> str | None:
        """Why a round that ended without a backend error still cannot count as an answer."""
        if self.finish is None:
            return "The model's reply ended without saying whether it was finished."
        if self.text or self.calls or self.finish == "refusal":
            return None
        return THOUGHT_ONLY if self.finish == "length" else EMPTY_REPLY


async def stream_round(backend: Backend, request: ModelRequest, reply: Reply, tell: Tell) -> None:
    """Stream one model round into `reply`, showing it as it comes."""
    async for event in backend.stream(request):
        if _relay(reply, event, tell):
            break


def _relay(reply: Reply, event: Event, tell: Tell) -> bool:
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
            tell(text, severity)
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


class Chunks:
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
