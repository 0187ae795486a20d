"""What a session records as it happens, and how a stored session comes back.

Two things are recorded, in one ordered log per session (see `store.py`):
- "message": each history message as it joins the model's history (user, assistant, tool);
- "shown": the updates the editor was shown, merged per message (a streamed reply becomes one
  chunk with the reply's `messageId`; a tool call becomes its `tool_call` plus one final
  `tool_call_update` with the diff or output). Notices are live-only and not kept.
"turn" events mark a prompt's answer, so a turn cut short by a crash can be recognized;
"truncate" events cut the history back (a refused prompt and its reply leave it); a "history"
event replaces the whole history (a compaction, `/clear`): the model continues from it, while
the shown updates before it still replay the conversation as the user saw it. A compaction is
shown as it runs; it is kept as one final `compaction_update` with its summary.

`restore()` replays the shown updates in order and rebuilds the history, repairing an
interrupted last turn: tool calls without a result get an "interrupted" result, and a user
message that never got an answer stays visible but is marked so the model does not treat it
as a pending request.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from acp_server.messages import ImagePart, Message, TextPart, ToolCall, unanswered_calls
from acp_server.store.database import Event, Store
from acp_server.updates import Update

INTERRUPTED_RESULT = "This tool call was interrupted (the agent stopped) before it finished."
INTERRUPTED_PROMPT = (
    "[This message was interrupted before the agent answered; it is kept for context only.]\n"
)
_CHUNKS = ("agent_message_chunk", "agent_thought_chunk", "user_message_chunk")
_LIVE_ONLY = (
    "notice",
    "usage_update",
    "current_mode_update",
    "config_option_update",
    "session_info_update",
    "available_commands_update",
)


def message_to_json(
    message: Message, store: Store | None = None, session_id: str | None = None
) -> dict[str, Any]:
    parts: list[dict[str, Any]] = []
    for part in message.content:
        if isinstance(part, TextPart):
            parts.append({"type": "text", "text": part.text})
        else:
            key = store.put_blob(part.data, session_id) if store else None
            image = {"type": "image", "mime": part.mime_type, "uri": part.uri}
            parts.append({**image, "blob": key} if key else {**image, "data": part.data})
    body: dict[str, Any] = {"role": message.role, "content": parts}
    if message.tool_calls:
        body["tool_calls"] = [
            {"id": c.id, "name": c.name, "arguments": c.arguments, "invalid": c.invalid_arguments}
            | ({"extra": c.extra} if c.extra else {})
            for c in message.tool_calls
        ]
    for key, value in (
        ("tool_call_id", message.tool_call_id),
        ("thought", message.thought),
        ("message_id", message.message_id),
        ("extra", message.extra),
    ):
        if value:
            body[key] = value
    return body


def message_from_json(body: dict[str, Any], blob: Callable[[str], str | None]) -> Message:
    parts: list[TextPart | ImagePart] = []
    for part in body.get("content", []):
        if part["type"] == "text":
            parts.append(TextPart(part["text"]))
        else:
            data = part.get("data") or blob(part.get("blob", "")) or ""
            parts.append(ImagePart(data, part["mime"], part.get("uri")))
    calls = tuple(
        ToolCall(c["id"], c["name"], c["arguments"], c.get("invalid"), c.get("extra") or {})
        for c in body.get("tool_calls", [])
    )
    return Message(
        role=body["role"],
        content=tuple(parts),
        tool_calls=calls,
        tool_call_id=body.get("tool_call_id"),
        thought=body.get("thought", ""),
        message_id=body.get("message_id"),
        extra=body.get("extra", {}),
    )


class Recorder:
    """Writes one session to the store as it happens: its history messages, and the updates the
    editor was shown, merged per message. Nothing is committed until `committed()` is awaited."""

    def __init__(self, store: Store, session_id: str) -> None:
        self.store = store
        self.session_id = session_id
        self._chunk: Update | None = None  # a text chunk that later chunks may extend
        self._calls: dict[str, Update] = {}  # announced tool calls, by id, until final
        self._compactions: dict[str, list[str]] = {}  # running compactions: summary so far

    @property
    def where(self) -> str:
        """Where the records go, for a person to look (the store's file)."""
        return str(self.store.path)

    def message(self, message: Message) -> None:
        body = message_to_json(message, self.store, self.session_id)
        self.store.append(self.session_id, "message", body)

    def shown(self, update: Update) -> None:
        kind = update.get("sessionUpdate")
        if kind in _LIVE_ONLY:
            return
        if kind in _CHUNKS and self._extends(update):
            return
        self.flush()
        if kind in _CHUNKS:
            self._chunk = {**update, "content": dict(update["content"])}
        elif kind == "tool_call":
            self._calls[update["toolCallId"]] = {}
            self.store.append(self.session_id, "shown", [update])
        elif kind == "tool_call_update":
            self._tool_update(update)
        elif kind in ("compaction_update", "compaction_summary_chunk"):
            self._compaction(update)
        else:
            self.store.append(self.session_id, "shown", [update])

    def _extends(self, update: Update) -> bool:
        """Append a text chunk to the pending one when it continues the same message."""
        pending = self._chunk
        if pending is None or pending["sessionUpdate"] != update["sessionUpdate"]:
            return False
        if pending.get("messageId") != update.get("messageId") or update.get("messageId") is None:
            return False
        if pending["content"].get("type") != "text" or update["content"].get("type") != "text":
            return False
        pending["content"]["text"] += update["content"]["text"]
        return True

    def _tool_update(self, update: Update) -> None:
        """Intermediate states are folded; the final one is stored with everything it changed
        (content, locations, raw output) since the announcement."""
        state = self._calls.get(update["toolCallId"])
        if state is None:
            self.store.append(self.session_id, "shown", [update])
            return
        state.update(update)
        if update.get("status") in ("completed", "failed"):
            del self._calls[update["toolCallId"]]
            keep = ("toolCallId", "status", "content", "rawOutput", "locations", "title")
            final = {"sessionUpdate": "tool_call_update"}
            final.update({k: state[k] for k in keep if k in state})
            self.store.append(self.session_id, "shown", [final])

    def _compaction(self, update: Update) -> None:
        """A compaction is kept as one terminal `compaction_update` with its whole summary."""
        compaction_id = update["compactionId"]
        if update["sessionUpdate"] == "compaction_summary_chunk":
            self._compactions.setdefault(compaction_id, []).append(update["content"]["text"])
            return
        if update.get("status") == "in_progress":
            self._compactions.setdefault(compaction_id, [])
            return
        final = dict(update)
        summary = "".join(self._compactions.pop(compaction_id, []))
        if summary and final.get("status") == "completed":
            final["summary"] = [{"type": "text", "text": summary}]
        self.store.append(self.session_id, "shown", [final])

    def history(self, messages: list[Message]) -> None:
        """The history was rebuilt (a compaction), emptied (`/clear`) or carried over to
        another model: store it whole."""
        body = [message_to_json(m, self.store, self.session_id) for m in messages]
        self.store.append(self.session_id, "history", {"messages": body})

    def flush(self) -> None:
        if self._chunk is not None:
            self.store.append(self.session_id, "shown", [self._chunk])
            self._chunk = None

    def turn_ended(self, stop_reason: str) -> None:
        self.flush()
        self.store.append(self.session_id, "turn", {"stopReason": stop_reason})

    def truncate(self, length: int) -> None:
        """History was cut back to `length` messages (a refused prompt leaves it)."""
        self.store.append(self.session_id, "truncate", {"length": length})

    def title(self, title: str) -> None:
        self.store.update(self.session_id, title=title)

    def mode(self, mode: str) -> None:
        self.store.update(self.session_id, mode=mode)

    def choice(self, state: dict[str, str | None]) -> None:
        """The chosen model and thought level, kept for load and resume."""
        self.store.update(self.session_id, **state)

    async def committed(self) -> None:
        """Wait until everything recorded so far is on disk; `SaveFailed` if some could not be."""
        await self.store.flush(self.session_id)


class NullRecorder:
    """Records nothing: the recorder of a session when the store could not be opened."""

    where = "nowhere: the session store could not be opened"

    def message(self, message: Message) -> None: ...

    def shown(self, update: Update) -> None: ...

    def turn_ended(self, stop_reason: str) -> None: ...

    def truncate(self, length: int) -> None: ...

    def history(self, messages: list[Message]) -> None: ...

    def title(self, title: str) -> None: ...

    def mode(self, mode: str) -> None: ...

    def choice(self, state: dict[str, str | None]) -> None: ...

    async def committed(self) -> None: ...


@dataclass
class Restored:
    history: list[Message]
    replay: list[Update]
    repairs: list[Message]  # messages added to mend an interrupted turn (to be recorded)
    shown_repairs: list[Update]  # final states for tool calls the crash left open


def restore(events: Iterable[Event], blob: Callable[[str], str | None]) -> Restored:
    """Rebuild history and the replay from a stored log; mend an interrupted last turn."""
    history: list[Message] = []
    replay: list[Update] = []
    answered_turns = 0
    user_turns = 0
    open_calls: dict[str, None] = {}
    for event in events:
        if event.kind == "message":
            message = message_from_json(event.body, blob)
            history.append(message)
            user_turns += message.role == "user"
        elif event.kind == "shown":
            replay.extend(event.body)
            _track_calls(event.body, open_calls)
        elif event.kind == "turn":
            answered_turns = user_turns
        elif event.kind == "truncate":
            del history[event.body["length"] :]
            answered_turns = user_turns = sum(m.role == "user" for m in history)
        elif event.kind == "history":
            pending = user_turns > answered_turns  # a compaction in the middle of a turn
            history = [message_from_json(body, blob) for body in event.body["messages"]]
            user_turns = sum(m.role == "user" for m in history)
            answered_turns = user_turns - 1 if pending else user_turns
    repairs = _repair(history, interrupted=user_turns > answered_turns)
    closing = [
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": call_id,
            "status": "failed",
            "content": [
                {"type": "content", "content": {"type": "text", "text": INTERRUPTED_RESULT}}
            ],
        }
        for call_id in open_calls
    ]
    return Restored(history, replay + closing, repairs, closing)


def _track_calls(updates: list[Update], open_calls: dict[str, None]) -> None:
    for update in updates:
        if update.get("sessionUpdate") == "tool_call":
            open_calls[update["toolCallId"]] = None
        elif update.get("status") in ("completed", "failed"):
            open_calls.pop(update.get("toolCallId", ""), None)


def _repair(history: list[Message], interrupted: bool) -> list[Message]:
    repairs: list[Message] = []
    for call_id in unanswered_calls(history):
        result = Message("tool", (TextPart(INTERRUPTED_RESULT),), tool_call_id=call_id)
        history.append(result)
        repairs.append(result)
    if interrupted and history and history[-1].role == "user":
        last = history[-1]
        marked = Message(
            "user", (TextPart(INTERRUPTED_PROMPT), *last.content), message_id=last.message_id
        )
        history[-1] = marked
    return repairs
