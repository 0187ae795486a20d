"""A chat request of any dialect, read as one neutral conversation: what the strict validator
checks, what a responder reads, and what the window counts.

The three dialects put the same things in different places: OpenAI has `role: "tool"` messages
with `tool_call_id` and `tool_calls[].function.arguments` as JSON text; Anthropic has `tool_use`
blocks in assistant content, `tool_result` blocks in user content and a top-level `system`;
Ollama has `tool_calls[].function.arguments` as an object and `role: "tool"` messages without an
id (matched by position). `conversation(body)` reads any of them.
"""

from __future__ import annotations

import contextlib
import json
import math
from dataclasses import dataclass, field
from typing import Any

CHARS_PER_TOKEN = 3.2  # stricter than the agent's estimate (3.5 over bare text)
IMAGE_TOKENS = 1000  # an image costs this many tokens, whatever its base64 size


@dataclass(frozen=True)
class Call:
    id: str | None
    name: str
    arguments: Any  # the parsed arguments (the raw text when they are not JSON)


@dataclass
class Turn:
    """One message. `answers` is set on a tool result: the call id it answers (None when the
    dialect carries none, as Ollama's)."""

    role: str  # "system" | "user" | "assistant" | "tool"
    text: str = ""
    calls: list[Call] = field(default_factory=list)
    answers: str | None = None


def conversation(body: Any) -> list[Turn]:
    """The request's messages, the system prompt first when there is one."""
    body = body if isinstance(body, dict) else {}
    turns: list[Turn] = []
    system = body.get("system") or body.get("instructions")
    if system:
        turns.append(Turn("system", _text(system)))
    for message in body.get("messages") or []:
        if isinstance(message, dict):
            turns.extend(_turns(message))
    if isinstance(body.get("input"), list):
        turns += _input_turns(body["input"])
    return turns


def _input_turns(items: list[Any]) -> list[Turn]:
    """Responses API input items as turns: consecutive calls and text of the assistant make one
    assistant turn; reasoning items say nothing here."""
    turns: list[Turn] = []
    for item in items:
        kind = item.get("type", "message") if isinstance(item, dict) else None
        if kind == "function_call_output":
            turns.append(Turn("tool", str(item.get("output", "")), answers=item.get("call_id")))
        elif kind == "function_call":
            arguments: Any = item.get("arguments")
            with contextlib.suppress(ValueError, TypeError):
                arguments = json.loads(arguments)
            call = Call(item.get("call_id"), str(item.get("name", "")), arguments)
            if not turns or turns[-1].role != "assistant":
                turns.append(Turn("assistant"))
            turns[-1].calls.append(call)
        elif kind == "message":
            role, text = str(item.get("role", "user")), _text(item.get("content"))
            if role == "assistant" and turns and turns[-1].role == "assistant":
                turns[-1].text += text
            else:
                turns.append(Turn(role, text))
    return turns


def tool_names(body: Any) -> list[str]:
    """The names of the tools offered (any dialect)."""
    tools = body.get("tools") if isinstance(body, dict) else None
    names = []
    for tool in tools or []:
        if isinstance(tool, dict):
            function = tool.get("function")
            spec = function if isinstance(function, dict) else tool
            names.append(str(spec.get("name", "")))
    return names


def tool_problem(turns: list[Turn]) -> str | None:
    """What a strict endpoint rejects: a tool result that answers no pending call, or a call
    left without its result before the next message. None when the history is sound."""
    pending: list[str | None] = []
    for turn in turns:
        if turn.role == "tool":
            if turn.answers in pending:
                pending.remove(turn.answers)
            elif pending and (None in pending or turn.answers is None):
                pending.pop(0)  # a call or a result without an id matches by position
            else:
                return (
                    "Invalid 'messages': a message with role 'tool' must answer a tool call of "
                    f"the preceding assistant message (tool_call_id {turn.answers!r} does not)."
                )
            continue
        if pending:
            return _unanswered(pending)
        pending = [call.id for call in turn.calls]
    return _unanswered(pending) if pending else None


