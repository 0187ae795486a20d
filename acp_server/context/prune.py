"""Compaction stage (a): prune old tool outputs. No model round, nothing else changes.

Tool outputs are what fills a coding session's context: a file read twenty rounds ago is rarely
needed verbatim again. The outputs of the last two exchanges (an exchange starts at a user
message; or from `protect_from`, when compaction needs to prune closer in) stay whole, and so
do the newest other outputs while `keep_tokens` last; every older one is replaced by a one-line
note that says what it was, so the model can run the tool again.
The structure is untouched: each call keeps exactly one result.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from acp_server.context.tokens import Estimator
from acp_server.messages import Message, ToolCall, is_note, text_message

KEEP_EXCHANGES = 2
NOTE_ARGS_CHARS = 160
PRUNED_PREFIX = "[Output removed to save room in the context window:"


def pruned_note(call: ToolCall | None, output: str) -> str:
    """The one line that replaces a pruned output."""
    what = "this tool call" if call is None else f"{call.name}({_short_args(call.arguments)})"
    lines = output.count("\n") + 1
    return (
        f"{PRUNED_PREFIX} {what} returned {len(output):,} characters ({lines:,} lines). "
        "Run it again if you need the output.]"
    )


def prune_tool_outputs(
    history: Sequence[Message],
    estimator: Estimator,
    keep_tokens: int,
    keep_exchanges: int = KEEP_EXCHANGES,
    protect_from: int | None = None,
) -> list[Message]:
    """A new history with old tool outputs replaced by notes (the input is not changed)."""
    out = list(history)
    protected = exchange_start(out, keep_exchanges) if protect_from is None else protect_from
    calls = _calls_by_result(out)
    kept = 0
    for index in range(protected - 1, -1, -1):
        message = out[index]
        if message.role != "tool" or message.text.startswith(PRUNED_PREFIX):
            continue
        tokens = estimator.message(message)[0]
        if kept + tokens <= keep_tokens:
            kept += tokens
            continue
        note = pruned_note(calls.get(index), message.text)
        if len(note) < len(message.text):
            out[index] = text_message("tool", note, tool_call_id=message.tool_call_id)
    return out


def exchange_start(history: Sequence[Message], exchanges: int) -> int:
    """Index of the user message that starts the `exchanges`-th last exchange (0 if fewer)."""
    seen = 0
    for index in range(len(history) - 1, -1, -1):
        if history[index].role == "user" and not is_note(history[index]):
            seen += 1
            if seen >= exchanges:
                return index
    return 0


def _calls_by_result(history: list[Message]) -> dict[int, ToolCall]:
    """The call each tool result answers, matched by position (ids may repeat across turns)."""
    found: dict[int, ToolCall] = {}
    pending: dict[str, ToolCall] = {}
    for index, message in enumerate(history):
        if message.role != "tool":
            pending = {call.id: call for call in message.tool_calls}
        elif message.tool_call_id in pending:
            found[index] = pending.pop(message.tool_call_id)
    return found


def _short_args(arguments: dict[str, Any]) -> str:
    text = json.dumps(arguments, ensure_ascii=False)
    return text if len(text) <= NOTE_ARGS_CHARS else text[: NOTE_ARGS_CHARS - 1] + "…"
