"""Ollama's native `/api/chat` dialect: neutral request → JSON body, NDJSON lines → neutral events.

Pure functions and one small parser class, no I/O; `ollama.py` does the HTTP. Why native and not
Ollama's OpenAI-compatible endpoint: only `/api/chat` honors `options.num_ctx`, so only here does
the window we budget for match the window the server really uses.

Wire facts this module relies on:

- messages carry `content` as a plain string, images as `images: [base64]`, assistant tool calls
  as `tool_calls: [{function: {name, arguments: <object>}}]` (arguments are an object, not JSON
  text), and tool results as role `tool` with `tool_name` (Ollama matches results by name; the
  call id goes along as `tool_call_id` for servers that use it and is ignored by the others);
- thoughts are never resent; a thought level becomes `think` (a switch, or a level for the
  models that have levels), in place of the backend's own `think`;
- the stream is one JSON object per line: `message.content`, `message.thinking`,
  `message.tool_calls` (each call complete in one line, usually without an id), then a last object
  with `done: true`, `done_reason` ("stop", "length", ...) and the counts `prompt_eval_count` /
  `eval_count` (left out when unknown, e.g. a fully cached prompt may omit the prompt count);
- Ollama has no "tool_calls" done reason: a reply with calls ends with "stop";
- an error arrives as `{"error": "..."}`, as the body of a non-2xx answer or as a line mid-stream.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Mapping
from typing import Any

from acp_server.backends import _json
from acp_server.backends._http import BackendError, error_from_payload
from acp_server.backends.openai.wire import render_tool
from acp_server.messages import (
    Event,
    FinishReason,
    ImagePart,
    Message,
    ModelRequest,
    TextDelta,
    ThoughtDelta,
    ToolCallDelta,
    Usage,
)
from acp_server.thought import ollama_think

log = logging.getLogger(__name__)

CLOSED_MID_REPLY = "The connection to Ollama closed mid-reply."
_NUM_CTX_LINE = re.compile(r"^\s*num_ctx\s+(\d+)\s*$", re.MULTILINE)


# ----- request --------------------------------------------------------------------------------


def payload(
    model: str,
    request: ModelRequest,
    *,
    num_ctx: int | None = None,
    think: bool | str | None = None,
    sampling: Mapping[str, float] | None = None,
) -> dict[str, Any]:
    """The JSON body of a streamed `/api/chat` request (`sampling`: the configured
    temperature and top_p, which Ollama takes among its options)."""
    body: dict[str, Any] = {"model": model, "messages": render_messages(request), "stream": True}
    if request.tools:
        body["tools"] = [render_tool(tool) for tool in request.tools]
    options: dict[str, Any] = dict(sampling or {})
    if num_ctx is not None:
        options["num_ctx"] = num_ctx
    if request.max_tokens is not None:
        options["num_predict"] = request.max_tokens
    if options:
        body["options"] = options
    if request.thought_level is not None:
        think = ollama_think(request.thought_level)
    if think is not None:
        body["think"] = think
    return body


def render_messages(request: ModelRequest) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if request.system:
        out.append({"role": "system", "content": request.system})
    names: dict[str, str] = {}  # call id → tool name, for the results that answer them
    for message in request.messages:
        for call in message.tool_calls:
            names[call.id] = call.name
        out.append(render_message(message, names))
    return out


def render_message(message: Message, names: dict[str, str]) -> dict[str, Any]:
    rendered: dict[str, Any] = {"role": message.role, "content": message.text}
    images = [part.data for part in message.content if isinstance(part, ImagePart)]
    if images:
        rendered["images"] = images
    if message.role == "tool":
        call_id = message.tool_call_id or ""
        rendered["tool_name"] = names.get(call_id, "")
        rendered["tool_call_id"] = call_id
    if message.role == "assistant" and message.tool_calls:
        rendered["tool_calls"] = [
            {"function": {"name": call.name, "arguments": call.arguments}}
            for call in message.tool_calls
        ]
    return rendered


# ----- streamed response ----------------------------------------------------------------------


class LineParser:
    """Turns the NDJSON lines of one streamed reply into neutral events (without the Finish)."""

    def __init__(self, new_id: Callable[[], str]) -> None:
        self._new_id = new_id
        self.done = False
        self.done_reason = ""
        self.calls = 0

    def feed(self, line: str) -> list[Event]:
        """Events for one line; raises BackendError for an error line."""
        if not line.strip():
            return []
        try:
            chunk = _json.loads(line)
        except ValueError:
            log.debug("ignoring a non-JSON line from Ollama: %.200s", line)
            return []
        failure = error_from_payload(chunk)
        if failure is not None:
            raise failure
        if not isinstance(chunk, dict):
            return []
        out = self._message_events(chunk.get("message"))
        if chunk.get("done"):
            self.done = True
            self.done_reason = str(chunk.get("done_reason") or "")
            out.append(usage_event(chunk))
        return out

    def final_reason(self) -> FinishReason:
        """The reply's finish reason once the stream ended; raises if it was cut off."""
        if not self.done:
            raise BackendError(CLOSED_MID_REPLY, reason="closed the connection", transient=True)
        if self.done_reason == "length":
            return "length"
        return "tool_calls" if self.calls else "stop"

    def _message_events(self, message: Any) -> list[Event]:
        if not isinstance(message, dict):
            return []
        out: list[Event] = []
        thinking = message.get("thinking")
        if isinstance(thinking, str) and thinking:
            out.append(ThoughtDelta(thinking))
        content = message.get("content")
        if isinstance(content, str) and content:
            out.append(TextDelta(content))
        for call in message.get("tool_calls") or []:
            delta = self._call_delta(call)
            if delta is not None:
                out.append(delta)
        return out

    def _call_delta(self, call: Any) -> ToolCallDelta | None:
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not function.get("name"):
            return None
        arguments = function.get("arguments")
        text = arguments if isinstance(arguments, str) else json.dumps(arguments or {})
        call_id = call.get("id") if isinstance(call.get("id"), str) and call.get("id") else None
        delta = ToolCallDelta(self.calls, call_id or self._new_id(), str(function["name"]), text)
        self.calls += 1
        return delta


