"""Reasoning as local servers send it, made into the neutral thought and text events.

Two habits of the servers a local model runs on, each undone by a stream wrapper that any
backend can put around its events:

- `split_think_tags`: older Ollama and llama.cpp servers (and any server without a reasoning
  parser for the model) send a reasoning model's thinking inside the content, as
  `<think>…</think>` before the answer. The block becomes `ThoughtDelta`s while it streams, the
  answer after it stays text, and a tag cut across deltas (`<thi` + `nk>`) is held back until it
  is decided. Only a block that opens the reply counts: a `<think>` further on is the model
  talking about the tag. A block the reply never closes is all thought, so a reply cut off
  while still thinking is still never shown as an answer.
- `reasoning_as_answer`: some servers put a model's whole reply in the reasoning field and
  finish with `stop` and no content. That reply is the answer: it is sent again as text before
  the `Finish`, so the editor shows it and history keeps it. A reply that ends any other way
  (cut off, with tool calls, with an answer of its own) is left alone: cut-off reasoning is a
  failure the agent loop reports, never an answer.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, AsyncIterator

from acp_server.messages import Event, Finish, StreamError, TextDelta, ThoughtDelta, ToolCallDelta

OPEN = "<think>"
CLOSE = "</think>"


class ThinkTagSplitter:
    """Feed the content deltas of one reply; get thought and text deltas."""

    def __init__(self) -> None:
        self._buffer = ""
        # "start": nothing shown yet; "thinking": inside the block; "after": just closed it
        # (whitespace before the answer is dropped); "answer": plain text from here on.
        self._state = "start"

    def feed(self, text: str) -> list[Event]:
        """Take a content delta; return what can be decided now."""
        if self._state == "answer":
            return [TextDelta(text)] if text else []
        self._buffer += text
        out: list[Event] = []
        while self._step(out):
            pass
        return out

    def end(self) -> list[Event]:
        """The reply ended: release what is held (an unclosed block is thought)."""
        held, self._buffer = self._buffer, ""
        if not held:
            return []
        return [ThoughtDelta(held)] if self._state == "thinking" else [TextDelta(held)]

    def _step(self, out: list[Event]) -> bool:
        """Consume one decided piece of the buffer; False when the rest must wait."""
        if self._state == "start":
            return self._opening(out)
        if self._state == "thinking":
            return self._inside(out)
        if self._state == "after":
            self._buffer = self._buffer.lstrip()
            if not self._buffer:
                return False
            self._state = "answer"
        if self._buffer:
            out.append(TextDelta(self._buffer))
        self._buffer = ""
        return False

    def _opening(self, out: list[Event]) -> bool:
        start = self._buffer.lstrip()
        if start.startswith(OPEN):
            self._buffer = start[len(OPEN) :]
            self._state = "thinking"
            return True
        if OPEN.startswith(start):
            return False  # only whitespace, or the start of the tag, so far
        self._state = "answer"
        out.append(TextDelta(self._buffer))
        self._buffer = ""
        return False

    def _inside(self, out: list[Event]) -> bool:
        end = self._buffer.find(CLOSE)
        if end >= 0:
            if end:
                out.append(ThoughtDelta(self._buffer[:end]))
            self._buffer = self._buffer[end + len(CLOSE) :]
            self._state = "after"
            return True
        keep = _partial_suffix(self._buffer, CLOSE)
        thought = self._buffer[: len(self._buffer) - keep]
        if thought:
            out.append(ThoughtDelta(thought))
        self._buffer = self._buffer[len(thought) :]
        return False


def _partial_suffix(text: str, tag: str) -> int:
    """Length of the longest end of `text` that could grow into `tag`."""
    for size in range(min(len(tag) - 1, len(text)), 0, -1):
        if tag.startswith(text[-size:]):
            return size
    return 0


async def split_think_tags(events: AsyncIterator[Event]) -> AsyncIterator[Event]:
    """`events` with a leading `<think>…</think>` block of the content turned into thoughts."""
    splitter = ThinkTagSplitter()
    async with _closing(events):
        async for event in events:
            if isinstance(event, TextDelta):
                for item in splitter.feed(event.text):
                    yield item
                continue
            if isinstance(event, Finish | StreamError):
                for item in splitter.end():
                    yield item
            yield event
    for item in splitter.end():
        yield item


async def reasoning_as_answer(events: AsyncIterator[Event]) -> AsyncIterator[Event]:
    """`events`, with a reply that was only reasoning and finished with `stop` repeated as its
    answer (text) before the `Finish`."""
    thought: list[str] = []
    answered = False
    async with _closing(events):
        async for event in events:
            if isinstance(event, ThoughtDelta):
                thought.append(event.text)
            elif isinstance(event, ToolCallDelta) or (isinstance(event, TextDelta) and event.text):
                answered = True
            elif isinstance(event, Finish) and event.reason == "stop" and not answered:
                text = "".join(thought).strip()
                if text:
                    yield TextDelta(text)
            yield event


def _closing(events: AsyncIterator[Event]) -> contextlib.AbstractAsyncContextManager[object]:
    """Close the wrapped generator when the wrapper is closed early (a cancelled turn)."""
    if isinstance(events, AsyncGenerator):
        return contextlib.aclosing(events)
    return contextlib.nullcontext()
