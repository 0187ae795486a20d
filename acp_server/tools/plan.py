"""update_plan: the model's task list, shown by the editor as the session's plan.

An ACP plan update carries the complete plan and the client replaces what it shows, so the
tool takes the complete plan too: a checklist of entries, each restated with its current
status, or a Markdown plan (inline, or a file in the project the model wrote). Entries go out
as the legacy `plan` update, a Markdown plan as a `plan_update`; the session shows each client
the form it understands (`updates.plan_view`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from acp_server import updates
from acp_server.confine import secrets
from acp_server.tools.base import Presentation, Tool, ToolContext, ToolFailure, ToolOutcome

DEFAULT_PRIORITY = "medium"
MARKDOWN_CHARS = 20_000  # a plan file larger than this is not a plan to show in a panel


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
    given: list[str] = [key for key in ("entries", "markdown", "file") if key in args]
    if len(given) != 1:
        raise ToolFailure(
            "Give the plan one way: `entries` (a checklist), `markdown` (the plan as text) or "
            f"`file` (a Markdown file in the project); this call gave {_named(given)}."
        )
    if "entries" in args:
        return _entries(args["entries"], ctx)
    if "markdown" in args:
        ctx.emit(updates.plan_markdown(args["markdown"]))
        return ToolOutcome(_markdown_note(args["markdown"]))
    return await _file(args["file"], ctx)


def _entries(items: list[dict[str, Any]], ctx: ToolContext) -> ToolOutcome:
    entries = [_entry(item) for item in items]
    ctx.emit({"sessionUpdate": "plan", "entries": entries})
    done = sum(1 for entry in entries if entry["status"] == "completed")
    noun = "entry" if len(entries) == 1 else "entries"
    return ToolOutcome(f"Plan updated: {len(entries)} {noun} ({done} completed).")


async def _file(name: str, ctx: ToolContext) -> ToolOutcome:
    """The plan from a file: one inside the project (where every link on its way leads too)
    and out of the secret places, read as it was checked. It never asks, so anything else is
    refused."""
    target = ctx.target(name)
    roots = [Path(os.path.realpath(root)) for root in ctx.roots]
    if not any(target.real == root or root in target.real.parents for root in roots):
        raise ToolFailure(f"The plan file {name} is outside the project; write it inside.")
    if secrets.is_secret(target.real):
        raise ToolFailure(
            f"The plan file {name} leads to {target.real}, where keys and credentials are kept; "
            "it is not read. Write the plan in a file of the project."
        )
    content = await ctx.read_text(target)
    if len(content) > MARKDOWN_CHARS:
        raise ToolFailure(
            f"The plan file {name} has {len(content):,} characters; a plan to show the user "
            f"must stay under {MARKDOWN_CHARS:,}."
        )
    ctx.emit(updates.plan_markdown(content, str(target.shown)))
    return ToolOutcome(_markdown_note(content) + f" The user can open it: {name}.")


def _markdown_note(content: str) -> str:
    steps = len(updates.markdown_entries(content))
    return f"Plan updated from Markdown ({steps} checklist item{'s' if steps != 1 else ''})."


def _named(keys: list[str]) -> str:
    return " and ".join(f"`{key}`" for key in keys) if keys else "none of them"


UPDATE_PLAN = Tool(
    name="update_plan",
    description=(
        "Show the user your plan for the task as a checklist. Send the complete list every "
        "time (it replaces the previous one), in order, each entry with its current status: "
        "mark an entry in_progress when you start it and completed when it is done. Use it for "
        "work with several steps; skip it for a single quick action. A plan you keep as a "
        "Markdown file in the project can be shown with `file` instead of `entries`."
    ),
    kind="think",
    effect="think",
    present=_present,
    run=_update_plan,
)
