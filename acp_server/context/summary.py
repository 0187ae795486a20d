"""Compaction stage (b): the summary request, as the conversation's next request or built
from a plain-text transcript.

`prefix_request` asks for the summary as the conversation's own next request: the system
prompt, the tools and the history of the request before it, unchanged, then the ask in a final
user message, so a provider's prompt cache serves all but that message (the tools stay
offered: strict endpoints reject tool-shaped history without them). `summary_request` is the
fallback, when that does not fit or fails:

The older part of the conversation goes to the model as ONE user message of plain text: tool
calls written as prose ("called read_file({...})"), results as "tool result: ...", images as a
note. No `tools`, no tool-role messages, no tool-call shapes: strict endpoints reject tool
shapes offered without a schema, which would make compaction fail forever in any session that
ran a tool. The transcript is capped by cutting its *middle* on line boundaries, so how the
conversation started and where it stands both survive.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

from acp_server.context.state import IMAGE_NOTE, is_state_message
from acp_server.context.tokens import MESSAGE_OVERHEAD, Estimator
from acp_server.messages import Message, ModelRequest, TextPart, ToolSpec, is_note

RESULT_CHARS = 4000  # one tool result in the transcript, before the overall cap
ARGS_CHARS = 600  # one call's arguments in the transcript
HEAD_SHARE = 0.35  # of a capped text, the share kept from the start (the rest from the end)

SUMMARY_SYSTEM = (
    "You summarize a conversation between a user and a coding assistant so the assistant can "
    "continue the work after the older messages are removed. You only write the summary; "
    "you do not continue the conversation and you do not call tools."
)
# What a summary holds, asked the same way by both requests (the transcript's and the
# conversation's own).
SECTIONS = """\
Be concise and concrete (names of files, functions, commands, errors). Use these sections:

1. Goal: what the user wants done overall.
2. The user's instructions and constraints: every rule, preference or limit the user gave, \
as close to their words as possible.
3. Decisions: what was decided and why.
4. Progress: what is done, what was tried and failed, what is in progress.
5. Next step: the exact next action.

