"""Strict checks of Gemini 3's OpenAI-compatible chat completions: its thought signatures.

Gemini 3 signs its reasoning and puts the signature on the first tool call of each reply
(`tool_calls[0].extra_content.google.thought_signature`). In the current turn (everything after
the last user message) each assistant message that made tool calls must bring it back on its
first call, as issued for the requested model, or the API answers 400 ("Function call is missing
a thought_signature"). Earlier turns are not checked, as the API does not check them (a history
carried over from another model is accepted). `signatures`: signature -> the model it was issued
for. The chat-completions rules themselves are `strict_dialects.openai_problems`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

MISSING = (
    "Function call is missing a thought_signature in functionCall parts. This is required for "
    "tools to work correctly, and missing thought_signature may lead to degraded model "
    "performance. Additional data, function call `{name}` , position {position}."
)


def is_gemini3(model: Any) -> bool:
    return isinstance(model, str) and model.lower().rsplit("/", 1)[-1].startswith("gemini-3")


def signature_of(call: Any) -> Any:
    """The thought signature on a tool call, if any."""
    extra = call.get("extra_content") if isinstance(call, dict) else None
    google = extra.get("google") if isinstance(extra, dict) else None
    return google.get("thought_signature") if isinstance(google, dict) else None


def gemini_problems(body: Mapping[str, Any], signatures: Mapping[str, str]) -> list[str]:
    """What Gemini 3 would refuse in this body for its thought signatures ([]: nothing)."""
    messages = body.get("messages")
    if not is_gemini3(body.get("model")) or not isinstance(messages, list):
        return []
    start = max((n for n, m in enumerate(messages) if _role(m) == "user"), default=-1) + 1
    problems: list[str] = []
    for n, message in enumerate(messages[start:], start):
        calls = message.get("tool_calls") if _role(message) == "assistant" else None
        if not isinstance(calls, list) or not calls:
            continue
        signature = signature_of(calls[0])
        name = (calls[0].get("function") or {}).get("name") if isinstance(calls[0], dict) else None
        if not signature:
            problems.append(MISSING.format(name=name, position=n + 1))
        elif signatures.get(str(signature)) != body.get("model"):
            problems.append(f"messages.{n}.tool_calls.0: Corrupted thought signature.")
    return problems


def _role(message: Any) -> Any:
    return message.get("role") if isinstance(message, dict) else None
