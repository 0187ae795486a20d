"""ask_user: the model asks the user one question, through the editor's form
(ACP `elicitation/create`, form mode), and gets the answer as the call's result.

Offered only to a client that advertised `elicitation.form` (`turn_parts`). The question is
a flat form ACP's restricted JSON Schema allows: one `answer` field, a single choice (a
string with `oneOf`), several (an `array` of an `enum`) or free text, and with choices an
optional `other` field for an answer of the user's own. `decline` and `cancel` are results
too: the model is told the user chose not to answer. A cancel of the turn while the form is
open withdraws it (`$/cancel_request`) and the turn ends `cancelled`. What the user was asked
and answered is the call's content, so a loaded session shows it as it was.
"""

from __future__ import annotations

from typing import Any

from acp_server import updates
from acp_server.tools.base import Presentation, Tool, ToolContext, ToolFailure, ToolOutcome

NAME = "ask_user"
ANSWER = "answer"
OTHER = "other"
NOT_ANSWERED = (
    "The user chose not to answer ({how}). Do not ask the same question again; go on with "
    "what you know and say what you assumed, or end your turn if you cannot go on without it."
)


def question_form(args: dict[str, Any]) -> dict[str, Any]:
    """The form mode's fields (`mode`, `message`, `requestedSchema`) for the model's call."""
    question = " ".join(str(args["question"]).split())
    choices: list[str] = list(args.get("choices") or [])
    properties: dict[str, Any] = {}
    required: list[str] = []
    if not choices:
        properties[ANSWER] = {"type": "string", "title": "Your answer"}
        required.append(ANSWER)
    elif args.get("multiple"):
        items = {"type": "string", "enum": choices}
        properties[ANSWER] = {"type": "array", "title": "Choose any", "items": items}
    else:
        options = [{"const": choice, "title": choice} for choice in choices]
        properties[ANSWER] = {"type": "string", "title": "Choose one", "oneOf": options}
    if choices and args.get("free_text"):
        properties[OTHER] = {"type": "string", "title": "Or answer in your own words"}
    elif choices and not args.get("multiple"):
        required.append(ANSWER)
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return {"mode": "form", "message": question, "requestedSchema": schema}


def answer_text(answer: dict[str, Any]) -> str:
    """The answer in words for the model."""
    action = answer.get("action")
    if action != "accept":
        how = "they cancelled the question" if action == "cancel" else "they declined it"
        return NOT_ANSWERED.format(how=how)
    content = answer.get("content")
    content = content if isinstance(content, dict) else {}
    parts: list[str] = []
    chosen = content.get(ANSWER)
    if isinstance(chosen, list):
        chosen = ", ".join(str(item) for item in chosen) or "(none of the choices)"
    if chosen not in (None, ""):
        parts.append(str(chosen))
    other = content.get(OTHER)
    if isinstance(other, str) and other.strip():
        parts.append(other.strip() if not parts else f"(and in their own words) {other.strip()}")
    if not parts:
        return "The user accepted the question without giving an answer."
    return "The user answered: " + " ".join(parts)


def _present(args: dict[str, Any], ctx: ToolContext) -> Presentation:
    return Presentation(f"Question: {' '.join(str(args.get('question') or '').split())}")


async def _ask(args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
    if not ctx.client.can_elicit_form:
        raise ToolFailure("The editor cannot show questions; ask in your reply instead.")
    form = question_form(args)
    ctx.emit(updates.tool_call_update(ctx.call_id, status="in_progress"))
    answer = await ctx.client.elicit(form, ctx.call_id)
    text = answer_text(answer)
    shown = f"{form['message']}\n\n{text}"
    return ToolOutcome(text, content=[updates.text_content(shown)], raw_output=answer)


ASK_USER = Tool(
    name=NAME,
    description=(
        "Ask the user one question and wait for the answer, shown as a form in their editor: "
        "give `choices` when the answer is one (or, with `multiple`, several) of a few options, "
        "or none for a free-text answer. Use it when you cannot go on well without a decision "
        "only the user can make (which of two approaches, a name, a missing requirement); do "
        "not ask what you can find out yourself, and never ask for passwords or keys. The user "
        "may decline to answer."
    ),
    kind="other",
    effect="think",
    present=_present,
    run=_ask,
)
