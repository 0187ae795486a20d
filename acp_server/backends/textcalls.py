"""Tool calls a model wrote as text, recovered as real calls — for any backend.

Some models (or servers without a tool-call parser for them) write calls into the reply text:

    Let me look.<tool_call>{"name": "read_file", "arguments": {"path": "a.py"}}</tool_call>

`InlineCallScanner` filters text deltas while they stream: the markup never reaches the visible
text (so never the editor, nor history); text that could be the start of a tag split across
deltas (`<`, `<tool_ca`) is held back until it is decided. Well-formed blocks become
`ToolCallDelta`s with ids `call_recovered_N`; `"parameters"` is accepted for `"arguments"`, and
arguments given as a JSON string are decoded. A block left open when the reply ends is parsed
too (servers that use the closing tag as a stop sequence never send it).

`CallRecovery` wraps a backend's event stream with the scanner and the policy "a reply whose only
call could not be parsed gets one retry with an explanation": the request is sent once more with
the assistant's text and a short user message that shows the expected format. If that reply is
malformed too, the turn ends without the call (its text is shown) and a notice says so.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from acp_server.messages import (
    Event,
    Finish,
    FinishReason,
    ModelRequest,
    Notice,
    StreamError,
    TextDelta,
    ToolCallDelta,
    text_message,
)

DEFAULT_TAGS = ("tool_call",)
# Recovered calls take indexes far above a server's native ones, so the two never collide.
RECOVERED_INDEX = 10_000
EXPLANATION = (
    "Your last message contained a tool call I could not read ({problem}), so it was not run. "
    "To call a tool, write one block per call, exactly like this, with the arguments as a JSON "
    'object:\n<tool_call>{{"name": "TOOL_NAME", "arguments": {{"ARGUMENT": "VALUE"}}}}</tool_call>'
)


class InlineCallScanner:
    """Feed text deltas; get visible text and recovered calls. Collects problems."""

    def __init__(self, next_id: Callable[[], str], tags: tuple[str, ...] = DEFAULT_TAGS) -> None:
        self._next_id = next_id
        self._opens = {f"<{tag}>": f"</{tag}>" for tag in tags}
        self._buffer = ""
        self._close: str | None = None  # the closing tag while inside a block
        self.recovered = 0
        self.problems: list[str] = []

    def feed(self, text: str) -> list[Event]:
        """Take a text delta; return what can be decided now."""
        if not self._buffer and self._close is None and "<" not in text:
            # The common case, decided at once: no tag can start in text without a `<`.
            return [TextDelta(text)] if text else []
        self._buffer += text
        out: list[Event] = []
        while self._step(out):
            pass
        return out

    def end(self) -> list[Event]:
        """The reply ended: release held text, parse a block left open."""
        out: list[Event] = []
        if self._close is not None:
            out += self._block(self._buffer)
        elif self._buffer:
            out.append(TextDelta(self._buffer))
        self._buffer = ""
        self._close = None
        return out

    def _step(self, out: list[Event]) -> bool:
        """Consume one decided piece of the buffer; False when the rest must wait."""
        if self._close is not None:
            end = self._buffer.find(self._close)
            if end < 0:
                return False
            out += self._block(self._buffer[:end])
            self._buffer = self._buffer[end + len(self._close) :]
            self._close = None
            return True
        start, tag = self._find_open()
        if tag is None:
            keep = self._partial_tag_length()
            visible = self._buffer[: len(self._buffer) - keep]
            if visible:
                out.append(TextDelta(visible))
            self._buffer = self._buffer[len(visible) :]
            return False
        if start:
            out.append(TextDelta(self._buffer[:start]))
        self._buffer = self._buffer[start + len(tag) :]
        self._close = self._opens[tag]
        return True

    def _find_open(self) -> tuple[int, str | None]:
        found: tuple[int, str | None] = (-1, None)
        for tag in self._opens:
            at = self._buffer.find(tag)
            if at >= 0 and (found[1] is None or at < found[0]):
                found = (at, tag)
        return found

    def _partial_tag_length(self) -> int:
        """Length of the longest buffer suffix that may still grow into an opening tag."""
        longest = max(len(tag) for tag in self._opens)
        for size in range(min(longest - 1, len(self._buffer)), 0, -1):
            tail = self._buffer[-size:]
            if any(tag.startswith(tail) for tag in self._opens):
                return size
        return 0

    def _block(self, content: str) -> list[Event]:
        calls, problems = parse_block(content)
        self.problems += problems
        out: list[Event] = []
        for name, arguments in calls:
            out.append(
                ToolCallDelta(
                    RECOVERED_INDEX + self.recovered, self._next_id(), name, json.dumps(arguments)
                )
            )
            self.recovered += 1
        return out


def parse_block(content: str) -> tuple[list[tuple[str, dict[str, Any]]], list[str]]:
    """The calls in one block's content (an object or a list of them), and what was wrong."""
    text = _strip_fence(content.strip())
    try:
        value = json.loads(text)
    except ValueError as exc:
        reason = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
        return [], [f"the block is not valid JSON: {reason}"]
    calls: list[tuple[str, dict[str, Any]]] = []
    problems: list[str] = []
    for item in value if isinstance(value, list) else [value]:
        call = _call(item)
        if isinstance(call, str):
            problems.append(call)
        else:
            calls.append(call)
    return calls, problems


