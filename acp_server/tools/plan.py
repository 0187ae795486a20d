"""update_plan: the model's task list, shown by the editor as the session's plan.

An ACP plan update carries the complete list and the client replaces what it shows, so the
tool takes the complete list too: the model restates every entry with its current status.
"""

from __future__ import annotations

from typing import Any

from acp_server.tools.base import Presentation, Tool, ToolContext, ToolOutcome

DEFAULT_PRIORITY = "medium"


def _present(args: dict[str, Any], ctx: ToolContext) -> Presentation:
    return Presentation("Update plan")


def _entry(item: dict[str, Any]) -> dict[str, Any]:
    """A wire `PlanEntry`: all three fields present, priority defaulted."""
    return {
        "content": item["content"],
        "priority": item.get("priority") or DEFAULT_PRIORITY,
        "status": item["status"],
    }


async def _update_plan(args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
    entries = [_entry(item) for item in args["entries"]]
    ctx.emit({"sessionUpdate": "plan", "entries": entries})
    done = sum(1 for entry in entries if entry["status"] == "completed")
    noun = "entry" if len(entries) == 1 else "entries"
    return ToolOutcome(f"Plan updated: {len(entries)} {noun} ({done} completed).")


UPDATE_PLAN = Tool(
    name="update_plan",
    description=(
        "Show the user your plan for the task as a checklist. Send the complete list every "
        "time (it replaces the previous one), in order, each entry with its current status: "
        "mark an entry in_progress when you start it and completed when it is done. Use it for "
        "work with several steps; skip it for a single quick action."
    ),
    kind="think",
    effect="think",
    present=_present,
    run=_update_plan,
)
