"""The OpenAI Responses dialect: neutral request → JSON body, SSE events → neutral events.

Pure functions and one parser class, no I/O; `responses.py` does the HTTP. Why this dialect at
all: OpenAI's reasoning models (gpt-5, the o-series) reason in *reasoning items* that chat
completions never hands back, so between the tool rounds of one turn their reasoning was lost.
Here it is kept. The rules of the wire:

- the system prompt is `instructions`; history becomes `input` items: user text and images
  (`input_text`, `input_image` with a data URL), assistant text (`output_text`), each tool call a
  `function_call` item (`call_id`, name, arguments as JSON text), each result a
  `function_call_output` item (text: the images of results, read_file on a picture, follow the
  results in one user message, and each result says so where its image was);
- requests are stateless (`store: false`) and ask for `include: ["reasoning.encrypted_content"]`:
  each reasoning item of a reply that made tool calls comes back with its encrypted content. The
  parser hands the reply's output items to the agent loop as a `PrivateData` event (kept in
  `Message.extra[EXTRA_KEY]`, stamped with the model; dropped by a switch to another model or
  dialect). `render_message` resends every reasoning item separately, as received and in its
  place (just before the item that followed it), on every later round: the API refuses a
  reasoning item without its following item, and a model that loses its reasoning between tool
  rounds starts over;
- `max_output_tokens` caps the reply; a thought level becomes `reasoning.effort`; reasoning
  summaries (`reasoning.summary: "auto"`) become thoughts;
- the stream: `response.output_item.added/done` per item, `response.output_text.delta`,
  `response.reasoning_summary_text.delta` (and `reasoning_text.delta` for open models),
  `response.function_call_arguments.delta/done`, then `response.completed` with the usage, or
  `response.incomplete` (`max_output_tokens`: cut off), `response.failed`, or `error`.
"""

from __future__ import annotations

import json
import logging
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
    PrivateData,
    TextDelta,
    TextPart,
    ThoughtDelta,
    ToolCallDelta,
    ToolSpec,
    Usage,
)
from acp_server.thought import openai_reasoning_effort

log = logging.getLogger(__name__)

DIALECT = "openai-responses"
# Message.extra[EXTRA_KEY] = {"model": the model, "items": the reply's output items in order:
# reasoning items whole, messages as {"type": "message"}, calls as {"type", "call_id"}}
EXTRA_KEY = DIALECT
REASONING_FIELDS = ("type", "id", "summary", "content", "encrypted_content")
INCOMPLETE: dict[str, FinishReason] = {
    "max_output_tokens": "length",
    "content_filter": "refusal",
}
CLOSED_MID_REPLY = "The connection to the model server closed mid-reply."
MIN_OUTPUT_TOKENS = 16  # the API refuses a smaller `max_output_tokens`


# ----- request --------------------------------------------------------------------------------


def payload(
    model: str, request: ModelRequest, *, reasoning: bool, summaries: bool = True
) -> dict[str, Any]:
    """The JSON body of a streamed Responses request. `reasoning`: the model reasons (it takes
    `reasoning` and hands back encrypted reasoning); `summaries`: ask for reasoning summaries."""
    body: dict[str, Any] = {"model": model, "input": render_input(request.messages, model)}
    if request.system:
        body["instructions"] = request.system
    if request.tools:
        body["tools"] = [render_tool(tool) for tool in request.tools]
        body["tool_choice"] = "auto"
    if request.max_tokens is not None:
        body["max_output_tokens"] = max(MIN_OUTPUT_TOKENS, request.max_tokens)
    if reasoning:
        body["reasoning"] = _reasoning(request.thought_level, summaries)
        body["include"] = ["reasoning.encrypted_content"]
    body["store"] = False
    if request.cache_key:
        body["prompt_cache_key"] = request.cache_key
    body["stream"] = True
    return body


def _reasoning(level: str | None, summaries: bool) -> dict[str, Any]:
    settings: dict[str, Any] = {}
    effort = openai_reasoning_effort(level)
    if effort is not None:
        settings["effort"] = effort
    if summaries:
        settings["summary"] = "auto"
    return settings


def render_tool(tool: ToolSpec) -> dict[str, Any]:
    return {
        "type": "function",
        "name": tool.name,
        "description": tool.description,
        "parameters": tool.parameters,
    }


