"""The Anthropic Messages API's checks of a request body (see tests/support/strict_dialects.py)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from tests.support.strict_common import IMAGE_TYPES, TOOL_NAME, check_tools, is_base64

ANTHROPIC_ID = re.compile(r"[a-zA-Z0-9_-]+")
THINKING = ("thinking", "redacted_thinking")


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
    if _usescheck_tools(messages) and "tools" not in body:
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
        check_tools(body["tools"], problems, "top")
    return problems + _cache_marks(body)


def _cache_marks(body: Mapping[str, Any]) -> list[str]:
    """The API's rules for `cache_control`: at most 4 blocks carry one, each
    `{"type": "ephemeral"}` with a `ttl` of "5m" or "1h" at most."""
    system = body.get("system")
    blocks = [*(body.get("tools") or []), *(system if isinstance(system, list) else [])]
    for message in body.get("messages") or []:
        content = message.get("content") if isinstance(message, dict) else None
        blocks += content if isinstance(content, list) else []
    marks = [b["cache_control"] for b in blocks if isinstance(b, dict) and "cache_control" in b]
    problems = [
        f"cache_control: {mark!r} is not {{'type': 'ephemeral'}} with a ttl of 5m or 1h"
        for mark in marks
        if not isinstance(mark, dict)
        or mark.get("type") != "ephemeral"
        or mark.get("ttl", "5m") not in ("5m", "1h")
        or set(mark) - {"type", "ttl"}
    ]
    if len(marks) > 4:
        problems.append(
            f"A maximum of 4 blocks with cache_control may be provided. Found {len(marks)}."
        )
    return problems


def _usescheck_tools(messages: list[Any]) -> bool:
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
        and is_base64(source.get("data"))
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
