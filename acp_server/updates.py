"""Builders for the `update` objects of ACP `session/update` notifications.

Pure functions returning wire dicts, so the agent loop can report what happens without knowing
about connections; the session adds `sessionId` and sends them.
"""

from __future__ import annotations

from typing import Any

Update = dict[str, Any]


def text_block(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def message_chunk(kind: str, text: str, message_id: str | None) -> Update:
    """`kind` is one of user_message_chunk, agent_message_chunk, agent_thought_chunk."""
    update: Update = {"sessionUpdate": kind, "content": text_block(text)}
    if message_id:
        update["messageId"] = message_id
    return update


def usage(used: int, size: int, cost: float | None = None) -> Update:
    """How full the model's context is (editors show it as a meter), and what the session has
    cost so far in US dollars when that is known."""
    update: Update = {"sessionUpdate": "usage_update", "used": max(used, 0), "size": max(size, 1)}
    if cost is not None:
        update["cost"] = {"amount": round(cost, 6), "currency": "USD"}
    return update


def tool_call(
    call_id: str,
    title: str,
    *,
    name: str,
    kind: str = "other",
    raw_input: Any = None,
    locations: list[dict[str, Any]] | None = None,
    status: str = "pending",
) -> Update:
    update: Update = {
        "sessionUpdate": "tool_call",
        "toolCallId": call_id,
        "title": title,
        "name": name,
        "kind": kind,
        "status": status,
    }
    if raw_input is not None:
        update["rawInput"] = raw_input
    if locations:
        update["locations"] = locations
    return update


def tool_call_update(call_id: str, **fields: Any) -> Update:
    """Only the fields that changed; `raw_output` becomes `rawOutput`."""
    return {"sessionUpdate": "tool_call_update", **tool_call_fields(call_id, **fields)}


def tool_call_fields(call_id: str, **fields: Any) -> dict[str, Any]:
    """A ToolCallUpdate object, as `session/request_permission` carries it (no
    `sessionUpdate`: it is not a notification)."""
    update: dict[str, Any] = {"toolCallId": call_id}
    for key, value in fields.items():
        if value is not None:
            update[_camel(key)] = value
    return update


def text_content(text: str) -> dict[str, Any]:
    return {"type": "content", "content": text_block(text)}


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(word.title() for word in rest)
