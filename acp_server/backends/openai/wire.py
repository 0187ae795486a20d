"""The OpenAI chat-completions dialect: neutral request → JSON body, wire chunks → neutral events.

Pure functions and one small parser class, no I/O; `openai.py` does the HTTP. The traps handled
here are the ones real OpenAI-compatible servers set:

- assistant `content` is always a string, `""` when empty, never null (llama.cpp rejects null);
- tool-call arguments are sent as a JSON string; thoughts are never resent;
- tool messages carry text only: the images of tool results (read_file on a picture) go in one
  user message right after the results, and each result says so where its image was;
- a thought level becomes `reasoning_effort` ("on" sends none: the model's default);
- the reply's cap is `max_tokens`, or `max_completion_tokens` for the models that refuse the
  former (OpenAI's reasoning models, `catalog.openai_reasoning`);
- streamed tool calls are keyed by `index`: id and name are *set* (llama.cpp repeats them in
  every delta), arguments appended; a new id at a known index starts a new call (some gateways
  send parallel calls all at index 0);
- the finish reason and the usage are held until the stream ends: the usage chunk follows the
  finish chunk, and some servers repeat a running usage in every chunk (one Usage goes out);
- an error envelope inside a 200 stream is an error, never an empty reply;
- a tool call's `extra_content` (Gemini 3's OpenAI-compatible API puts the call's
  `google.thought_signature` there, and refuses the next round without it) is kept on the call
  (`ToolCall.extra[EXTRA_KEY]`, stamped with the model) and sent back with it unchanged.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

from acp_server.backends import _json
from acp_server.backends._http import BackendError, error_from_payload
from acp_server.backends._sse import SseEvent
from acp_server.backends.images import TOOL_IMAGES_INTRO, attached_note
from acp_server.messages import (
    Event,
    Finish,
    FinishReason,
    ImagePart,
    Message,
    ModelRequest,
    TextDelta,
    TextPart,
    ThoughtDelta,
    ToolCall,
    ToolCallDelta,
    ToolSpec,
    Usage,
)
from acp_server.thought import openai_reasoning_effort

log = logging.getLogger(__name__)

FINISH_REASONS: dict[str, FinishReason] = {
    "stop": "stop",
    "eos": "stop",
    "end_turn": "stop",
    "length": "length",
    "max_tokens": "length",
    "content_filter": "refusal",
    "refusal": "refusal",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
}
CLOSED_MID_REPLY = "The connection to the model server closed mid-reply."
# ToolCall.extra[EXTRA_KEY] = {"model": the model that made the call, "extra_content": {...}}
EXTRA_KEY = "openai"


# ----- request --------------------------------------------------------------------------------


def payload(
    model: str,
    request: ModelRequest,
    *,
    stream: bool,
    stream_options: bool,
    limit_field: str = "max_tokens",
    sampling: Mapping[str, float] | None = None,
    cache: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The JSON body of a chat-completions request. `limit_field` names the reply's cap:
    OpenAI's reasoning models take `max_completion_tokens` and refuse `max_tokens`.
    `sampling` is the temperature and top_p configured (`backends.sampling`), never a default
    of ours: unset, the server's own applies. `cache`: the fields that keep the server's prompt
    cache for the session (`cache_fields`)."""
    body: dict[str, Any] = {"model": model, "messages": render_messages(request)}
    if request.tools:
        body["tools"] = [render_tool(tool) for tool in request.tools]
        # Explicit: some gateways otherwise let the model describe the action in prose.
        body["tool_choice"] = "auto"
    if request.max_tokens is not None:
        body[limit_field] = request.max_tokens
    body.update(sampling or {})
    effort = openai_reasoning_effort(request.thought_level)
    if effort is not None:
        body["reasoning_effort"] = effort
    body.update(cache or {})
    body["stream"] = stream
    if stream and stream_options:
        body["stream_options"] = {"include_usage": True}
    return body


def render_messages(request: ModelRequest) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if request.system:
        out.append({"role": "system", "content": request.system})
    held: list[ImagePart] = []  # images of the tool results just rendered
    for message in request.messages:
        if held and message.role != "tool":
            out.append(_tool_images(held))
            held = []
        out.append(render_message(message))
        if message.role == "tool":
            held += [part for part in message.content if isinstance(part, ImagePart)]
    if held:
        out.append(_tool_images(held))
    return out


