"""Carry a conversation over to another model: repair the neutral history for the new target.

The history was recorded while talking to one model, maybe of another vendor. Before the next
request goes to the new model, `carry_over` makes it something that model's API accepts:

- system messages are dropped (the new model brings its own system prompt);
- every tool call is answered and every result answers a call: results are matched to the calls
  of the assistant message right before them (by position, since ids can repeat across turns),
  unanswered calls and orphaned or repeated results are dropped;
- a trailing user message nobody answered (a cancelled or failed prompt) is dropped, and so are
  messages that say nothing (a reply that was only thinking) and any reply before the first
  user message;
- provider-private data (`Message.extra`, filled from `PrivateData` events: Anthropic thinking
  blocks with their signatures, OpenAI Responses reasoning items with their encrypted content;
  `ToolCall.extra`: Gemini's thought signature of a call) is kept only for the very model, and
  the very dialect, that made it.
  A signature is checked against the model that signed it: the API rejects another Claude
  model's signatures too. Foreign reasoning is dropped, never turned into text (Anthropic
  refuses requests where it was). The compaction state (`extra["context_state"]`) is not
  private and always stays;
- images become a short note where the target cannot take them: a model without image input,
  a format the APIs do not read, or an image in a reply (an image in a tool result stays: the
  OpenAI dialects, whose results are text, send it in a user message after the results);
- tool-call ids are rewritten, consistently for a call and its results, to fit the target: unique
  in the history and `[a-zA-Z0-9_-]{1,40}` (what Anthropic's pattern and OpenAI's length limit
  both accept), or exactly 9 letters and digits for Mistral-style servers. Ollama-made calls may
  have had no id at all; they get one. Tool names are made to fit `[a-zA-Z0-9_-]{1,64}`.

Pure: the input is never changed, and the result only depends on the input and the target.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from acp_server.context.state import STATE_KEY
from acp_server.messages import ContentPart, ImagePart, Message, TextPart, ToolCall

IdStyle = Literal["standard", "mistral"]
ID_STYLES: tuple[IdStyle, ...] = ("standard", "mistral")
# What every vendor's image input reads; anything else becomes a note.
IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
NEUTRAL_EXTRA = frozenset({STATE_KEY})  # `Message.extra` keys that belong to no vendor

_STANDARD_ID = re.compile(r"[a-zA-Z0-9_-]{1,40}")
_MISTRAL_ID = re.compile(r"[a-zA-Z0-9]{9}")
_TOOL_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")
_NOT_NAME_CHAR = re.compile(r"[^a-zA-Z0-9_-]")


@dataclass(frozen=True)
class Target:
    """What the history must fit: the dialect it is rendered into and the model's abilities."""

    dialect: str  # "openai", "openai-responses", "anthropic" or "ollama"
    model: str  # the model id the server knows (signatures are stamped with it)
    images: bool = True  # the model reads images
    id_style: IdStyle = "standard"


def carry_over(history: Sequence[Message], target: Target) -> list[Message]:
    """`history` repaired for `target` (see the module docstring); `history` is not changed."""
    ids = _Ids(target.id_style)
    out: list[Message] = []
    for round_ in _rounds(history):
        out += _carry_round(round_, target, ids)
    return _trim(out)


def differs(history: Sequence[Message], carried: Sequence[Message]) -> bool:
    """Whether carrying over changed the history, private data included (which `==` on
    messages does not compare): a switch that only dropped reasoning must still be recorded."""
    if list(history) != list(carried):
        return True
    return any(
        a.extra != b.extra or [c.extra for c in a.tool_calls] != [c.extra for c in b.tool_calls]
        for a, b in zip(history, carried, strict=True)
    )


# ----- pairing calls and results ------------------------------------------------------------------


@dataclass
class _Round:
    """A message and, if it made tool calls, the calls that were answered, each with its results
    (in call order)."""

    message: Message
    answered: list[tuple[ToolCall, Message]] = field(default_factory=list)


def _rounds(history: Sequence[Message]) -> Iterator[_Round]:
    """The non-system messages, each with its answered calls; results that answer no pending
    call of the message right before them are left out."""
    current: _Round | None = None
    pending: list[ToolCall] = []
    for message in history:
        if message.role == "system":
            continue
        if message.role != "tool":
            if current is not None:
                yield current
            current = _Round(message)
            pending = list(message.tool_calls) if message.role == "assistant" else []
            continue
        call = next((c for c in pending if c.id == message.tool_call_id), None)
        if current is not None and call is not None:
            pending.remove(call)
            current.answered.append((call, message))
    if current is not None:
        yield current