Write only the summary."""
SUMMARY_INSTRUCTIONS = (
    "Below is the older part of the conversation, as a transcript. Write a summary the "
    "assistant will read instead of it. " + SECTIONS
)


def transcript(messages: Sequence[Message]) -> str:
    """The conversation as plain text: one or more lines per message, no tool shapes."""
    lines: list[str] = []
    for message in messages:
        if is_state_message(message):
            lines.append(f"Summary of the conversation before this point:\n{message.text}")
        elif is_note(message):
            lines.append(f"Note from the agent: {message.text}")
        elif message.role == "tool":
            lines.append(f"Tool result: {cut_middle(message.text, RESULT_CHARS)}")
        else:
            lines.extend(_spoken(message))
    return "\n".join(lines)


def _spoken(message: Message) -> list[str]:
    speaker = {"user": "User", "assistant": "Assistant", "system": "System"}[message.role]
    lines: list[str] = []
    text = "".join(
        p.text if isinstance(p, TextPart) else f" {IMAGE_NOTE} " for p in message.content
    )
    if text.strip():
        lines.append(f"{speaker}: {text.strip()}")
    for call in message.tool_calls:
        args = call.invalid_arguments or json.dumps(call.arguments, ensure_ascii=False)
        if len(args) > ARGS_CHARS:
            args = args[: ARGS_CHARS - 1] + "…"
        lines.append(f"{speaker} called {call.name}({args})")
    return lines


def cut_middle(
    text: str,
    max_chars: int,
    head_share: float = HEAD_SHARE,
    marker: Callable[[int, int], str] | None = None,
) -> str:
    """`text` within `max_chars`: whole lines from the start and from the end, the middle
    replaced by one marker line (`marker(lines_cut, chars_cut)`). A line longer than its share
    is cut inside, the only way such text fits."""
    if len(text) <= max_chars:
        return text
    make = marker or _omitted
    room = max(max_chars - len(make(10**6, 10**9)) - 2, 0)
    lines = text.split("\n")
    head, head_chars = _take(lines, int(room * head_share))
    tail, _ = _take(lines[len(head) :][::-1], room - head_chars)
    tail.reverse()
    if head and not tail and len(head) < len(lines):
        # The last line alone is longer than the room left (a final message without newlines):
        # its end is kept, or the cut would drop where the conversation stands.
        rest = room - head_chars
        last = lines[-1]
        lines = [*lines[:-1], last[: len(last) - rest], last[len(last) - rest :]]
        tail = [lines[-1]] if rest > 0 else []
    if not head and not tail:  # one enormous line: cut characters
        keep = int(room * head_share)
        cut = len(text) - room
        return text[:keep] + "\n" + make(1, cut) + "\n" + text[len(text) - (room - keep) :]
    cut_lines = lines[len(head) : len(lines) - len(tail)]
    cut_chars = sum(len(line) + 1 for line in cut_lines)
    return "\n".join([*head, make(len(cut_lines), cut_chars), *tail])


def _take(lines: list[str], chars: int) -> tuple[list[str], int]:
    taken: list[str] = []
    used = 0
    for line in lines:
        if used + len(line) + 1 > chars:
            break
        taken.append(line)
        used += len(line) + 1
    return taken, used


def _omitted(lines: int, chars: int) -> str:
    return f"[... {lines:,} lines ({chars:,} characters) omitted here ...]"


PREFIX_ASK = (
    "<summary-request>\nStop the work here: do not call any tool and do not answer the user "
    "now. The older part of this conversation is about to be removed to free room in the "
    "context window; write the summary you will read instead of it. {which}"
    + SECTIONS.replace("{", "{{").replace("}", "}}")
    + "\n</summary-request>"
)
KEPT_FROM = (
    "The newest part, from the {role} message that begins «{start}», stays as it is: "
    "summarize what comes before it. "
)


def prefix_request(
    system: str,
    tools: Sequence[ToolSpec],
    history: Sequence[Message],
    first_kept: Message,
    reply_tokens: int,
    focus: str = "",
) -> ModelRequest:
    """The summary asked as the conversation's next request: `history` as it was sent, then
    the ask; the part from `first_kept` on is kept, not summarized."""
    start = " ".join((first_kept.text or _spoken_first(first_kept)).split())[:80]
    which = KEPT_FROM.format(role=_ROLES[first_kept.role], start=start) if start else ""
    ask = PREFIX_ASK.format(which=which)
    if focus.strip():
        ask += f"\n\nThe user asked the summary to focus on: {focus.strip()}"
    return ModelRequest(
        messages=(*history, Message("user", (TextPart(ask),))),
        tools=tuple(tools),
        system=system,
        max_tokens=reply_tokens,
        purpose="summary",
    )


_ROLES = {"user": "user", "assistant": "assistant", "tool": "tool result", "system": "system"}


def _spoken_first(message: Message) -> str:
    lines = _spoken(message)
    return lines[0] if lines else ""


def summary_request(
    older: Sequence[Message],
    estimator: Estimator,
    budget: int,
    reply_tokens: int,
    focus: str = "",
) -> ModelRequest:
    """The tool-free request that summarizes `older`, fitted to `budget` tokens (the window
    minus `reply_tokens`, the room left for the summary itself)."""
    instructions = SUMMARY_INSTRUCTIONS
    if focus.strip():
        instructions += f"\n\nThe user asked the summary to focus on: {focus.strip()}"
    fixed = estimator.corrected(
        estimator.text(SUMMARY_SYSTEM) + estimator.text(instructions) + 2 * MESSAGE_OVERHEAD + 8
    )
    full = transcript(older)
    room = max(budget - fixed, 0)
    cap = estimator.chars_for(room)
    text = cut_middle(full, cap)
    tokens = estimator.corrected(estimator.text(text))
    if tokens > room:  # dense text (non-ASCII counts by bytes): cut again in proportion
        text = cut_middle(full, int(cap * room / tokens * 0.95))
    body = f"{instructions}\n\n<transcript>\n{text}\n</transcript>"
    return ModelRequest(
        messages=(Message("user", (TextPart(body),)),),
        tools=(),
        system=SUMMARY_SYSTEM,
        max_tokens=reply_tokens,
        purpose="summary",
    )
