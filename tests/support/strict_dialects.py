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
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Mapping
from typing import Any

TOOL_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")
ANTHROPIC_ID = re.compile(r"[a-zA-Z0-9_-]+")
OPENAI_MAX_ID = 40
IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
DATA_URL = re.compile(r"data:(image/[a-z]+);base64,(.*)", re.DOTALL)
THINKING = ("thinking", "redacted_thinking")
OLLAMA_THINK = (True, False, "low", "medium", "high")


def _is_base64(text: Any) -> bool:
    if not isinstance(text, str) or not text:
        return False
    try:
        base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


def _is_object_text(text: Any) -> bool:
    try:
        return isinstance(text, str) and isinstance(json.loads(text), dict)
    except ValueError:
        return False


def _tools(tools: Any, problems: list[str], name_of: str) -> None:
    """Each offered tool has a valid name (`name_of`: where the name sits)."""
    if not isinstance(tools, list) or not tools:
        problems.append("tools: must be a non-empty list when present")
        return
    for n, tool in enumerate(tools):
        spec = tool.get("function") if name_of == "function" and isinstance(tool, dict) else tool
        if not isinstance(spec, dict) or not TOOL_NAME.fullmatch(str(spec.get("name", ""))):
            problems.append(f"tools.{n}: name must match ^[a-zA-Z0-9_-]{{1,64}}$")


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
        _tools(body["tools"], problems, "function")
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
        if match is None or match.group(1) not in IMAGE_TYPES or not _is_base64(match.group(2)):
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
    if not _is_object_text(function.get("arguments")):
        problems.append(f"{where}.function.arguments: must be JSON object text")
    return problems


# ----- Anthropic Messages -------------------------------------------------------------------------


def anthropic_problems(
    body: Mapping[str, Any], signatures: Mapping[str, str] | None = None
) -> list[str]:
    """What the Anthropic Messages API would reject in this body. `signatures`: each thinking
    signature the server issued, mapped to the model that made it."""
    problems = _anthropic_top(body)
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return [*problems, "messages: must be a non-empty list"]
    first = messages[0] if isinstance(messages[0], dict) else {}
    if first.get("role") != "user":
        problems.append("messages: first message must use the 'user' role")
    model = str(body.get("model"))
    seen_ids: set[str] = set()
    previous: dict[str, Any] = {}
    for n, message in enumerate(messages):
        problems += _anthropic_message(n, message, previous, model, signatures or {}, seen_ids)
        previous = message if isinstance(message, dict) else {}
    if previous.get("role") == "assistant" and _blocks_of(previous, "tool_use"):
        problems.append("messages: the last assistant message has tool_use blocks nobody answered")
    if _uses_tools(messages) and "tools" not in body:
        problems.append("tools: requests with tool_use or tool_result blocks must define tools")
    if "thinking" in body:
        problems += _anthropic_thinking(body, messages)
    return problems


def _anthropic_top(body: Mapping[str, Any]) -> list[str]:
    problems: list[str] = []
    if not isinstance(body.get("model"), str) or not body["model"]:
        problems.append("model: required")
    max_tokens = body.get("max_tokens")
    if not isinstance(max_tokens, int) or max_tokens < 1:
        problems.append("max_tokens: required, a positive integer")
    if "system" in body and not isinstance(body["system"], str | list):
        problems.append("system: must be a string or a list of text blocks")
    if "tools" in body:
        _tools(body["tools"], problems, "top")
    return problems


def _uses_tools(messages: list[Any]) -> bool:
    return any(
        isinstance(block, dict) and block.get("type") in ("tool_use", "tool_result")
        for message in messages
        if isinstance(message, dict) and isinstance(message.get("content"), list)
        for block in message["content"]
    )


def _anthropic_message(
    n: int,
    message: Any,
    previous: dict[str, Any],
    model: str,
    signatures: Mapping[str, str],
    seen_ids: set[str],
) -> list[str]:
    where = f"messages.{n}"
    role = message.get("role") if isinstance(message, dict) else None
    if role not in ("user", "assistant"):
        return [f"{where}.role: must be 'user' or 'assistant' (got {role!r})"]
    problems: list[str] = []
    if previous.get("role") == role:
        problems.append(f"{where}: roles must alternate between 'user' and 'assistant'")
    blocks = message.get("content")
    if isinstance(blocks, str):
        return problems + ([] if blocks.strip() else [f"{where}.content: text must be non-empty"])
    if not isinstance(blocks, list) or not blocks:
        return [*problems, f"{where}.content: must be a non-empty list"]
    problems += _anthropic_pairing(where, role, blocks, previous)
    for k, block in enumerate(blocks):
        problems += _anthropic_block(f"{where}.content.{k}", role, block, model, signatures)
        if isinstance(block, dict) and block.get("type") == "tool_use":
            if block.get("id") in seen_ids:
                problems.append(f"{where}.content.{k}: tool_use ids must be unique")
            seen_ids.add(str(block.get("id")))
    return problems


