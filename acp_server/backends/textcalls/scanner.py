"""The streaming scanner that finds tool calls a model wrote as text (`InlineCallScanner`).

It filters text deltas while they stream: call markup never reaches the visible text (so never
the editor, nor history); text that could be the start of a tag split across deltas (`<`,
`<tool_ca`, a backtick) is held back until it is decided, a fenced block that may hold a call
until it closes, and a reply that opens with `{` until it ends. A call is recovered only when it
names a tool the request offered and its arguments fit that tool's schema (`forms.read_block`);
it becomes `ToolCallDelta`s with ids the caller gives and indexes from `RECOVERED_INDEX`. A
block left open when the reply ends is read too (servers that use the closing tag as a stop
sequence never send it). What to do with a reply whose call could not be used is `recover`'s.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from acp_server.backends.textcalls.forms import (
    CALL_FENCES,
    ECHO,
    FENCE,
    FORMS,
    Form,
    Offered,
    Reading,
    read_block,
)
from acp_server.messages import Event, TextDelta, ToolCallDelta

# Recovered calls take indexes far above a server's native ones, so the two never collide.
RECOVERED_INDEX = 10_000
TRIGGERS = frozenset(form.opener[0] for form in FORMS)


class InlineCallScanner:
    """Feed text deltas; get visible text and recovered calls. Collects problems, and the
    call-shaped text that was left as text (`unread`)."""

    def __init__(self, next_id: Callable[[], str], offered: Offered) -> None:
        self._next_id = next_id
        self._offered = offered
        self._buffer = ""
        self._form: Form | None = None  # the block being read
        self._plain_fence = False  # inside a code block that holds no call: shown as it comes
        self._started = False  # the reply's first visible character was seen
        self._bare = False  # the reply opened with `{` or `[`: held whole, maybe one bare call
        self.recovered = 0
        self.problems: list[str] = []
        self.unread: list[str] = []
        self.echoed = 0  # tool-result markup the model repeated (never shown)
        self.shown = False  # visible text other than white space came out

    def feed(self, text: str) -> list[Event]:
        """Take a text delta; return what can be decided now."""
        if self._quiet() and not TRIGGERS.intersection(text):
            # The common case, decided at once: no block can start here.
            return self._seen([TextDelta(text)] if text else [])
        self._buffer += text
        out: list[Event] = []
        while self._step(out):
            pass
        return self._seen(out)

    def _seen(self, out: list[Event]) -> list[Event]:
        self.shown = self.shown or any(isinstance(e, TextDelta) and e.text.strip() for e in out)
        return out

    def _quiet(self) -> bool:
        idle = not self._buffer and self._form is None and not self._plain_fence
        return idle and self._started and not self._bare

    def end(self) -> list[Event]:
        """The reply ended: release held text, read a block left open."""
        out: list[Event] = []
        if self._form is not None:
            out += self._block(self._form, self._buffer, self._form.opener + self._buffer)
        elif self._bare:
            out += self._block(None, self._buffer, self._buffer)
        elif self._buffer:
            out.append(TextDelta(self._buffer))
        self._buffer = ""
        self._form = None
        self._bare = self._plain_fence = False
        return self._seen(out)

    def _step(self, out: list[Event]) -> bool:
        """Consume one decided piece of the buffer; False when the rest must wait."""
        if not self._started:
            head = self._buffer.lstrip()
            if not head:
                return False
            self._started, self._bare = True, head[0] in "{["
            return True
        if self._bare:
            return False
        if self._plain_fence:
            return self._pass_fence(out)
        if self._form is not None:
            return self._close(self._form, out)
        start, form = self._find_open()
        if form is None:
            self._release(out, self._partial_tag_length())
            return False
        if start:
            out.append(TextDelta(self._buffer[:start]))
        self._buffer = self._buffer[start + len(form.opener) :]
        self._form = form
        return True

    def _close(self, form: Form, out: list[Event]) -> bool:
        """Inside a block: read it once its end is here."""
        if form is FENCE and not self._fence_may_hold_a_call(out):
            return True
        end = -1 if form.closer is None else self._buffer.find(form.closer)
        if end < 0 or form.closer is None:
            return False
        raw = form.opener + self._buffer[: end + len(form.closer)]
        out += self._block(form, self._buffer[:end], raw)
        self._buffer = self._buffer[end + len(form.closer) :]
        self._form = None
        return True

    def _fence_may_hold_a_call(self, out: list[Event]) -> bool:
        """A fenced block whose first line says it is not JSON is shown as it comes."""
        info, newline, _ = self._buffer.partition("\n")
        if not newline:
            return True  # its info string is not known yet
        if info.strip().lower() in CALL_FENCES:
            return True
        out.append(TextDelta(FENCE.opener))
        self._form, self._plain_fence = None, True
        return False

    def _pass_fence(self, out: list[Event]) -> bool:
        """Inside a code block shown as text: until its closing fence."""
        end = self._buffer.find(FENCE.opener)
        if end < 0:
            self._release(out, len(self._buffer) - len(self._buffer.rstrip("`")))
            return False
        out.append(TextDelta(self._buffer[: end + len(FENCE.opener)]))
        self._buffer = self._buffer[end + len(FENCE.opener) :]
        self._plain_fence = False
        return True

    def _release(self, out: list[Event], keep: int) -> None:
        """Show the buffer but its last `keep` characters."""
        visible = self._buffer[: len(self._buffer) - keep]
        if visible:
            out.append(TextDelta(visible))
        self._buffer = self._buffer[len(visible) :]

    def _find_open(self) -> tuple[int, Form | None]:
        found: tuple[int, Form | None] = (-1, None)
        for form in FORMS:
            at = self._buffer.find(form.opener)
            if at >= 0 and (found[1] is None or at < found[0]):
                found = (at, form)
        return found

    def _partial_tag_length(self) -> int:
        """Length of the longest buffer suffix that may still grow into an opening tag."""
        longest = max(len(form.opener) for form in FORMS)
        for size in range(min(longest - 1, len(self._buffer)), 0, -1):
            tail = self._buffer[-size:]
            if any(form.opener.startswith(tail) for form in FORMS):
                return size
        return 0

    def _block(self, form: Form | None, content: str, raw: str) -> list[Event]:
        """The events for one block: its calls, or its text when it was not a call after all."""
        if form is ECHO:
            self.echoed += 1
            return []
        reading = read_block(form, content, self._offered)
        if form is not None and form.markup:
            self.problems += reading.problems
            return self._calls(reading)
        if reading.calls and not reading.problems:
            return self._calls(reading)
        if reading.shaped:
            # It looked like a call: asked again when it names an offered tool, noted if not.
            offered = [p for p in reading.problems if "there is no tool named" not in p]
            self.problems += offered
            self.unread += [p for p in reading.problems if p not in offered]
        return [TextDelta(raw)] if raw else []

    def _calls(self, reading: Reading) -> list[Event]:
        out: list[Event] = []
        for name, arguments in reading.calls:
            index = RECOVERED_INDEX + self.recovered
            out.append(ToolCallDelta(index, self._next_id(), name, json.dumps(arguments)))
            self.recovered += 1
        return out