def _tool_images(images: list[ImagePart]) -> dict[str, Any]:
    """The dialect's tool messages carry text only: the images of the tool results go in a user
    message right after them (not between them: the results must follow their calls)."""
    text = {"type": "text", "text": TOOL_IMAGES_INTRO}
    return {"role": "user", "content": [text, *(_image_url(part) for part in images)]}


def _image_url(part: ImagePart) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": f"data:{part.mime_type};base64,{part.data}"}}


def render_message(message: Message) -> dict[str, Any]:
    if message.role == "tool":
        content = _tool_text(message)
        return {"role": "tool", "tool_call_id": message.tool_call_id or "", "content": content}
    if message.role == "assistant":
        rendered: dict[str, Any] = {"role": "assistant", "content": message.text}
        if message.tool_calls:
            rendered["tool_calls"] = [render_call(call) for call in message.tool_calls]
        return rendered
    return {"role": message.role, "content": _user_content(message)}


def render_call(call: ToolCall) -> dict[str, Any]:
    """An assistant tool call, with its kept `extra_content` (Gemini's thought signature)."""
    rendered: dict[str, Any] = {
        "id": call.id,
        "type": "function",
        # Invalid argument text is not resent: templates that parse it would fail.
        "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
    }
    kept = call.extra.get(EXTRA_KEY)
    if isinstance(kept, dict) and isinstance(kept.get("extra_content"), dict):
        rendered["extra_content"] = kept["extra_content"]
    return rendered


def _tool_text(message: Message) -> str:
    """A tool result's text: the dialect's tool messages carry no images, so each is sent in
    the user message that follows (`_tool_images`) and named here."""
    return "".join(
        part.text if isinstance(part, TextPart) else attached_note(part) for part in message.content
    )


def _user_content(message: Message) -> str | list[dict[str, Any]]:
    if not any(isinstance(part, ImagePart) for part in message.content):
        return message.text
    parts: list[dict[str, Any]] = []
    for part in message.content:
        if isinstance(part, TextPart):
            parts.append({"type": "text", "text": part.text})
        else:
            parts.append(_image_url(part))
    return parts


def render_tool(tool: ToolSpec) -> dict[str, Any]:
    function = {"name": tool.name, "description": tool.description, "parameters": tool.parameters}
    return {"type": "function", "function": function}


# ----- streamed response ------------------------------------------------------------------------


class ChunkParser:
    """Turns SSE events of one streamed reply into neutral events; the usage and the Finish
    come from `final_events()` once the stream ended."""

    def __init__(self, model: str = "") -> None:
        self.model = model  # kept data of a call is stamped with the model that made it
        self.chunks = 0  # JSON chunks seen; 0 at the end means the server sent nothing
        self.done = False  # saw `[DONE]`
        self.finish: FinishReason | None = None
        self.usage: Usage | None = None
        self.saw_calls = False
        self._slots: dict[int, int] = {}  # wire index → our index
        self._ids: dict[int, str] = {}  # our index → call id
        self._next_index = 0

    def feed(self, sse: SseEvent) -> list[Event]:
        """Events for one SSE event; raises BackendError for an error frame."""
        if sse.done:
            self.done = True
            return []
        try:
            chunk = _json.loads(sse.data)
        except ValueError:
            if sse.event == "error":
                failure = error_from_payload({"error": sse.data[:500]})
                raise failure or BackendError("The model server reported an error.") from None
            log.debug("ignoring a non-JSON stream frame: %.200s", sse.data)
            return []
        failure = error_from_payload(chunk)
        if failure is not None:
            raise failure
        if not isinstance(chunk, dict):
            return []
        self.chunks += 1
        return self.chunk_events(chunk)

    def chunk_events(self, chunk: dict[str, Any]) -> list[Event]:
        out: list[Event] = []
        for choice in chunk.get("choices") or []:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            out += self._delta_events(choice.get("delta") or {})
            if choice.get("finish_reason"):
                self.finish = map_finish(choice["finish_reason"])
        # Held for the end: some servers repeat (cumulative) usage in every chunk.
        self.usage = usage_event(chunk.get("usage"), chunk.get("timings")) or self.usage
        return out

    def final_events(self) -> list[Event]:
        """Usage (if any) and the Finish, once the stream ended; raises if it was cut off."""
        finish = Finish(self.final_reason())
        return [self.usage, finish] if self.usage is not None else [finish]

    def final_reason(self) -> FinishReason:
        """The reply's finish reason once the stream ended; raises if it was cut off."""
        if self.finish is None and not self.done:
            raise BackendError(CLOSED_MID_REPLY, reason="closed the connection", transient=True)
        reason = self.finish or ("tool_calls" if self.saw_calls else "stop")
        return "tool_calls" if reason == "stop" and self.saw_calls else reason

    def _delta_events(self, delta: dict[str, Any]) -> list[Event]:
        out: list[Event] = []
        thought = delta.get("reasoning_content") or delta.get("reasoning")
        if isinstance(thought, str) and thought:
            out.append(ThoughtDelta(thought))
        if isinstance(delta.get("content"), str) and delta["content"]:
            out.append(TextDelta(delta["content"]))
        for position, call in enumerate(delta.get("tool_calls") or []):
            if isinstance(call, dict):
                out.append(self._call_delta(position, call))
        return out

    def _call_delta(self, position: int, call: dict[str, Any]) -> ToolCallDelta:
        self.saw_calls = True
        function = call.get("function") or {}
        call_id = call.get("id") or None
        wire_index = call.get("index")
        index = self._slot(wire_index if isinstance(wire_index, int) else position, call_id)
        kept = call.get("extra_content")
        extra = {EXTRA_KEY: {"model": self.model, "extra_content": kept}} if kept else None
        return ToolCallDelta(
            index,
            call_id,
            function.get("name") or None,
            _arguments(function.get("arguments")),
            extra if isinstance(kept, dict) else None,
        )

    def _slot(self, wire_index: int, call_id: str | None) -> int:
        """Our index for a wire index: a new one when a different call id shows up there."""
        index = self._slots.get(wire_index)
        known = self._ids.get(index) if index is not None else None
        if index is None or (call_id and known and call_id != known):
            index = self._next_index
            self._next_index += 1
            self._slots[wire_index] = index
        if call_id:
            self._ids[index] = call_id
        return index