def count_tokens(body: Any) -> int:
    """The request's prompt as this mock counts it: the JSON of its system prompt, messages and
    tools at 3.2 characters a token (more than the agent estimates: real tokenizers disagree
    with any estimate), images at a flat 1,000 tokens each."""
    body = body if isinstance(body, dict) else {}
    keys = ("system", "messages", "tools", "instructions", "input")
    prompt = {key: body[key] for key in keys if key in body}
    images: list[int] = [0]
    chars = len(json.dumps(_without_images(prompt, images), ensure_ascii=False))
    return math.ceil(chars / CHARS_PER_TOKEN) + images[0] * IMAGE_TOKENS


# ----- reading messages -------------------------------------------------------------------------


def _turns(message: dict[str, Any]) -> list[Turn]:
    role = str(message.get("role", "user"))
    content = message.get("content")
    if role == "tool":
        return [Turn("tool", _text(content), answers=message.get("tool_call_id"))]
    blocks = _blocks(content)
    results = [
        Turn("tool", _text(b.get("content")), answers=b.get("tool_use_id"))
        for b in blocks
        if b.get("type") == "tool_result"
    ]
    calls = [
        Call(b.get("id"), str(b.get("name", "")), b.get("input"))
        for b in blocks
        if b.get("type") == "tool_use"
    ]
    calls += [_call(c) for c in message.get("tool_calls") or [] if isinstance(c, dict)]
    text = _text(content)
    rest = [Turn(role, text, calls)] if text or calls or not results else []
    return results + rest


def _call(call: dict[str, Any]) -> Call:
    function = call.get("function")
    function = function if isinstance(function, dict) else {}
    arguments = function.get("arguments")
    if isinstance(arguments, str):
        with contextlib.suppress(ValueError):
            arguments = json.loads(arguments)
    return Call(call.get("id"), str(function.get("name", "")), arguments)


def _blocks(content: Any) -> list[dict[str, Any]]:
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def _text(content: Any) -> str:
    """Plain text of a string or of the text blocks of a list."""
    if isinstance(content, str):
        return content
    kinds = ("text", "input_text", "output_text")
    return "".join(str(b.get("text", "")) for b in _blocks(content) if b.get("type") in kinds)


def _unanswered(pending: list[str | None]) -> str:
    ids = ", ".join(str(i) for i in pending)
    return (
        "Invalid 'messages': an assistant message with 'tool_calls' must be followed by a tool "
        f"message answering each call; these calls have none: {ids}."
    )


def _without_images(value: Any, count: list[int]) -> Any:
    """`value` with every image replaced by a short marker; `count[0]` counts them."""
    if isinstance(value, list):
        return [_without_images(v, count) for v in value]
    if not isinstance(value, dict):
        return value
    out: dict[str, Any] = {}
    for key, item in value.items():
        if key == "images" and isinstance(item, list):  # Ollama: base64 strings
            count[0] += len(item)
            out[key] = ["<image>"] * len(item)
        elif key in ("url", "data") and isinstance(item, str) and _is_image(value, item):
            count[0] += 1
            out[key] = "<image>"
        else:
            out[key] = _without_images(item, count)
    return out


def _is_image(holder: dict[str, Any], text: str) -> bool:
    """An OpenAI data URL, or an Anthropic base64 source."""
    return text.startswith("data:image/") or holder.get("type") == "base64"


SUMMARY_ASK = "<summary-request>"  # how the agent asks for a summary in a conversation's terms


def is_summary(body: Any) -> bool:
    """A compaction's summary request: the conversation with the ask as its last message
    (`context.summary.prefix_request`), or the plain-text transcript offered no tools."""
    if not tool_names(body):
        return True
    turns = conversation(body)
    return bool(turns) and turns[-1].role == "user" and SUMMARY_ASK in turns[-1].text