def render_input(messages: tuple[Message, ...], model: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    held: list[ImagePart] = []  # images of the tool results just rendered
    for message in messages:
        if held and message.role != "tool":
            out.append(_tool_images(held))
            held = []
        out += render_message(message, model)
        if message.role == "tool":
            held += [part for part in message.content if isinstance(part, ImagePart)]
    if held:
        out.append(_tool_images(held))
    return out


def _tool_images(images: list[ImagePart]) -> dict[str, Any]:
    """A `function_call_output` is text: the images of the results go in a user message."""
    content = [{"type": "input_text", "text": TOOL_IMAGES_INTRO}]
    content += [_input_image(part) for part in images]
    return {"type": "message", "role": "user", "content": content}


def _input_image(part: ImagePart) -> dict[str, Any]:
    return {"type": "input_image", "image_url": f"data:{part.mime_type};base64,{part.data}"}


def render_message(message: Message, model: str) -> list[dict[str, Any]]:
    """The input items of one neutral message."""
    if message.role == "tool":
        output = {"type": "function_call_output", "call_id": message.tool_call_id or ""}
        return [{**output, "output": _tool_text(message)}]
    if message.role != "assistant":
        role = "developer" if message.role == "system" else message.role
        parts = _user_parts(message)
        return [{"type": "message", "role": role, "content": parts}] if parts else []
    kept = kept_items(message, model)
    if kept is not None:
        return kept
    return _assistant_text(message) + [_call(message, n) for n in range(len(message.tool_calls))]


def kept_items(message: Message, model: str) -> list[dict[str, Any]] | None:
    """The reply's items as received (reasoning with its encrypted content), text and calls
    taken from the message, if they still describe it: the same model, the same calls in the
    same order. Each reasoning item is resent only with the item that followed it."""
    kept = message.extra.get(EXTRA_KEY)
    if not isinstance(kept, dict) or kept.get("model") != model or not message.tool_calls:
        return None
    items = kept.get("items")
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        return None
    ids = [item.get("call_id") for item in items if item.get("type") == "function_call"]
    if ids != [call.id for call in message.tool_calls]:
        return None
    out: list[dict[str, Any]] = []
    waiting: list[dict[str, Any]] = []  # reasoning items until the item they precede
    text = _assistant_text(message)
    calls = iter(range(len(message.tool_calls)))
    for item in items:
        if item.get("type") == "reasoning":
            # `summary` is required on input, even empty (a server may have left it out).
            waiting.append({"summary": [], **{k: item[k] for k in REASONING_FIELDS if k in item}})
            continue
        rendered = [_call(message, next(calls))] if item.get("type") == "function_call" else text
        if item.get("type") == "message":
            text = []  # the whole text goes with the first message item
        if rendered:
            out += waiting + rendered
            waiting = []
    return out


def _assistant_text(message: Message) -> list[dict[str, Any]]:
    if not message.text:
        return []
    content = [{"type": "output_text", "text": message.text}]
    return [{"type": "message", "role": "assistant", "content": content}]


def _call(message: Message, n: int) -> dict[str, Any]:
    call = message.tool_calls[n]
    arguments = json.dumps(call.arguments)
    return {"type": "function_call", "call_id": call.id, "name": call.name, "arguments": arguments}


def _tool_text(message: Message) -> str:
    return "".join(
        part.text if isinstance(part, TextPart) else attached_note(part) for part in message.content
    )


def _user_parts(message: Message) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    for part in message.content:
        if isinstance(part, TextPart):
            if part.text:
                parts.append({"type": "input_text", "text": part.text})
        elif isinstance(part, ImagePart):
            parts.append(_input_image(part))
    return parts


# ----- streamed response ----------------------------------------------------------------------


class EventParser:
    """Turns the SSE events of one streamed response into neutral events; the kept items, the
    usage and the Finish come from `final_events()` once the stream ended."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.done = False  # saw the response end (completed or incomplete)
        self.finish: FinishReason = "stop"
        self.saw_calls = False
        self.usage: Usage | None = None
        self._items: dict[int, dict[str, Any]] = {}  # output index -> the item as it ended
        self._streamed: set[int] = set()  # calls whose arguments came as deltas
        self._parts: set[tuple[int, int]] = set()  # reasoning summary parts seen

    def feed(self, sse: SseEvent) -> list[Event]:
        """Events for one SSE event; raises BackendError for an error or a failed response."""
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
        kind = str(data.get("type") or sse.event or "")
        if kind == "error":
            raise _stream_error(data)
        handler = _HANDLERS.get(kind)
        return handler(self, data) if handler is not None else []

    def final_events(self) -> list[Event]:
        """The reply's items to keep (when it made calls after reasoning), usage and Finish;
        raises if the stream was cut off before the response ended."""
        if not self.done:
            raise BackendError(CLOSED_MID_REPLY, reason="closed the connection", transient=True)
        out: list[Event] = []
        items = [self._items[i] for i in sorted(self._items)]
        if self.saw_calls and any(item.get("type") == "reasoning" for item in items):
            out.append(PrivateData({EXTRA_KEY: {"model": self.model, "items": items}}))
        if self.usage is not None:
            out.append(self.usage)
        reason = self.finish
        out.append(Finish("tool_calls" if reason == "stop" and self.saw_calls else reason))
        return out

    def _item_added(self, data: dict[str, Any]) -> list[Event]:
        item, index = data.get("item"), _index(data)
        if not isinstance(item, dict) or index is None or item.get("type") != "function_call":
            return []
        self.saw_calls = True
        call_id = item.get("call_id") or item.get("id") or None
        return [ToolCallDelta(index, call_id, item.get("name") or None)]

    def _item_done(self, data: dict[str, Any]) -> list[Event]:
        item, index = data.get("item"), _index(data)
        if not isinstance(item, dict) or index is None:
            return []
        kind = item.get("type")
        if kind == "reasoning":
            self._items[index] = {k: item[k] for k in REASONING_FIELDS if k in item}
        elif kind == "function_call":
            self._items[index] = {"type": "function_call", "call_id": item.get("call_id")}
            return self._whole_arguments(index, item)
        elif kind == "message":
            self._items[index] = {"type": "message"}
        return []

    def _whole_arguments(self, index: int, item: dict[str, Any]) -> list[Event]:
        """A call whose arguments came whole (no deltas): they are sent now."""
        self.saw_calls = True
        call_id = item.get("call_id") or None
        arguments = item.get("arguments") if index not in self._streamed else ""
        text = arguments if isinstance(arguments, str) else ""
        return [ToolCallDelta(index, call_id, item.get("name") or None, text)]

    def _text(self, data: dict[str, Any]) -> list[Event]:
        delta = data.get("delta")
        return [TextDelta(delta)] if isinstance(delta, str) and delta else []

    def _refusal(self, data: dict[str, Any]) -> list[Event]:
        self.finish = "refusal"
        return self._text(data)

    def _summary_part(self, data: dict[str, Any]) -> list[Event]:
        """A new summary part after the first of the reply: a paragraph break in the thought."""
        key = (_index(data) or 0, int(data.get("summary_index") or 0))
        self._parts.add(key)
        return [ThoughtDelta("\n\n")] if len(self._parts) > 1 else []

    def _thought(self, data: dict[str, Any]) -> list[Event]:
        delta = data.get("delta")
        return [ThoughtDelta(delta)] if isinstance(delta, str) and delta else []

    def _arguments(self, data: dict[str, Any]) -> list[Event]:
        index, delta = _index(data), data.get("delta")
        if index is None or not isinstance(delta, str) or not delta:
            return []
        self._streamed.add(index)
        return [ToolCallDelta(index, arguments=delta)]

    def _ended(self, data: dict[str, Any]) -> list[Event]:
        response = data.get("response")
        response = response if isinstance(response, dict) else {}
        self.done = True
        self.usage = usage_event(response.get("usage")) or self.usage
        details = response.get("incomplete_details")
        if response.get("status") == "incomplete" or data.get("type") == "response.incomplete":
            why = details.get("reason") if isinstance(details, dict) else None
            self.finish = INCOMPLETE.get(str(why), "length")
        return []

    def _failed(self, data: dict[str, Any]) -> list[Event]:
        response = data.get("response")
        error = response.get("error") if isinstance(response, dict) else None
        raise _stream_error({"error": error or {"message": "the response failed"}})


_HANDLERS = {
    "response.output_item.added": EventParser._item_added,
    "response.output_item.done": EventParser._item_done,
    "response.output_text.delta": EventParser._text,
    "response.refusal.delta": EventParser._refusal,
    "response.reasoning_summary_part.added": EventParser._summary_part,
    "response.reasoning_summary_text.delta": EventParser._thought,
    "response.reasoning_text.delta": EventParser._thought,
    "response.function_call_arguments.delta": EventParser._arguments,
    "response.completed": EventParser._ended,
    "response.incomplete": EventParser._ended,
    "response.failed": EventParser._failed,
}


def _stream_error(data: dict[str, Any]) -> BackendError:
    """An `error` event (`{"type": "error", "code", "message"}`) or a failed response's error."""
    nested = data.get("error")
    error: dict[str, Any] = nested if isinstance(nested, dict) else data
    envelope = {"error": {**error, "message": error.get("message") or "no details given"}}
    failure = error_from_payload(envelope) or BackendError("The model server reported an error.")
    code = str(error.get("code") or "")
    if code in ("server_error", "rate_limit_exceeded") or "overloaded" in code:
        failure.transient = failure.context_overflow is None
    return failure


def _index(data: dict[str, Any]) -> int | None:
    index = data.get("output_index")
    return index if isinstance(index, int) and not isinstance(index, bool) else None


def usage_event(usage: Any) -> Usage | None:
    """`input_tokens` is the whole prompt (cached tokens included, as OpenAI counts)."""
    if not isinstance(usage, dict):
        return None
    details = usage.get("input_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else 0
    output = usage.get("output_tokens_details")
    thought = output.get("reasoning_tokens") if isinstance(output, dict) else 0
    return Usage(
        prompt_tokens=int(usage.get("input_tokens") or 0),
        completion_tokens=int(usage.get("output_tokens") or 0),
        cached_tokens=int(cached or 0),
        thought_tokens=int(thought or 0),
    )
