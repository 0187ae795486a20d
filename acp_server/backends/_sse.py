"""Incremental server-sent events parsing, for backends that stream SSE (OpenAI-compatible,
Anthropic).

Follows the SSE rules that matter for model servers: `event:`, `data:` and `id:` fields (one
optional space after the colon is dropped), several `data:` lines joined with newlines, `:`
comment lines (keep-alives) ignored, and a blank line ending an event. One leniency: an event
still pending when the body ends is delivered anyway, since some servers never write the final
blank line. `[DONE]` (OpenAI's end marker) is delivered as an ordinary event with `done` true;
what it means is the caller's business.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import AsyncIterable, AsyncIterator
from dataclasses import dataclass

_NEWLINE = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True)
class SseEvent:
    data: str
    event: str = "message"
    id: str | None = None

    @property
    def done(self) -> bool:
        """The OpenAI end-of-stream marker `data: [DONE]`."""
        return self.data.strip() == "[DONE]"


class SseParser:
    """Feed lines (without their line ending); complete events come out."""

    def __init__(self) -> None:
        self._data: list[str] = []
        self._event = ""
        self._id: str | None = None

    def feed(self, line: str) -> SseEvent | None:
        """Take one line; return the event a blank line completes, else None."""
        line = line.rstrip("\r\n")
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id" and "\0" not in value:
            self._id = value
        return None  # `retry:` and unknown fields are ignored

    def end(self) -> SseEvent | None:
        """The body ended: return an event still pending (lenient), if any."""
        return self._dispatch()

    def _dispatch(self) -> SseEvent | None:
        if not self._data:
            self._event = ""
            return None
        event = SseEvent("\n".join(self._data), self._event or "message", self._id)
        self._data = []
        self._event = ""
        return event


async def sse_events(lines: AsyncIterable[str]) -> AsyncIterator[SseEvent]:
    """The events in a stream of lines, e.g. `httpx.Response.aiter_lines()`."""
    parser = SseParser()
    async for line in lines:
        event = parser.feed(line)
        if event is not None:
            yield event
    last = parser.end()
    if last is not None:
        yield last


class SseStream:
    """Byte chunks in (split anywhere: UTF-8, CRLF, LF or CR endings), complete events out,
    one call per chunk: a network read is parsed in one go, not a line at a time through a
    chain of async generators (a few tenths of a microsecond a delta on loopback, where each
    read holds one; more where reads hold several)."""

    def __init__(self) -> None:
        self._parser = SseParser()
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._pending = ""

    def feed(self, chunk: bytes) -> list[SseEvent]:
        """The events the lines completed by `chunk` end."""
        text = self._pending + self._decoder.decode(chunk)
        # A trailing CR may be the first half of a CRLF split across chunks: keep it pending.
        held = text.endswith("\r")
        *complete, rest = _NEWLINE.split(text[:-1] if held else text)
        self._pending = rest + "\r" if held else rest
        return self._events(complete)

    def end(self) -> list[SseEvent]:
        """The body ended: its last line (without an ending), then an event still pending."""
        rest = (self._pending + self._decoder.decode(b"", final=True)).rstrip("\r")
        self._pending = ""
        events = self._events([rest] if rest else [])
        last = self._parser.end()
        return [*events, last] if last is not None else events

    def _events(self, lines: list[str]) -> list[SseEvent]:
        events = []
        for line in lines:
            event = self._parser.feed(line)
            if event is not None:
                events.append(event)
        return events


async def sse_from_bytes(chunks: AsyncIterable[bytes]) -> AsyncIterator[SseEvent]:
    """The events in a stream of byte chunks split anywhere (UTF-8; CRLF, LF or CR endings)."""
    stream = SseStream()
    async for chunk in chunks:
        for event in stream.feed(chunk):
            yield event
    for event in stream.end():
        yield event
