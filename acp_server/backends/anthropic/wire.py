"""The Anthropic Messages dialect: neutral request → JSON body, SSE events → neutral events.

Pure functions and one parser class, no I/O; `anthropic.py` does the HTTP. The rules of the wire:

- `system` is a top-level field; `messages` alternate user/assistant, so consecutive messages of
  one role are merged, tool results become `tool_result` blocks of a user message (first in it,
  before any text), assistant calls become `tool_use` blocks, images become base64 `image`
  blocks, and empty or whitespace-only text blocks (which the API rejects) are left out;
- thinking blocks carry a `signature`; on the assistant message that made tool calls they must
  be sent back unchanged, in their place, or the request fails ("Expected `thinking` or
  `redacted_thinking`, but found `tool_use`") once thinking is enabled. The parser hands the
  reply's blocks to the agent loop as a `PrivateData` event (kept in `Message.extra[EXTRA_KEY]`,
  dropped by a model switch); `render_message` resends them verbatim when they still describe the
  message. They need not be resent across turns, so replies without tool calls keep nothing;
- a thought level becomes `thinking`: a token budget, or `{"type": "adaptive"}` with
  `output_config.effort` for the models that want adaptive thinking (`thought.py`); "off"
  sends none;
- a request marks where the prompt cache may write and read (`cache_control`, 4 at most): the end
  of the tools, of the system prompt, of the last message, and of the previous request's last
  message (read back exactly, however many blocks the last round added); `cache_ttl` "1h" asks
  for the hour-long cache instead of five minutes;
- the stream: `message_start` (usage: input, cache read and cache write counts),
  `content_block_start/delta/stop` per block (`text_delta`, `thinking_delta`, `signature_delta`,
  `input_json_delta`), `message_delta` (stop reason, output count), `message_stop`; `ping` is
  ignored, and an `error` event is an error (transient when the API is overloaded).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any

from acp_server.backends import _json
from acp_server.backends._http import BackendError, error_from_payload
from acp_server.backends._sse import SseEvent
from acp_server.messages import (
    Event,
    FinishReason,
    ImagePart,
    Message,
    ModelRequest,
    PrivateData,
    TextDelta,
    TextPart,
    ThoughtDelta,
    ToolCallDelta,
    ToolSpec,
    Usage,
)
from acp_server.thought import anthropic_thinking

log = logging.getLogger(__name__)

# Message.extra[EXTRA_KEY] = {"model": the model that signed, "content": [the reply's blocks]}
EXTRA_KEY = "anthropic"
THINKING_TYPES = frozenset({"thinking", "redacted_thinking"})
STOP_REASONS: dict[str, FinishReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_calls",
    "refusal": "refusal",
}
CLOSED_MID_REPLY = "The connection to the Anthropic API closed mid-reply."


# ----- request --------------------------------------------------------------------------------


def payload(
    model: str,
    request: ModelRequest,
    *,
    max_tokens: int,
    thinking_budget: int | None,
    adaptive: bool = False,
    cache_ttl: str | None = None,
) -> dict[str, Any]:
    """The JSON body of a streamed Messages request, its cache breakpoints placed."""
    messages = render_messages(request.messages, model)
    body: dict[str, Any] = {"model": model, "max_tokens": request.max_tokens or max_tokens}
    parts = [request.system] + [m.text for m in request.messages if m.role == "system"]
    system = "\n\n".join(part for part in parts if part)
    if system:
        body["system"] = system
    body["messages"] = messages
    if request.tools:
        body["tools"] = [render_tool(tool) for tool in request.tools]
    fields = thinking_fields(request.thought_level, thinking_budget, adaptive)
    if fields and thinking_allowed(messages):
        body.update(fields)
        budget = fields["thinking"].get("budget_tokens")
        if isinstance(budget, int):
            # The API requires max_tokens > budget_tokens (the thinking counts as output).
            body["max_tokens"] = max(body["max_tokens"], budget + 1024)
    mark_cache(body, cache_ttl)
    body["stream"] = True
    return body


CACHE_TTLS = ("5m", "1h")


def mark_cache(body: dict[str, Any], ttl: str | None) -> None:
    """Put the cache breakpoints into `body` (see the module docstring): each marks a prefix
    the API caches, and a later request reads back the longest one it starts with."""
    mark: dict[str, Any] = {"type": "ephemeral"}
    if ttl == "1h":
        mark["ttl"] = "1h"
    tools = body.get("tools")
    if tools:
        tools[-1] = {**tools[-1], "cache_control": mark}
    if "system" in body:
        body["system"] = [{"type": "text", "text": body["system"], "cache_control": mark}]
    messages = body["messages"]
    for index in {len(messages) - 1, len(messages) - 3}:
        if index >= 0:
            _mark_last_block(messages[index], mark)


def _mark_last_block(message: dict[str, Any], mark: dict[str, Any]) -> None:
    blocks = message["content"]
    if blocks and blocks[-1].get("type") not in THINKING_TYPES:
        blocks[-1] = {**blocks[-1], "cache_control": mark}


def thinking_fields(level: str | None, budget: int | None, adaptive: bool) -> dict[str, Any]:
    """The request fields that turn thinking on ({}: off): the thought level when the request
    has one (a budget, or adaptive thinking for the models that want it), else the backend's
    own budget."""
    if level is not None:
        return anthropic_thinking(level, adaptive)
    return {"thinking": {"type": "enabled", "budget_tokens": budget}} if budget else {}


def render_tool(tool: ToolSpec) -> dict[str, Any]:
    return {"name": tool.name, "description": tool.description, "input_schema": tool.parameters}


def render_messages(messages: tuple[Message, ...], model: str) -> list[dict[str, Any]]:
    """Alternating user/assistant messages; same-role neighbours merged, empty ones dropped."""
    out: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "system":
            continue  # folded into the top-level `system`
        role = "assistant" if message.role == "assistant" else "user"
        blocks = render_message(message, model)
        if not blocks:
            continue
        if out and out[-1]["role"] == role:
            out[-1]["content"] += blocks
        else:
            out.append({"role": role, "content": blocks})
    for rendered in out:
        if rendered["role"] == "user":  # tool results first, then text (an API rule)
            rendered["content"].sort(key=lambda block: block["type"] != "tool_result")
    return out


def render_message(message: Message, model: str) -> list[dict[str, Any]]:
    if message.role == "tool":
        result: dict[str, Any] = {"type": "tool_result", "tool_use_id": message.tool_call_id or ""}
        content = _parts(message)
        if content:
            only_text = all(block["type"] == "text" for block in content)
            result["content"] = message.text if only_text else content
        return [result]
    if message.role != "assistant":
        return _parts(message)
    kept = kept_content(message, model)
    if kept is not None:
        return kept
    calls = [
        {"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments}
        for call in message.tool_calls
    ]
    return _parts(message) + calls


def kept_content(message: Message, model: str) -> list[dict[str, Any]] | None:
    """The reply's blocks as received (thinking and signatures included), if they still match
    the message: the same model, the same tool calls in the same order, and the same text."""
    kept = message.extra.get(EXTRA_KEY)
    if not isinstance(kept, dict) or kept.get("model") != model or not message.tool_calls:
        return None
    blocks = kept.get("content")
    if not isinstance(blocks, list) or not all(_typed(block) for block in blocks):
        return None
    ids = [block.get("id") for block in blocks if block["type"] == "tool_use"]
    text = "".join(str(block.get("text", "")) for block in blocks if block["type"] == "text")
    if ids != [call.id for call in message.tool_calls] or text != message.text:
        return None
    inputs = {call.id: call.arguments for call in message.tool_calls}
    return [
        {**block, "input": inputs[block["id"]]} if block["type"] == "tool_use" else dict(block)
        for block in blocks
        if block["type"] != "text" or str(block.get("text", "")).strip()
    ]


def _typed(block: Any) -> bool:
    return isinstance(block, dict) and isinstance(block.get("type"), str)


def thinking_allowed(messages: list[dict[str, Any]]) -> bool:
    """False when the last assistant message made tool calls but lost its thinking blocks (a
    history carried over from another model, or one that thinking was switched on in the middle
    of): with thinking enabled the API rejects such a request, and the way out it names is to
    disable thinking for it."""
    for message in reversed(messages):
        if message["role"] != "assistant":
            continue
        blocks = message["content"]
        has_calls = any(block["type"] == "tool_use" for block in blocks)
        return not has_calls or blocks[0]["type"] in THINKING_TYPES
    return True


def _parts(message: Message) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for part in message.content:
        if isinstance(part, TextPart):
            if part.text.strip():
                out.append({"type": "text", "text": part.text})
        elif isinstance(part, ImagePart):
            source = {"type": "base64", "media_type": part.mime_type, "data": part.data}
            out.append({"type": "image", "source": source})
    return out


# ----- streamed response ----------------------------------------------------------------------


@dataclass
class _Block:
    """One content block of the reply as it streams in."""

    kind: str
    start: dict[str, Any]
    parts: list[str] = field(default_factory=list)  # text, thinking or input JSON fragments
    signature: str = ""

    def finished(self) -> dict[str, Any]:
        """The block as the API wants it back."""
        text = "".join(self.parts)
        if self.kind == "thinking":
            return {"type": "thinking", "thinking": text, "signature": self.signature}
        if self.kind == "text":
            return {"type": "text", "text": text}
        if self.kind == "tool_use":
            return {"type": "tool_use", "id": self.start.get("id"), "name": self.start.get("name")}
        return dict(self.start)  # redacted_thinking and anything else: as received


class EventParser:
    """Turns the SSE events of one streamed reply into neutral events (without the Finish)."""

    def __init__(self, model: str) -> None:
        self.model = model  # signatures are kept for the model that made them
        self.done = False  # saw `message_stop`
        self.stop_reason: str | None = None
        self.saw_calls = False
        self._usage: dict[str, int] = {}
        self._blocks: dict[int, _Block] = {}

    def feed(self, sse: SseEvent) -> list[Event]:
        """Events for one SSE event; raises BackendError for an error event."""
        try:
            data = _json.loads(sse.data)
        except ValueError:
            if sse.event == "error":
                failure = error_from_payload({"error": sse.data[:500]})
                raise failure or BackendError("The model server reported an error.") from None
            log.debug("ignoring a non-JSON stream frame: %.200s", sse.data)
            return []
        if not isinstance(data, dict):
            return []
        kind = data.get("type") or sse.event
        if kind == "error":
            raise error_from_payload(data) or BackendError("The Anthropic API reported an error.")
        handler = getattr(self, f"_on_{kind}", None)
        return list(handler(data)) if handler is not None else []

    def final_events(self) -> list[Event]:
        """The blocks to keep (if the reply made calls after thinking) and the usage."""
        out: list[Event] = []
        blocks = [self._blocks[i].finished() for i in sorted(self._blocks)]
        if self.saw_calls and any(block["type"] in THINKING_TYPES for block in blocks):
            out.append(PrivateData({EXTRA_KEY: {"model": self.model, "content": blocks}}))
        if self._usage:
            out.append(usage_event(self._usage))
        return out

    def final_reason(self) -> FinishReason:
        """The reply's finish reason once the stream ended; raises if it was cut off."""
        if not self.done:
            raise BackendError(CLOSED_MID_REPLY, reason="closed the connection", transient=True)
        reason = STOP_REASONS.get(str(self.stop_reason), "stop")
        return "tool_calls" if reason == "stop" and self.saw_calls else reason

    def _on_message_start(self, data: dict[str, Any]) -> list[Event]:
        message = data.get("message") or {}
        self._merge_usage(message.get("usage") if isinstance(message, dict) else None)
        return []

    def _on_content_block_start(self, data: dict[str, Any]) -> list[Event]:
        start = data.get("content_block")
        index = _index(data)
        if not isinstance(start, dict) or index is None:
            return []
        block = _Block(str(start.get("type")), start)
        self._blocks[index] = block
        if block.kind == "tool_use":
            self.saw_calls = True
            return [ToolCallDelta(index, start.get("id") or None, start.get("name") or None)]
        if block.kind == "text":
            return self._text(block, start.get("text"))
        if block.kind == "thinking":
            block.signature = str(start.get("signature") or "")
            return self._thought(block, start.get("thinking"))
        return []

    def _on_content_block_delta(self, data: dict[str, Any]) -> list[Event]:
        found, delta = self._at(data), data.get("delta")
        if found is None or not isinstance(delta, dict):
            return []
        index, block = found
        kind = delta.get("type")
        if kind == "text_delta":
            return self._text(block, delta.get("text"))
        if kind == "thinking_delta":
            return self._thought(block, delta.get("thinking"))
        if kind == "signature_delta":
            block.signature += str(delta.get("signature") or "")
        elif kind == "input_json_delta" and delta.get("partial_json"):
            block.parts.append(str(delta["partial_json"]))
            return [ToolCallDelta(index, arguments=str(delta["partial_json"]))]
        return []

    def _on_content_block_stop(self, data: dict[str, Any]) -> list[Event]:
        found = self._at(data)
        if found is None:
            return []
        index, block = found
        start_input = block.start.get("input")
        if block.kind != "tool_use" or block.parts or not isinstance(start_input, dict):
            return []
        if not start_input:
            return []
        # A server that sent the whole input at the start and no deltas.
        arguments = json.dumps(start_input)
        block.parts.append(arguments)
        return [ToolCallDelta(index, arguments=arguments)]

    def _on_message_delta(self, data: dict[str, Any]) -> list[Event]:
        delta = data.get("delta") or {}
        if isinstance(delta, dict) and delta.get("stop_reason"):
            self.stop_reason = str(delta["stop_reason"])
        self._merge_usage(data.get("usage"))
        return []

    def _on_message_stop(self, data: dict[str, Any]) -> list[Event]:
        self.done = True
        return []

    def _at(self, data: dict[str, Any]) -> tuple[int, _Block] | None:
        """The block an event is about, with its index."""
        index = _index(data)
        block = self._blocks.get(index) if index is not None else None
        return (index, block) if index is not None and block is not None else None

    def _merge_usage(self, usage: Any) -> None:
        if isinstance(usage, dict):
            self._usage.update({k: v for k, v in usage.items() if isinstance(v, int)})

    @staticmethod
    def _text(block: _Block, text: Any) -> list[Event]:
        if not isinstance(text, str) or not text:
            return []
        block.parts.append(text)
        return [TextDelta(text)]

    @staticmethod
    def _thought(block: _Block, text: Any) -> list[Event]:
        if not isinstance(text, str) or not text:
            return []
        block.parts.append(text)
        return [ThoughtDelta(text)]


def _index(data: dict[str, Any]) -> int | None:
    index = data.get("index")
    return index if isinstance(index, int) and not isinstance(index, bool) else None


def usage_event(usage: dict[str, int]) -> Usage:
    """Anthropic's `input_tokens` excludes cache reads and writes; the neutral prompt count is
    the whole prompt, so they are added back."""
    cached = usage.get("cache_read_input_tokens", 0)
    written = usage.get("cache_creation_input_tokens", 0)
    return Usage(
        prompt_tokens=usage.get("input_tokens", 0) + cached + written,
        completion_tokens=usage.get("output_tokens", 0),
        cached_tokens=cached,
        cache_write_tokens=written,
    )