def _carry_round(round_: _Round, target: Target, ids: _Ids) -> list[Message]:
    """The message (calls renamed, unanswered ones gone) followed by its results."""
    message = round_.message
    order = {id(call): n for n, call in enumerate(message.tool_calls)}
    answered = sorted(round_.answered, key=lambda pair: order[id(pair[0])])
    calls: list[ToolCall] = []
    results: list[Message] = []
    for call, result in answered:
        fitted = replace(call, id=ids.fit(call.id), name=tool_name(call.name))
        same = (fitted.id, fitted.name) == (call.id, call.name)
        fitted = replace(fitted, extra=_fit_extra(call.extra, target, same))
        calls.append(fitted)
        results.append(_fit_message(replace(result, tool_call_id=fitted.id), target, True))
    changed = tuple(calls) != message.tool_calls
    first = replace(message, tool_calls=tuple(calls))
    return [_fit_message(first, target, keep_private=not changed), *results]


# ----- one message ------------------------------------------------------------------------------


def _fit_message(message: Message, target: Target, keep_private: bool) -> Message:
    """The message with images the target cannot take replaced by notes, and only the
    provider data that is the target's own."""
    content = tuple(_fit_part(part, message.role, target) for part in message.content)
    return replace(message, content=content, extra=_fit_extra(message.extra, target, keep_private))


def _fit_part(part: ContentPart, role: str, target: Target) -> ContentPart:
    if not isinstance(part, ImagePart):
        return part
    reason = _image_refused(part, role, target)
    return part if reason is None else TextPart(f"[{reason}]")


def _image_refused(part: ImagePart, role: str, target: Target) -> str | None:
    """Why the target cannot take this image (None: it can)."""
    if not target.images:
        return f"an image ({part.mime_type}) was here; the current model cannot see images"
    if part.mime_type not in IMAGE_TYPES:
        return f"an image in a format the model cannot read ({part.mime_type}) was here"
    if role == "assistant":
        return f"an image ({part.mime_type}) was here; it cannot be passed on to this model"
    return None


def _fit_extra(extra: dict[str, Any], target: Target, keep_private: bool) -> dict[str, Any]:
    """Neutral keys always; a vendor's data (keyed by dialect, stamped with the model that made
    it) only for that very model, and only while the message it describes is unchanged."""
    kept: dict[str, Any] = {}
    for key, value in extra.items():
        if key in NEUTRAL_EXTRA or (keep_private and _own(key, value, target)):
            kept[key] = value
    return kept


def _own(key: str, value: Any, target: Target) -> bool:
    return key == target.dialect and isinstance(value, dict) and value.get("model") == target.model


def tool_name(name: str) -> str:
    """A tool name within `[a-zA-Z0-9_-]{1,64}`: other characters become `_`."""
    if _TOOL_NAME.fullmatch(name):
        return name
    return _NOT_NAME_CHAR.sub("_", name)[:64] or "tool"


class _Ids:
    """Call ids for one carried-over history: the old id when it fits and is still free,
    else a new one. Deterministic: the same history always gets the same ids."""

    def __init__(self, style: IdStyle) -> None:
        self._pattern = _MISTRAL_ID if style == "mistral" else _STANDARD_ID
        self._style = style
        self._used: set[str] = set()
        self._counter = 0

    def fit(self, old: str) -> str:
        new = old if self._pattern.fullmatch(old) and old not in self._used else self._fresh()
        self._used.add(new)
        return new

    def _fresh(self) -> str:
        while True:
            self._counter += 1
            if self._style == "mistral":
                candidate = f"call{self._counter:05d}"  # 9 letters and digits
            else:
                candidate = f"call_carried_{self._counter}"
            if candidate not in self._used:
                return candidate


# ----- the ends of the history -------------------------------------------------------------------


def _trim(messages: list[Message]) -> list[Message]:
    """Without messages that say nothing, replies before the first user message, and trailing
    user messages nobody answered (the compaction state message always stays)."""
    kept = [m for m in messages if not _says_nothing(m)]
    while kept and kept[0].role != "user":
        kept.pop(0)
    while kept and kept[-1].role == "user" and STATE_KEY not in kept[-1].extra:
        kept.pop()
    return kept


def _says_nothing(message: Message) -> bool:
    if message.role == "tool" or message.tool_calls or STATE_KEY in message.extra:
        return False
    return not any(isinstance(p, ImagePart) or p.text.strip() for p in message.content)
