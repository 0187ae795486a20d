"""Builders for the `update` objects of ACP `session/update` notifications.

Pure functions returning wire dicts, so the agent loop can report what happens without knowing
about connections; the session adds `sessionId` and sends them.
"""

from __future__ import annotations

import re
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


# ----- plans ----------------------------------------------------------------------------------
# A session has one plan, the model's. The plan tool emits the legacy `plan` update (a list of
# entries) or, for a Markdown plan, a `plan_update`; a cleared plan is a `plan_removed`. What is
# stored is what the tool emitted; `plan_view` turns it into what this client understands, live
# and on replay alike: `plan_update`/`plan_removed` for a client that opted in to plan operations
# (`clientCapabilities.plan`), and for the others the legacy `plan`, which ACP then requires.

PLAN_ID = "plan"
_CHECKBOX = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+\[( |x|X|~|-)\]\s+(.+?)\s*$")
_STATUS = {
    " ": "pending",
    "x": "completed",
    "X": "completed",
    "~": "in_progress",
    "-": "in_progress",
}


def plan_markdown(content: str, path: str | None = None) -> Update:
    """A `plan_update` holding a Markdown plan (`path`: the absolute path of its file)."""
    plan: dict[str, Any] = {"type": "markdown", "planId": PLAN_ID, "content": content}
    if path is not None:
        plan["path"] = path
    return {"sessionUpdate": "plan_update", "plan": plan}


def plan_removed() -> Update:
    return {"sessionUpdate": "plan_removed", "planId": PLAN_ID}


def is_plan(update: Update) -> bool:
    return update.get("sessionUpdate") in ("plan", "plan_update", "plan_removed")


def plan_view(update: Update, plan_operations: bool) -> Update:
    """`update` as a client with (or without) plan operations is shown it."""
    kind = update.get("sessionUpdate")
    if plan_operations and kind == "plan":
        items = {"type": "items", "planId": PLAN_ID, "entries": update.get("entries") or []}
        return {"sessionUpdate": "plan_update", "plan": items}
    if plan_operations or kind not in ("plan_update", "plan_removed"):
        return update
    plan = update.get("plan") if kind == "plan_update" else None
    if not isinstance(plan, dict):
        return {"sessionUpdate": "plan", "entries": []}  # removed: an empty plan clears it
    if plan.get("type") == "items":
        return {"sessionUpdate": "plan", "entries": plan.get("entries") or []}
    return {"sessionUpdate": "plan", "entries": markdown_entries(str(plan.get("content", "")))}


def markdown_entries(content: str) -> list[dict[str, Any]]:
    """A Markdown plan as legacy entries: its checklist items (`- [ ]`, `- [x]`, `- [~]`), or
    else the whole text as one pending entry, so a client without plan operations still
    shows something."""
    entries = []
    for line in content.splitlines():
        found = _CHECKBOX.match(line)
        if found:
            status = _STATUS[found.group(1)]
            entries.append({"content": found.group(2), "priority": "medium", "status": status})
    if entries or not content.strip():
        return entries
    return [{"content": content.strip(), "priority": "medium", "status": "pending"}]