def usage_event(chunk: dict[str, Any]) -> Usage:
    """The counts of the final object; a missing count is unknown, reported as 0."""
    return Usage(
        prompt_tokens=_count(chunk.get("prompt_eval_count")),
        completion_tokens=_count(chunk.get("eval_count")),
    )


# ----- /api/show ------------------------------------------------------------------------------


def trained_length(show: Any) -> int | None:
    """`model_info["<arch>.context_length"]`: the longest context the model was trained for."""
    info = show.get("model_info") if isinstance(show, dict) else None
    if not isinstance(info, dict):
        return None
    arch = info.get("general.architecture")
    if isinstance(arch, str) and (value := _positive(info.get(f"{arch}.context_length"))):
        return value
    for key, value in info.items():  # an architecture the server did not name
        if key.endswith(".context_length") and (found := _positive(value)):
            return found
    return None


def capabilities(show: Any) -> tuple[str, ...] | None:
    """`capabilities` ("completion", "tools", "vision", "thinking", ...); None when the server
    does not say (Ollama before 0.6.4)."""
    found = show.get("capabilities") if isinstance(show, dict) else None
    if not isinstance(found, list):
        return None
    return tuple(str(item) for item in found)


def reads_images(show: Any) -> bool | None:
    """Whether the model takes image input, as far as `/api/show` tells (None: it does not)."""
    found = capabilities(show)
    return None if found is None else "vision" in found


def planned_num_ctx(show: Any, configured: int | None, default: int) -> int:
    """The `num_ctx` to send: the one configured here, else the Modelfile's, else the trained
    length capped at `default` (see `ollama.py`)."""
    chosen = configured or configured_num_ctx(show)
    if chosen is None:
        trained = trained_length(show)
        chosen = min(trained or default, default)
    return chosen


def configured_num_ctx(show: Any) -> int | None:
    """The `num_ctx` the model's Modelfile sets (the `parameters` text), if any."""
    parameters = show.get("parameters") if isinstance(show, dict) else None
    if not isinstance(parameters, str):
        return None
    match = _NUM_CTX_LINE.search(parameters)
    return _positive(int(match.group(1))) if match else None


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _positive(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value) if value >= 1 and int(value) == value else None