# ----- non-streamed response --------------------------------------------------------------------


def completion_events(body: Any, model: str = "") -> list[Event]:
    """The events of a whole (non-streamed) chat completion, Finish included; raises
    BackendError for an error envelope or a reply without choices."""
    failure = error_from_payload(body)
    if failure is not None:
        raise failure
    choices = body.get("choices") if isinstance(body, dict) else None
    if not choices or not isinstance(choices[0], dict):
        raise BackendError("The model server returned an empty reply.")
    choice = choices[0]
    parser = ChunkParser(model)
    events = parser.chunk_events(
        {
            "choices": [
                {"delta": choice.get("message") or {}, "finish_reason": choice.get("finish_reason")}
            ],
            "usage": body.get("usage"),
        }
    )
    parser.done = True
    return events + parser.final_events()


def cache_fields(key: str | None, *, openai: bool, slots: int | None) -> dict[str, Any]:
    """What keeps a session's prompt cache: api.openai.com takes `prompt_cache_key` (other
    servers may refuse a field they do not know, so it goes there alone); llama.cpp
    (`slots`: how many its `/props` said it has) takes `cache_prompt` and a slot of its own
    for the session (`id_slot`), so another session does not evict its prefix."""
    if key is None:
        return {}
    if openai:
        return {"prompt_cache_key": key}
    if slots is None:
        return {}
    return {"cache_prompt": True, "id_slot": int(key[:8], 16) % max(slots, 1)}


def map_finish(reason: Any) -> FinishReason:
    return FINISH_REASONS.get(str(reason), "stop")


def usage_event(usage: Any, timings: Any = None) -> Usage | None:
    """The counts of `usage`; the tokens a prompt cache served from OpenAI's
    `prompt_tokens_details.cached_tokens`, else llama.cpp's `timings.cache_n`."""
    if not isinstance(usage, dict):
        return None
    details = usage.get("prompt_tokens_details") or {}
    cached = details.get("cached_tokens") if isinstance(details, dict) else 0
    if not cached and isinstance(timings, dict) and isinstance(timings.get("cache_n"), int):
        cached = timings["cache_n"]
    output = usage.get("completion_tokens_details") or {}
    thought = output.get("reasoning_tokens") if isinstance(output, dict) else 0
    return Usage(
        prompt_tokens=int(usage.get("prompt_tokens") or 0),
        completion_tokens=int(usage.get("completion_tokens") or 0),
        cached_tokens=int(cached or 0),
        thought_tokens=int(thought or 0),
    )


def _arguments(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, dict):  # some servers send an object instead of its JSON text
        return json.dumps(value)
    return ""
