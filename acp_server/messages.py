"""The neutral conversation model and the neutral stream events every backend produces.

History is a list of `Message`s that no vendor owns: each backend renders it into its own wire
dialect, and each backend turns its wire stream back into the events below. The agent loop only
ever sees these types, never a provider dict.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

Role = Literal["system", "user", "assistant", "tool"]
# Normalized finish reasons: "stop" (done), "length" (cut off), "refusal" (content filter),
# "tool_calls" (the model wants tools run).
FinishReason = Literal["stop", "length", "refusal", "tool_calls"]


@dataclass(frozen=True)
class TextPart:
    text: str


@dataclass(frozen=True)
class ImagePart:
    data: str  # base64
    mime_type: str
    uri: str | None = None


ContentPart = TextPart | ImagePart


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: dict[str, Any]
    # The raw argument text when it did not parse as a JSON object (reported back to the model).
    invalid_arguments: str | None = None
    # Vendor-private data of this one call, keyed by dialect and stamped with the model (Gemini's
    # thought signature); only that backend reads it back, and a model switch drops it.
    extra: dict[str, Any] = field(default_factory=dict, compare=False)


@dataclass(frozen=True)
class Message:
    role: Role
    content: tuple[ContentPart, ...] = ()
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None  # for role "tool": the call this result answers
    thought: str = ""
    message_id: str | None = None
    # Vendor-private data that must travel with this message within one vendor (signatures).
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def text(self) -> str:
        return "".join(p.text for p in self.content if isinstance(p, TextPart))


def text_message(role: Role, text: str, **kw: Any) -> Message:
    return Message(role=role, content=(TextPart(text),) if text else (), **kw)


NOTE_START = "<agent-note>\nThis note is from the agent you run in, not from the user:\n"
NOTE_END = "\n</agent-note>"


def note_message(text: str) -> Message:
    """A note for the model from the agent (what changed: git's status, an instruction file),
    appended to the conversation as a user message: the system prompt stays as it was."""
    return text_message("user", NOTE_START + text + NOTE_END)


def is_note(message: Message) -> bool:
    return message.role == "user" and message.text.startswith(NOTE_START)


@dataclass(frozen=True)
class ToolSpec:
    """A tool as offered to the model."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True)
class ModelRequest:
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...] = ()
    system: str = ""  # the system prompt; never stored in history (each model brings its own)
    max_tokens: int | None = None
    # How hard the model reasons first: a level of `thought.LEVELS` ("off", "low", ...), which
    # each backend maps to its own knob; None leaves the request as the backend makes it.
    thought_level: str | None = None
    # "summary": a compaction's summary round, not a turn of the conversation
    purpose: Literal["turn", "summary"] = "turn"
    # A stable value per session: servers that route by it keep the session's prompt cache on
    # one machine (OpenAI's `prompt_cache_key`, a llama.cpp slot). None: nothing is sent.
    cache_key: str | None = None


# ----- stream events ---------------------------------------------------------------------------


@dataclass(frozen=True)
class TextDelta:
    text: str


@dataclass(frozen=True)
class ThoughtDelta:
    text: str


@dataclass(frozen=True)
class ToolCallDelta:
    """Part of a tool call. `id`/`name` are set when known (never concatenated);
    `arguments` is a fragment of the JSON argument text, appended in order."""

    index: int
    id: str | None = None
    name: str | None = None
    arguments: str = ""
    extra: dict[str, Any] | None = None  # the call's private data (`ToolCall.extra`), when sent


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int = 0  # the whole prompt, cached tokens included
    completion_tokens: int = 0
    cached_tokens: int = 0  # of the prompt, read from the server's prompt cache
    cache_write_tokens: int = 0  # of the prompt, written to it (Anthropic bills them apart)
    thought_tokens: int = 0  # of the reply, spent thinking (when the server says)


@dataclass(frozen=True)
class Finish:
    reason: FinishReason


@dataclass(frozen=True)
class ContextOverflow:
    """The server refused the request because it does not fit the model's context window.
    Either number may be missing: servers word this differently and some give none."""

    window: int | None = None  # the server's window in tokens, when it said
    prompt_tokens: int | None = None  # the server's count of the prompt it was sent, when it said