def _call(item: Any) -> tuple[str, dict[str, Any]] | str:
    """(name, arguments), or what is wrong with the item."""
    if not isinstance(item, dict):
        return "the block is not a JSON object"
    name = item.get("name")
    if not isinstance(name, str) or not name.strip():
        return 'the block has no "name"'
    arguments = item.get("arguments", item.get("parameters", {}))
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except ValueError:
            return f'the "arguments" of {name} are not valid JSON'
    if not isinstance(arguments, dict):
        return f'the "arguments" of {name} are not a JSON object'
    return name.strip(), arguments


def _strip_fence(text: str) -> str:
    if text.startswith("```") and text.endswith("```") and len(text) >= 6:
        body = text[3:-3]
        first, _, rest = body.partition("\n")
        return (rest if first.strip().isalpha() or not first.strip() else body).strip()
    return text


# ----- the stream wrapper and the retry policy ---------------------------------------------------


@dataclass
class _Pass:
    """What one reply contained, as far as recovery cares."""

    raw_text: list[str] = field(default_factory=list)
    finish: FinishReason | None = None
    native_calls: bool = False
    recovered: int = 0
    problems: list[str] = field(default_factory=list)

    def wants_retry(self, request: ModelRequest) -> bool:
        valid = self.native_calls or self.recovered > 0
        ended = self.finish in ("stop", "tool_calls")
        return ended and bool(self.problems) and not valid and bool(request.tools)


Send = Callable[[ModelRequest], AsyncIterator[Event]]


class CallRecovery:
    """Inline tool-call recovery for one backend instance (which numbers the recovered ids)."""

    def __init__(self, tags: tuple[str, ...] = DEFAULT_TAGS) -> None:
        self.tags = tags
        self._numbers = itertools.count()

    def next_id(self) -> str:
        return f"call_recovered_{next(self._numbers)}"

    async def stream(self, send: Send, request: ModelRequest) -> AsyncIterator[Event]:
        """`send(request)`'s events with inline calls recovered; one retry for a bad call."""
        first = _Pass()
        async for event in self._filter(send(request), first):
            yield event
        if first.finish is None:
            return  # ended by a StreamError (or without a finish): nothing to decide
        if not first.wants_retry(request):
            for event in _closing(first):
                yield event
            return
        yield Notice(
            f"The model wrote a tool call that could not be read ({first.problems[0]}); "
            "asking it to try again.",
            "info",
        )
        again = retry_request(request, "".join(first.raw_text), first.problems[0])
        second = _Pass()
        async for event in self._filter(send(again), second):
            yield event
        if second.finish is not None:
            for event in _closing(second):
                yield event

    async def _filter(self, events: AsyncIterator[Event], out: _Pass) -> AsyncIterator[Event]:
        """Pass events through the scanner; hold back the Finish (recorded in `out`)."""
        scanner = InlineCallScanner(self.next_id, self.tags)
        last: Event | None = None
        try:
            async for last in events:
                if isinstance(last, TextDelta):
                    out.raw_text.append(last.text)
                    for item in scanner.feed(last.text):
                        yield item
                elif isinstance(last, Finish | StreamError):
                    break
                else:
                    out.native_calls = out.native_calls or isinstance(last, ToolCallDelta)
                    yield last
        finally:
            if isinstance(events, AsyncGenerator):
                await events.aclose()
        for item in scanner.end():
            yield item
        if isinstance(last, StreamError):
            yield last
        elif isinstance(last, Finish):
            out.finish = last.reason
        out.recovered = scanner.recovered
        out.problems = scanner.problems


def _closing(done: _Pass) -> list[Event]:
    """A notice for calls that were lost, then the reply's Finish."""
    out: list[Event] = []
    if done.problems:
        out.append(
            Notice(
                f"The model wrote a tool call that could not be read ({done.problems[0]}); "
                "it was not run."
            )
        )
    reason = done.finish or "stop"
    if done.recovered and reason == "stop":
        reason = "tool_calls"
    out.append(Finish(reason))
    return out


def retry_request(request: ModelRequest, reply_text: str, problem: str) -> ModelRequest:
    """The request again, plus the failed reply's text and an explanation of the format."""
    extra = (
        text_message("assistant", reply_text),
        text_message("user", EXPLANATION.format(problem=problem)),
    )
    return dataclasses.replace(request, messages=request.messages + extra)
