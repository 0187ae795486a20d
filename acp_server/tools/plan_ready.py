"""plan_ready: in Plan mode, the model asks the user to approve its plan and pick a working
mode to carry it out (Accept edits or Ask), through the same form as ask_user.

The answer changes the session's mode as `session/set_mode` would (the session's switch, which
announces `current_mode_update` and `config_option_update`), so the next edit runs as the new
mode allows. Offered with ask_user (a client that advertised `elicitation.form`), in every mode
so the tool list stays the same through a session; outside Plan mode it says so and asks
nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from acp_server import updates
from acp_server.modes import MODES, Mode
from acp_server.tools.base import Presentation, Tool, ToolContext, ToolFailure, ToolOutcome

NAME = "plan_ready"
FIELD = "mode"
WORKING: tuple[Mode, ...] = ("accept_edits", "ask")  # the modes the user may switch to
STAY = "plan"
NAMES = {mode: name for mode, name, _ in MODES}
DESCRIPTIONS = {mode: text for mode, _, text in MODES}


def approval_form(summary: str) -> dict[str, Any]:
    """The form: carry the plan out in one of the working modes, or stay in Plan mode."""
    options = [
        {"const": mode, "title": NAMES[mode], "description": DESCRIPTIONS[mode]} for mode in WORKING
    ]
    options.append({"const": STAY, "title": "Stay in Plan mode", "description": "Keep planning."})
    field = {"type": "string", "title": "Carry out the plan in", "oneOf": options}
    message = "The agent's plan is ready. Switch to a working mode to carry it out?"
    if summary.strip():
        message += "\n\n" + summary.strip()
    schema = {"type": "object", "properties": {FIELD: field}, "required": [FIELD]}
    return {"mode": "form", "message": message, "requestedSchema": schema}


def plan_ready_tool(mode: Callable[[], Mode], switch: Callable[[Mode], None]) -> Tool:
    """The tool of one session: `mode` reads its mode, `switch` changes it (and announces it)."""

    async def run(args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        current = mode()
        if current != "plan":
            return ToolOutcome(
                f"The session is not in Plan mode (it is in {NAMES[current]} mode): nothing to "
                "approve. Go on with the work."
            )
        if not ctx.client.can_elicit_form:
            raise ToolFailure("The editor cannot show questions; ask in your reply instead.")
        form = approval_form(str(args.get("summary") or ""))
        ctx.emit(updates.tool_call_update(ctx.call_id, status="in_progress"))
        answer = await ctx.client.elicit(form, ctx.call_id)
        content = answer.get("content") if answer.get("action") == "accept" else None
        chosen = content.get(FIELD) if isinstance(content, dict) else None
        if chosen in WORKING and mode() == "plan":
            switch(chosen)
            text = (
                f"The user approved the plan and switched to {NAMES[chosen]} mode "
                f"({DESCRIPTIONS[chosen]}). Carry out the plan now."
            )
        else:
            text = (
                "The user did not approve the plan yet: the session stays in Plan mode. Ask "
                "what they would change, or end your turn and wait."
            )
        shown = f"{form['message']}\n\n{text}"
        return ToolOutcome(text, content=[updates.text_content(shown)], raw_output=answer)

    def present(args: dict[str, Any], ctx: ToolContext) -> Presentation:
        return Presentation("Plan ready: switch to a working mode?")

    return Tool(
        name=NAME,
        description=(
            "In Plan mode, once your plan is ready and shown to the user, ask them to approve "
            "it: they choose a working mode (Accept edits or Ask) to carry it out, or to stay "
            "in Plan mode. When they approve, the mode changes and you go on with the work in "
            "the same turn. Outside Plan mode it does nothing."
        ),
        kind="switch_mode",
        effect="think",
        present=present,
        run=run,
    )
