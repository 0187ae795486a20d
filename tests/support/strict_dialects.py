"""Strict checks of a rendered request body, the way each vendor's API checks it.

Pure functions from a request body (as it would be POSTed) to a list of problems, each worded
like the API's own 400 answer; [] means the API would accept the request. They are meant for
the mock LLM servers and for property tests of history carry-over, so they are stricter than
the loosest real servers and never looser than the strict ones:

- OpenAI chat completions: every `tool` message answers a call of the assistant message right
  before it (only other tool messages in between), every call is answered before the next
  message, arguments are JSON object text, names and ids have the documented shapes.
- Anthropic Messages: only user/assistant roles, starting with user and alternating; every
  `tool_result` answers a `tool_use` of the previous message and every `tool_use` is answered by
  the next message, results first in their message; thinking blocks only in assistant messages
  and only with a signature made by the requested model (`signatures` maps each signature the
  server issued to the model that made it); with thinking enabled, a tool-using turn in progress
  must start with its thinking; no empty text blocks.
- Ollama `/api/chat`: string `content`, `images` as bare base64, tool calls with object
  arguments, tool results following a call of that name.

The Anthropic checks live in strict_anthropic.py and the shared rules in strict_common.py; all
three entry points are imported from here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from tests.support.strict_anthropic import anthropic_problems
from tests.support.strict_common import (
    IMAGE_TYPES,
    TOOL_NAME,
    check_tools,
    is_base64,
    is_object_text,
)

__all__ = ["TOOL_NAME", "anthropic_problems", "ollama_problems", "openai_problems"]

OPENAI_MAX_ID = 40
DATA_URL = re.compile(r"data:(image/[a-z]+);base64,(.*)", re.DOTALL)
OLLAMA_THINK = (True, False, "low", "medium", "high")


# ----- OpenAI chat completions ------------------------------------------------------------------


def openai_problems(body: Mapping[str, Any]) -> list[str]:
    """What a strict OpenAI-compatible endpoint would reject in this chat-completions body."""
    problems: list[str] = []
    if not isinstance(body.get("model"), str) or not body["model"]:
        problems.append("model: required")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return [*problems, "messages: must be a non-empty list"]
    if "tools" in body:
        check_tools(body["tools"], problems, "function")
    elif "tool_choice" in body:
        problems.append("tool_choice: only allowed when tools are specified")
    if "stream_options" in body and body.get("stream") is not True:
        problems.append("stream_options: only allowed when stream is true")
    pending: set[str] = set()
    for n, message in enumerate(messages):
        problems += _openai_message(n, message, pending)
    if pending:
        problems.append(f"tool_call_ids {sorted(pending)} did not have response messages")
    return problems


def _openai_message(n: int, message: Any, pending: set[str]) -> list[str]:
    """Problems of messages[n]; `pending` holds the call ids still waiting for an answer."""
    where = f"messages.{n}"
    if not isinstance(message, dict):
        return [f"{where}: must be an object"]
    role = message.get("role")
    if role == "tool":
        call_id = message.get("tool_call_id")
        if call_id not in pending:
            return [
                f"{where}: messages with role 'tool' must be a response to a preceding message "
                f"with 'tool_calls' (tool_call_id {call_id!r})"
            ]
        pending.discard(call_id)
        return _openai_text(where, message.get("content"))
    problems: list[str] = []
    if pending:
        problems.append(
            f"{where}: an assistant message with 'tool_calls' must be followed by tool messages "
            f"responding to each 'tool_call_id' (missing {sorted(pending)})"
        )
        pending.clear()
    if role == "assistant":
        return problems + _openai_assistant(where, message, pending)
    if role in ("system", "developer"):
        return problems + _openai_text(where, message.get("content"))
    if role == "user":
        return problems + _openai_user(where, message.get("content"))
    return [*problems, f"{where}.role: unknown role {role!r}"]


def _openai_text(where: str, content: Any) -> list[str]:
    if isinstance(content, str):
        return []
    if isinstance(content, list) and all(
        isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str)
        for p in content
    ):
        return []
    return [f"{where}.content: must be a string or a list of text parts"]


def _openai_user(where: str, content: Any) -> list[str]:
    if isinstance(content, str):
        return []
    if not isinstance(content, list) or not content:
        return [f"{where}.content: must be a string or a non-empty list of parts"]
    problems: list[str] = []
    for k, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text" and isinstance(part.get("text"), str):
            continue
        url = (part.get("image_url") or {}).get("url") if kind == "image_url" else None
        match = DATA_URL.fullmatch(url) if isinstance(url, str) else None
        if match is None or match.group(1) not in IMAGE_TYPES or not is_base64(match.group(2)):
            problems.append(f"{where}.content.{k}: not a text part or a readable image")
    return problems


def _openai_assistant(where: str, message: dict[str, Any], pending: set[str]) -> list[str]:
    calls = message.get("tool_calls")
    content = message.get("content")
    problems: list[str] = []
    if content is None and not calls:
        problems.append(f"{where}.content: required unless tool_calls is set")
    elif content is not None:
        problems += _openai_text(where, content)
    if calls is None:
        return problems
    if not isinstance(calls, list) or not calls:
        return [*problems, f"{where}.tool_calls: must be a non-empty list"]
    for k, call in enumerate(calls):
        problems += _openai_call(f"{where}.tool_calls.{k}", call, pending)
    return problems


def _openai_call(where: str, call: Any, pending: set[str]) -> list[str]:
    if not isinstance(call, dict) or call.get("type") != "function":
        return [f"{where}: must be a function call"]
    call_id, function = call.get("id"), call.get("function") or {}
    problems: list[str] = []
    if not isinstance(call_id, str) or not call_id or len(call_id) > OPENAI_MAX_ID:
        problems.append(f"{where}.id: must be a string of 1 to {OPENAI_MAX_ID} characters")
    elif call_id in pending:
        problems.append(f"{where}.id: duplicate tool call id {call_id!r}")
    else:
        pending.add(call_id)
    if not TOOL_NAME.fullmatch(str(function.get("name", ""))):
        problems.append(f"{where}.function.name: must match ^[a-zA-Z0-9_-]{{1,64}}$")
    if not is_object_text(function.get("arguments")):
        problems.append(f"{where}.function.arguments: must be JSON object text")
    return problems


# ----- Ollama /api/chat ---------------------------------------------------------------------------


def ollama_problems(body: Mapping[str, Any]) -> list[str]:
    """What Ollama's native `/api/chat` would reject (or silently misread) in this body."""
    problems: list[str] = []
    if not isinstance(body.get("model"), str) or not body["model"]:
        problems.append("model: required")
    messages = body.get("messages")
    if not isinstance(messages, list):
        return [*problems, "messages: must be a list"]
    if "tools" in body:
        check_tools(body["tools"], problems, "function")
    if "think" in body and body["think"] not in OLLAMA_THINK:
        problems.append(
            f"think: must be true, false, 'low', 'medium' or 'high' ({body['think']!r})"
        )
    options = body.get("options", {})
    if not isinstance(options, dict) or not all(
        isinstance(v, int) and v > 0 for k, v in options.items() if k in ("num_ctx", "num_predict")
    ):
        problems.append("options: num_ctx and num_predict must be positive integers")
    names: list[str] = []  # the tool names of the calls still waiting for their results
    for n, message in enumerate(messages):
        problems += _ollama_message(f"messages.{n}", message, names)
    return problems