@dataclass(frozen=True)
class StreamError:
    """The backend failed in a way that ends this round; `message` is for a person.
    `overflow` is set when the failure was a context overflow, so the loop can compact and
    retry without reading the message; `images_refused` when the server said the model does
    not take image input (the backend sends notes in their place from then on, so asking again
    works)."""

    message: str
    overflow: ContextOverflow | None = None
    images_refused: bool = False


@dataclass(frozen=True)
class Notice:
    """Something the user should know while the model works, e.g. "retrying in 4 s"."""

    text: str
    severity: Literal["info", "warning", "error"] = "warning"


@dataclass(frozen=True)
class PrivateData:
    """Vendor-private data to keep with the assistant message being streamed (for example
    Anthropic thinking blocks with their signatures). The loop merges it into `Message.extra`;
    only the backend that produced it reads it back, and a model switch drops it."""

    data: dict[str, Any]


Event = (
    TextDelta | ThoughtDelta | ToolCallDelta | Usage | Finish | StreamError | Notice | PrivateData
)


class ToolCallAssembler:
    """Builds complete tool calls from `ToolCallDelta`s keyed by index."""

    def __init__(self) -> None:
        self._parts: dict[int, list[Any]] = {}
        self._extra: dict[int, dict[str, Any]] = {}

    def add(self, delta: ToolCallDelta) -> None:
        slot = self._parts.setdefault(delta.index, [None, None, []])
        if delta.id:
            slot[0] = delta.id
        if delta.name:
            slot[1] = delta.name
        if delta.arguments:
            slot[2].append(delta.arguments)
        if delta.extra:
            self._extra.setdefault(delta.index, {}).update(delta.extra)

    def calls(self, id_prefix: str) -> list[ToolCall]:
        """The assembled calls in index order; nameless gaps are dropped."""
        out: list[ToolCall] = []
        for n, index in enumerate(sorted(self._parts)):
            call_id, name, fragments = self._parts[index]
            if not name:
                continue
            raw = "".join(fragments).strip()
            args, invalid = _parse_arguments(raw)
            extra = self._extra.get(index, {})
            out.append(ToolCall(call_id or f"{id_prefix}{n}", name, args, invalid, extra))
        return out


def _parse_arguments(raw: str) -> tuple[dict[str, Any], str | None]:
    if not raw:
        return {}, None
    try:
        value = json.loads(raw)
    except ValueError:
        return {}, raw
    if isinstance(value, dict):
        return value, None
    return {}, raw


def unanswered_calls(messages: Sequence[Message]) -> list[str]:
    """Ids of the last model message's tool calls that no result follows. Matched by position,
    not by id over the whole history: ids can repeat across turns (some servers number calls
    per reply). Only the last model message can be left unanswered (by a cancel or a crash)."""
    unanswered: list[str] = []
    for message in messages:
        if message.role != "tool":
            unanswered = [call.id for call in message.tool_calls]
        elif message.tool_call_id in unanswered:
            unanswered.remove(message.tool_call_id)
    return unanswered


def history_problems(messages: Sequence[Message]) -> list[str]:
    """What a strict chat endpoint would reject: tool calls without exactly one result,
    results for unknown or repeated calls, results not following their call."""
    problems: list[str] = []
    pending: set[str] = set()
    seen: set[str] = set()
    for i, message in enumerate(messages):
        if message.role == "tool":
            call_id = message.tool_call_id or ""
            if call_id in pending:
                pending.discard(call_id)
            elif call_id in seen:
                problems.append(f"message {i}: a second result for tool call {call_id}")
            else:
                problems.append(f"message {i}: a result for unknown tool call {call_id}")
            seen.add(call_id)
            continue
        if pending:
            problems.append(f"message {i}: tool calls {sorted(pending)} have no result")
            pending.clear()
        for call in message.tool_calls:
            pending.add(call.id)
            seen.add(call.id)
    if pending:
        problems.append(f"tool calls {sorted(pending)} have no result at the end")
    return problems
