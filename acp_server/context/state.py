"""What the agent knows for certain, kept outside any summary.

A summary is the model's prose and may drop things; these facts are taken from the history
itself and written back verbatim after every compaction:

- the user's messages (newest first within a budget; the latest one always),
- the current plan (the arguments of the last `update_plan` call),
- the files read and edited (from the tool calls, not from the model's prose), the most
  recently touched first within a budget, with a count of the ones left out.

Both lists are bounded, so the state itself can never grow until a compaction frees nothing
(many long prompts or paths); the current plan and the latest user message are always kept.

The state rides in the first message of a compacted history (a user message that also carries
the model's summary, or the "earlier messages were removed" placeholder), both as text the model
reads and as data in `Message.extra[STATE_KEY]`, so the next compaction carries it forward.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from acp_server.messages import Message, TextPart, is_note, text_message

STATE_KEY = "context_state"
# tool name -> (what it does to a file, the argument naming the file)
FILE_TOOLS: dict[str, tuple[str, str]] = {
    "read_file": ("read", "path"),
    "edit_file": ("edited", "path"),
    "write_file": ("edited", "path"),
}
PLAN_TOOL = "update_plan"
FILE_CHARS = 400  # the file lists get at least this much, however small the room
IMAGE_NOTE = "[attached an image]"
SUMMARY_HEADING = "[Earlier conversation, compacted to make room in the context window]"
NO_SUMMARY = (
    "Earlier messages were removed to make room in the context window, and no summary of them "
    "is available. The facts below are exact; if you need something else from before, ask the "
    "user or look again (read the file, rerun the command)."
)
ACK = "Understood. I will continue from here."


@dataclass(frozen=True)
class KeptState:
    user_messages: tuple[str, ...] = ()  # oldest first
    plan: tuple[dict[str, Any], ...] | None = None
    files_read: tuple[str, ...] = ()
    files_edited: tuple[str, ...] = ()
    files_left_out: int = 0  # older files touched, not listed (the lists are bounded)

    def to_json(self) -> dict[str, Any]:
        return {
            "user_messages": list(self.user_messages),
            "plan": None if self.plan is None else [dict(e) for e in self.plan],
            "files_read": list(self.files_read),
            "files_edited": list(self.files_edited),
            "files_left_out": self.files_left_out,
        }

    @staticmethod
    def from_json(data: Any) -> KeptState:
        if not isinstance(data, dict):
            return KeptState()
        plan = data.get("plan")
        return KeptState(
            user_messages=tuple(str(t) for t in data.get("user_messages") or ()),
            plan=tuple(e for e in plan if isinstance(e, dict)) if isinstance(plan, list) else None,
            files_read=tuple(str(p) for p in data.get("files_read") or ()),
            files_edited=tuple(str(p) for p in data.get("files_edited") or ()),
            files_left_out=_count(data.get("files_left_out")),
        )


def _count(value: Any) -> int:
    return value if isinstance(value, int) and value > 0 else 0


def is_state_message(message: Message) -> bool:
    return message.role == "user" and STATE_KEY in message.extra


def _prompt(message: Message) -> bool:
    """A user message the user wrote (not a compaction's state, not the agent's note)."""
    return message.role == "user" and not is_state_message(message) and not is_note(message)


def user_text(message: Message) -> str:
    """A user message as text: its text parts verbatim, an image as a note."""
    return "".join(
        p.text if isinstance(p, TextPart) else f"\n{IMAGE_NOTE}\n" for p in message.content
    )


def collect(history: Sequence[Message], head_end: int, user_chars: int) -> KeptState:
    """The state of `history` for a compaction that replaces `history[:head_end]`: the user
    messages of that part (the newest always, older ones while `user_chars` last), the plan,
    and the files of the whole history (earlier compactions' state included), the most
    recently touched within half of `user_chars` (at least `FILE_CHARS`)."""
    users: list[str] = []
    read: dict[str, None] = {}
    edited: dict[str, None] = {}
    plan: tuple[dict[str, Any], ...] | None = None
    left_out = 0
    for index, message in enumerate(history):
        if is_state_message(message):
            earlier = KeptState.from_json(message.extra[STATE_KEY])
            if index < head_end:
                users.extend(earlier.user_messages)
            _touch(read, earlier.files_read)
            _touch(edited, earlier.files_edited)
            left_out = earlier.files_left_out
            plan = earlier.plan if earlier.plan is not None else plan
        elif message.role == "user" and index < head_end and not is_note(message):
            users.append(user_text(message))
        for call in message.tool_calls:
            latest = _plan(call.name, call.arguments)
            plan = plan if latest is None else latest
            kind, key = FILE_TOOLS.get(call.name, ("", ""))
            path = call.arguments.get(key) if kind else None
            if isinstance(path, str) and path:
                _touch(read if kind == "read" else edited, (path,))
    file_chars = max(user_chars // 2, FILE_CHARS)
    files_read, files_edited, dropped = _files_within(list(read), list(edited), file_chars)
    current = not any(_prompt(m) for m in history[head_end:])
    users_kept = _newest_within(users, user_chars, whole_newest=current)
    return KeptState(users_kept, plan, files_read, files_edited, left_out + dropped)


def _touch(files: dict[str, None], paths: Sequence[str]) -> None:
    """Mark `paths` as the most recently touched (the dict keeps touch order)."""
    for path in paths:
        files.pop(path, None)
        files[path] = None


def _files_within(
    read: list[str], edited: list[str], chars: int
) -> tuple[tuple[str, ...], tuple[str, ...], int]:
    """The most recently touched files within `chars` (edited ones first, they matter more),
    each list in touch order, and how many were left out. At least one of each is kept."""
    kept: dict[str, set[str]] = {"edited": set(), "read": set()}
    used = 0
    for kind, paths in (("edited", edited), ("read", read)):
        for path in reversed(paths):
            if kept[kind] and used + len(path) > chars:
                break
            kept[kind].add(path)
            used += len(path)
    dropped = len(read) + len(edited) - len(kept["read"]) - len(kept["edited"])
    in_order = [
        tuple(p for p in ps if p in kept[k]) for k, ps in (("read", read), ("edited", edited))
    ]
    return in_order[0], in_order[1], dropped


def _plan(name: str, arguments: dict[str, Any]) -> tuple[dict[str, Any], ...] | None:
    entries = arguments.get("entries") if name == PLAN_TOOL else None
    if not isinstance(entries, list):
        return None
    return tuple(e for e in entries if isinstance(e, dict) and isinstance(e.get("content"), str))


def _newest_within(texts: list[str], chars: int, whole_newest: bool) -> tuple[str, ...]:
    """The newest texts within `chars`; the newest always, whole when it is the current prompt
    (never condensed), else its start and end when it alone is over the budget."""
    kept: list[str] = []
    used = 0
    for text in reversed(texts):
        if kept and used + len(text) > chars:
            break
        if not kept and not whole_newest and len(text) > chars:
            half = max(chars // 2, 40)
            text = (
                f"{text[:half]}\n[... {len(text) - 2 * half:,} characters cut ...]\n{text[-half:]}"
            )
        kept.append(text)
        used += len(text)
    return tuple(reversed(kept))


def render(state: KeptState, summary: str | None) -> str:
    """The text of the message that stands in for the replaced part of the conversation."""
    lines = [SUMMARY_HEADING, "", (summary or "").strip() or NO_SUMMARY]
    if state.user_messages:
        lines += ["", "## The user's messages so far (exact, oldest first)"]
        for n, text in enumerate(state.user_messages, 1):
            lines += [f"--- message {n} ---", text]
        lines.append("--- end of the user's messages ---")
    if state.plan is not None:
        lines += ["", "## The current plan"]
        lines += [f"- [{e.get('status', 'pending')}] {e['content']}" for e in state.plan]
    for title, paths in (("Files read", state.files_read), ("Files edited", state.files_edited)):
        if paths:
            lines += ["", f"## {title}", *(f"- {p}" for p in paths)]
    if state.files_left_out:
        lines += ["", f"({state.files_left_out:,} files touched earlier are not listed.)"]
    return "\n".join(lines)


def rebuild(
    history: Sequence[Message], tail_start: int, summary: str | None, user_chars: int
) -> list[Message]:
    """`[state message (+ an acknowledgement), tail]`: the history after a compaction that
    replaced `history[:tail_start]` with `summary` (None: no summary, a placeholder note).
    `tail_start` must be where a round starts (never at a tool result)."""
    while tail_start < len(history) and history[tail_start].role == "tool":
        tail_start += 1  # never start the tail with a result whose call is left behind
    state = collect(history, tail_start, user_chars)
    tail = list(history[tail_start:])
    first = text_message("user", render(state, summary), extra={STATE_KEY: state.to_json()})
    lead = [first, text_message("assistant", ACK)] if tail and tail[0].role == "user" else [first]
    return lead + tail


def round_starts(history: Sequence[Message]) -> list[int]:
    """Where a round can start: at every message that is not a tool result (results stay with
    the call before them), so a tail cut there never orphans a result or drops one."""
    return [i for i, message in enumerate(history) if message.role != "tool"]