def _ollama_message(where: str, message: Any, names: list[str]) -> list[str]:
    if not isinstance(message, dict):
        return [f"{where}: must be an object"]
    role = message.get("role")
    problems: list[str] = []
    if role not in ("system", "user", "assistant", "tool"):
        problems.append(f"{where}.role: unknown role {role!r}")
    if not isinstance(message.get("content"), str):
        problems.append(f"{where}.content: must be a string")
    images = message.get("images", [])
    if not isinstance(images, list) or not all(is_base64(i) for i in images):
        problems.append(f"{where}.images: must be a list of bare base64 strings")
    if role == "tool":
        name = message.get("tool_name")
        if name not in names:
            problems.append(f"{where}: a tool result for {name!r}, which no pending call made")
        else:
            names.remove(name)
        return problems
    names.clear()
    for k, call in enumerate(message.get("tool_calls") or []):
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not TOOL_NAME.fullmatch(str(function.get("name"))):
            problems.append(f"{where}.tool_calls.{k}.function.name: missing or malformed")
            continue
        if not isinstance(function.get("arguments"), dict):
            problems.append(f"{where}.tool_calls.{k}.function.arguments: must be an object")
        names.append(str(function["name"]))
    if message.get("tool_calls") and role != "assistant":
        problems.append(f"{where}: only assistant messages make tool calls")
    return problems
