"""A stored session as a transcript: Markdown for people, JSON for programs.

`render_markdown` gives the conversation as the editor showed it: each prompt, the agent's
thoughts (collapsed), its replies, every tool call with its status and its diff or output, and
plans as checklists. `render_json` gives `{"session": {...}, "history": [...], "updates": [...]}`:
the stored session row, the history messages in the neutral stored form (images inlined), and the
updates `session/load` replays.

Kept apart from the `sessions` command (`cli/sessions.py`) so the command stays about arguments,
the store and errors, and the rendering can be read and tested on its own. Both functions only
read the store they are given; opening and closing it is the caller's business.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import re
import time
from collections.abc import Iterable
from typing import Any

from acp_server.markdown import fence, inline_code
from acp_server.store.database import Event, SessionRow, Store, iso
from acp_server.store.transcript import restore


def render_markdown(row: SessionRow, store: Store) -> str:
    """The session `row` (read from `store`) as a Markdown transcript."""
    events = list(store.events(row.id))
    replay = restore(events, store.blob).replay
    messages = [event.body for event in events if event.kind == "message"]
    count = store.message_count(row.id)
    return _markdown(row, count, replay, messages, interrupted=_interrupted(events))


def render_json(row: SessionRow, store: Store) -> dict[str, Any]:
    """The session `row` (read from `store`) as a JSON-ready dict: session, history, updates."""
    events = list(store.events(row.id))
    return {
        "session": _session_json(row, store.message_count(row.id)),
        "history": _stored_history(events, store.blob),
        "updates": restore(events, store.blob).replay,
    }


def local_time(stamp: float) -> str:
    """A timestamp as local `YYYY-MM-DD HH:MM` (the list table shows it the same way)."""
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(stamp))


def _session_json(row: SessionRow, message_count: int) -> dict[str, Any]:
    return {
        **dataclasses.asdict(row),
        "created": iso(row.created_at),
        "updated": iso(row.updated_at),
        "message_count": message_count,
    }


def _stored_history(events: Iterable[Event], blob: Any) -> list[dict[str, Any]]:
    """The history messages as stored (neutral form), cut where the session cut them, with
    images inlined so the export stands on its own."""
    history: list[dict[str, Any]] = []
    for event in events:
        if event.kind == "message":
            history.append(_inline_images(event.body, blob))
        elif event.kind == "truncate":
            del history[event.body["length"] :]
    return history


def _inline_images(body: dict[str, Any], blob: Any) -> dict[str, Any]:
    parts = body.get("content", [])
    if not any(part.get("blob") for part in parts):
        return body
    inlined = []
    for part in parts:
        key = part.get("blob")
        if key:
            part = {k: v for k, v in part.items() if k != "blob"}
            part["data"] = blob(key) or ""
        inlined.append(part)
    return {**body, "content": inlined}


def _interrupted(events: Iterable[Event]) -> bool:
    """Whether the last prompt never got its answer (the agent stopped mid-turn)."""
    pending = False
    for event in events:
        if event.kind == "message" and event.body.get("role") == "user":
            pending = True
        elif event.kind == "turn":
            pending = False
    return pending


# ----- the Markdown transcript -----------------------------------------------------------------

_STATUS_MARK = {"completed": "x", "in_progress": " ", "pending": " "}


def _markdown(
    row: SessionRow,
    message_count: int,
    updates: list[dict[str, Any]],
    messages: list[dict[str, Any]],
    *,
    interrupted: bool = False,
) -> str:
    """The conversation as the editor showed it, turn by turn. `updates` are what
    `session/load` replays; `messages` every stored history message, in order (tool results
    give the output of commands that ran in the editor's terminal)."""
    blocks = [
        f"# {_one_line(row.title) if row.title else 'Untitled session'}",
        _facts(row, message_count),
    ]
    updates = _merged_chunks(updates)
    calls = _tool_calls(updates, _tool_results(messages))
    turn = 0
    speaker = ""
    previous: dict[str, Any] = {}
    for index, update in enumerate(updates):
        kind = update.get("sessionUpdate")
        if kind == "user_message_chunk":
            if speaker != "user" or update.get("messageId") != previous.get("messageId"):
                turn += 1
                blocks += [f"## Turn {turn}", "### User"]
                speaker = "user"
            blocks.append(_content_block(update.get("content")))
        elif kind in _AGENT_KINDS:
            if speaker != "agent":
                blocks.append("### Agent")
                speaker = "agent"
            if kind == "agent_message_chunk":
                blocks.append(_content_block(update.get("content")))
            elif kind == "agent_thought_chunk":
                blocks.append(_thought(_content_block(update.get("content"))))
            elif kind == "plan":
                blocks.append(_plan(update.get("entries") or []))
            elif index in calls:  # a tool call: at its announcement, in its final state
                state, result = calls[index]
                blocks.append(_tool_call(state, result, row.cwd))
        previous = update
    if interrupted:
        blocks.append("*The agent was stopped before it finished answering this prompt.*")
    return "\n\n".join(block for block in blocks if block)


_AGENT_KINDS = (
    "agent_message_chunk",
    "agent_thought_chunk",
    "plan",
    "tool_call",
    "tool_call_update",
)


def _merged_chunks(updates: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Consecutive text chunks of one message (same kind and `messageId`) as one update."""
    out: list[dict[str, Any]] = []
    for update in updates:
        last = out[-1] if out else None
        if (
            last is not None
            and str(update.get("sessionUpdate", "")).endswith("_chunk")
            and last.get("sessionUpdate") == update.get("sessionUpdate")
            and update.get("messageId") is not None
            and last.get("messageId") == update.get("messageId")
            and last["content"].get("type") == "text"
            and update["content"].get("type") == "text"
        ):
            text = last["content"]["text"] + update["content"]["text"]
            out[-1] = {**last, "content": {"type": "text", "text": text}}
        else:
            out.append(update)
    return out


def _facts(row: SessionRow, message_count: int) -> str:
    lines = [f"- **Session:** {inline_code(row.id)}", f"- **Directory:** {inline_code(row.cwd)}"]
    if row.additional_dirs:
        extra = ", ".join(inline_code(d) for d in row.additional_dirs)
        lines.append(f"- **Additional directories:** {extra}")
    lines += [
        f"- **Created:** {local_time(row.created_at)}; **updated:** {local_time(row.updated_at)}",
        f"- **Messages:** {message_count}",
    ]
    return "\n".join(lines) + "\n\n---"


def _tool_results(messages: list[dict[str, Any]]) -> dict[str, list[str]]:
    """Each call id's tool results, in order (ids can repeat across turns)."""
    results: dict[str, list[str]] = {}
    for body in messages:
        if body.get("role") == "tool" and body.get("tool_call_id"):
            results.setdefault(body["tool_call_id"], []).append(_text_of(body))
    return results


def _tool_calls(
    updates: list[dict[str, Any]], results: dict[str, list[str]]
) -> dict[int, tuple[dict[str, Any], str | None]]:
    """Each tool call, keyed by the position of its first update: its announcement merged with
    every later update of it (the final state), and its result from the history.

    A call id can come back in a later turn (some models number their calls per reply), so an
    update belongs to the latest call announced with its id, and the n-th call with an id gets
    the n-th result for that id."""
    calls: dict[int, tuple[dict[str, Any], str | None]] = {}
    latest: dict[str, dict[str, Any]] = {}
    seen: dict[str, int] = {}
    for index, update in enumerate(updates):
        kind = update.get("sessionUpdate")
        if kind not in ("tool_call", "tool_call_update"):
            continue
        call_id = str(update.get("toolCallId", ""))
        state = latest.get(call_id)
        if kind == "tool_call" or state is None:
            state = latest[call_id] = {}
            nth = seen[call_id] = seen.get(call_id, -1) + 1
            answers = results.get(call_id, [])
            calls[index] = (state, answers[nth] if nth < len(answers) else None)
        state.update(update)
    return calls


def _tool_call(state: dict[str, Any], result: str | None, cwd: str) -> str:
    title = _one_line(str(state.get("title") or state.get("name") or "Tool call"))
    parts = [f"#### Tool call: {title} ({state.get('status', 'pending')})"]
    raw_input = state.get("rawInput")
    command = raw_input.get("command") if isinstance(raw_input, dict) else None
    if isinstance(command, str) and command.strip() and command.strip() not in title:
        parts.append(fence(command.strip(), "sh"))
    content = state.get("content") or []
    for item in content:
        kind = item.get("type")
        if kind == "diff":
            parts.append(_diff(item, cwd))
        elif kind == "terminal":
            shown = result.strip() if result else ""
            parts.append(
                "Output (from the editor's terminal):\n\n" + fence(shown)
                if shown
                else "*Ran in the editor's terminal; the output was not kept.*"
            )
        elif kind == "content":
            parts.append(_tool_content(item.get("content")))
    if not content and result:
        parts.append(_tool_text(result))
    return "\n\n".join(part for part in parts if part)


def _tool_content(block: Any) -> str:
    """A content block of a tool call: text is tool output; images and resources as usual."""
    if isinstance(block, dict) and block.get("type") == "text":
        return _tool_text(str(block.get("text", "")))
    return _content_block(block)


def _tool_text(text: str) -> str:
    """Tool output in one code block, never read as Markdown: a file read by a tool may be a
    README whose headings would become the transcript's. Output shown as a status line over a
    fenced block (the shell tool's form) loses that inner fence first, so the one block holds
    both, as for output from the editor's terminal."""
    if not text.strip():
        return ""
    return fence(_without_inner_fence(text))


def _without_inner_fence(text: str) -> str:
    """`status` + a fenced block (as `markdown.fence` writes it) as `status` + its body;
    any other text as is."""
    status, _, block = text.partition("\n")
    lines = block.split("\n")
    opening = re.fullmatch(r"(`{3,})[\w+-]*", lines[0])
    if opening is None or len(lines) < 2 or lines[-1] != opening.group(1):
        return text
    body = "\n".join(lines[1:-1])
    return text if opening.group(1) in body else f"{status}\n{body}"


def _diff(item: dict[str, Any], cwd: str) -> str:
    path = str(item.get("path", ""))
    shown = os.path.relpath(path, cwd) if _inside(path, cwd) else path
    old = item.get("oldText")
    new = str(item.get("newText") or "")
    text = unified_diff(shown, old if isinstance(old, str) else None, new)
    label = "new file" if old is None else "edited"
    body = fence(text, "diff") if text else "*(no changes)*"
    return f"{inline_code(shown)} ({label}):\n\n{body}"


def unified_diff(path: str, old: str | None, new: str) -> str:
    """A unified diff of two texts, `git diff` style (`old` None: a new file)."""
    lines = difflib.unified_diff(
        (old or "").splitlines(keepends=True),
        new.splitlines(keepends=True),
        fromfile="/dev/null" if old is None else f"a/{path}",
        tofile=f"b/{path}",
    )
    out: list[str] = []
    for line in lines:
        if line.endswith("\n"):
            out.append(line)
        else:
            out.append(line + "\n\\ No newline at end of file\n")
    return "".join(out).rstrip("\n")


def _inside(path: str, root: str) -> bool:
    return bool(root) and (path == root or path.startswith(root.rstrip(os.sep) + os.sep))


def _thought(text: str) -> str:
    """Thoughts collapsed: GitHub and most Markdown viewers show a "Thinking" toggle."""
    return f"<details>\n<summary>Thinking</summary>\n\n{text.strip()}\n\n</details>"


def _plan(entries: list[dict[str, Any]]) -> str:
    lines = ["**Plan:**", ""]
    for entry in entries:
        status = entry.get("status", "pending")
        note = " *(in progress)*" if status == "in_progress" else ""
        mark = _STATUS_MARK.get(status, " ")
        lines.append(f"- [{mark}] {_one_line(str(entry.get('content', '')))}{note}")
    return "\n".join(lines)


def _content_block(block: Any) -> str:
    """One ACP content block as Markdown."""
    if not isinstance(block, dict):
        return ""
    kind = block.get("type")
    if kind == "text":
        return str(block.get("text", ""))
    if kind == "resource_link":
        name = block.get("title") or block.get("name") or block.get("uri", "")
        return f"Attached: [{_one_line(str(name))}]({block.get('uri', '')})"
    if kind == "resource":
        resource = block.get("resource") or {}
        uri = str(resource.get("uri", ""))
        text = resource.get("text")
        if isinstance(text, str):
            return f"Attached {inline_code(uri)}:\n\n{fence(text)}"
        return f"Attached {inline_code(uri)} ({resource.get('mimeType') or 'binary data'})."
    if kind == "image":
        return f"*[image: {block.get('mimeType', 'unknown type')}]*"
    if kind == "audio":
        return "*[audio clip]*"
    return f"*[{kind} content]*"


def _text_of(body: dict[str, Any]) -> str:
    return "".join(
        part.get("text", "") for part in body.get("content", []) if part["type"] == "text"
    )


def _one_line(text: str) -> str:
    return " ".join(text.split())