def _blocks_of(message: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    content = message.get("content")
    if not isinstance(content, list):
        return []
    return [b for b in content if isinstance(b, dict) and b.get("type") == kind]


def _anthropic_pairing(
    where: str, role: str, blocks: list[Any], previous: dict[str, Any]
) -> list[str]:
    """tool_result blocks answer the previous message's tool_use blocks, all of them, first."""
    asked = [b.get("id") for b in _blocks_of(previous, "tool_use")]
    if role != "user":
        return (
            [f"{where}: tool_use ids {asked} were found without tool_result blocks"]
            if asked
            else []
        )
    kinds = [b.get("type") if isinstance(b, dict) else None for b in blocks]
    results = kinds.count("tool_result")
    answered = [
        b.get("tool_use_id")
        for b in blocks
        if isinstance(b, dict) and b.get("type") == "tool_result"
    ]
    problems: list[str] = []
    if kinds[:results] != ["tool_result"] * results:
        problems.append(f"{where}: tool_result blocks must come first in the message")
    unknown = [i for i in answered if i not in asked]
    if unknown:
        problems.append(
            f"{where}: unexpected tool_use_id {unknown} in tool_result blocks: each must have "
            "a corresponding tool_use block in the previous message"
        )
    missing = [i for i in asked if i not in answered]
    if missing:
        problems.append(f"{where}: tool_use ids {missing} were found without tool_result blocks")
    return problems


def _anthropic_block(
    where: str, role: str, block: Any, model: str, signatures: Mapping[str, str]
) -> list[str]:
    kind = block.get("type") if isinstance(block, dict) else None
    allowed = {
        "user": ("text", "image", "tool_result"),
        "assistant": ("text", "tool_use", *THINKING),
    }[role]
    if kind not in allowed:
        return [f"{where}: a {kind!r} block is not allowed in a {role} message"]
    assert isinstance(block, dict)
    if kind == "text":
        ok = isinstance(block.get("text"), str) and block["text"].strip()
        return [] if ok else [f"{where}: text content blocks must contain non-whitespace text"]
    if kind == "image":
        return _anthropic_image(where, block)
    if kind == "tool_use":
        return _anthropic_tool_use(where, block)
    if kind == "tool_result":
        return _anthropic_tool_result(where, block)
    if kind == "thinking" and signatures.get(str(block.get("signature"))) != model:
        return [f"{where}: Invalid `signature` in `thinking` block"]
    if kind == "redacted_thinking" and not isinstance(block.get("data"), str):
        return [f"{where}: redacted_thinking needs its data"]
    return []


def _anthropic_image(where: str, block: dict[str, Any]) -> list[str]:
    source = block.get("source") or {}
    ok = (
        source.get("type") == "base64"
        and source.get("media_type") in IMAGE_TYPES
        and _is_base64(source.get("data"))
    )
    return [] if ok else [f"{where}.source: not a readable base64 image"]


def _anthropic_tool_use(where: str, block: dict[str, Any]) -> list[str]:
    problems: list[str] = []
    if not ANTHROPIC_ID.fullmatch(str(block.get("id", ""))):
        problems.append(f"{where}.id: String should match pattern '^[a-zA-Z0-9_-]+$'")
    if not TOOL_NAME.fullmatch(str(block.get("name", ""))):
        problems.append(f"{where}.name: must match ^[a-zA-Z0-9_-]{{1,64}}$")
    if not isinstance(block.get("input"), dict):
        problems.append(f"{where}.input: must be an object")
    return problems


def _anthropic_tool_result(where: str, block: dict[str, Any]) -> list[str]:
    problems: list[str] = []
    if not ANTHROPIC_ID.fullmatch(str(block.get("tool_use_id", ""))):
        problems.append(f"{where}.tool_use_id: String should match pattern '^[a-zA-Z0-9_-]+$'")
    content = block.get("content")
    if isinstance(content, list):
        for k, inner in enumerate(content):
            problems += _anthropic_block(f"{where}.content.{k}", "user", inner, "", {})
            if isinstance(inner, dict) and inner.get("type") == "tool_result":
                problems.append(f"{where}.content.{k}: a tool_result cannot nest")
    elif content is not None and not isinstance(content, str):
        problems.append(f"{where}.content: must be a string or a list of blocks")
    return problems


def _anthropic_thinking(body: Mapping[str, Any], messages: list[Any]) -> list[str]:
    thinking = body["thinking"]
    kind = thinking.get("type") if isinstance(thinking, dict) else None
    problems: list[str] = []
    if kind == "enabled":
        budget = thinking.get("budget_tokens")
        if not isinstance(budget, int) or budget < 1024:
            problems.append("thinking.budget_tokens: must be at least 1024")
        elif not isinstance(body.get("max_tokens"), int) or body["max_tokens"] <= budget:
            problems.append("max_tokens: must be greater than thinking.budget_tokens")
    elif kind not in ("adaptive", "disabled"):
        return [f"thinking.type: must be 'enabled', 'adaptive' or 'disabled' (got {kind!r})"]
    last = messages[-1] if isinstance(messages[-1], dict) else {}
    before = messages[-2] if len(messages) > 1 and isinstance(messages[-2], dict) else {}
    if kind != "disabled" and _blocks_of(last, "tool_result") and _blocks_of(before, "tool_use"):
        first = before["content"][0]
        if not isinstance(first, dict) or first.get("type") not in THINKING:
            problems.append(
                f"messages.{len(messages) - 2}.content.0.type: Expected `thinking` or "
                "`redacted_thinking`, but found "
                f"`{first.get('type') if isinstance(first, dict) else first}`. When `thinking` "
                "is enabled, a final `assistant` message must start with a thinking block"
            )
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
        _tools(body["tools"], problems, "function")
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
    if not isinstance(images, list) or not all(_is_base64(i) for i in images):
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
