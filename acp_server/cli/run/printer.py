"""How `acp-server run` shows a turn: the reply on stdout, everything else on stderr.

The reply is plain text always (it is what a script keeps). On stderr go thoughts, tool calls
with their status and the diff of each edit, plans and notices. Styling (dim thoughts, coloured
diffs) is used only where the stream is a terminal and NO_COLOR is unset: piped, every byte is
plain.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

from acp_server.cli.export import unified_diff
from acp_server.cli.run.output import command_output, tail
from acp_server.tools.commands.shell import NO_OUTPUT
from acp_server.wire.jsonrpc import Params

DIM, RED, GREEN, CYAN = "2", "31", "32", "36"


class Style:
    """ANSI styling for one stream: on only when it is a terminal and NO_COLOR is unset."""

    def __init__(self, stream: TextIO, environ: Mapping[str, str] = os.environ) -> None:
        self.terminal = is_terminal(stream)  # a person reads it: command output is shown
        self.on = self.terminal and not environ.get("NO_COLOR")

    def paint(self, text: str, code: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.on and text else text


def is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a closed or fake stream
        return False


def diff_lines(item: dict[str, Any], style: Style, cwd: Path) -> list[str]:
    """An ACP diff item as unified-diff lines (the path relative to `cwd` when inside it),
    coloured when the style is on."""
    path = str(item.get("path", ""))
    if Path(path).is_relative_to(cwd):
        path = str(Path(path).relative_to(cwd))
    old = item.get("oldText")
    text = unified_diff(path, old if isinstance(old, str) else None, str(item.get("newText") or ""))
    if not text:
        return [f"(no changes to {path})"]
    return [_paint_diff_line(line, style) for line in text.split("\n")]


def _paint_diff_line(line: str, style: Style) -> str:
    if line.startswith(("+++", "---")):
        return line
    if line.startswith("+"):
        return style.paint(line, GREEN)
    if line.startswith("-"):
        return style.paint(line, RED)
    return style.paint(line, CYAN) if line.startswith("@@") else line


class ToolLog:
    """Tool calls on stderr: a line when one starts, one when it ends (with why, if it failed),
    and the diff of each edit, shown once however often the editor is sent it."""

    def __init__(self, err: TextIO, style: Style, cwd: Path) -> None:
        self.err = err
        self.style = style
        self.cwd = cwd
        self.titles: dict[str, str] = {}
        self.kinds: dict[str, str] = {}
        self.shown: set[tuple[str, str]] = set()  # (path, new text) of the diffs shown

    def title(self, call: dict[str, Any]) -> str:
        call_id = str(call.get("toolCallId"))
        if call.get("title"):
            self.titles[call_id] = str(call["title"])
        return self.titles.get(call_id, "a tool call")

    def update(self, update: dict[str, Any]) -> None:
        title = self.title(update)
        if update.get("sessionUpdate") == "tool_call":
            self.kinds[str(update.get("toolCallId"))] = str(update.get("kind"))
            self._say(f"\n[tool] {title}")
        self.diffs(update)
        status = update.get("status")
        if update.get("sessionUpdate") == "tool_call_update" and status in ("completed", "failed"):
            self.output(update)
        if update.get("sessionUpdate") == "tool_call_update" and status == "completed":
            self._say(self.style.paint(f"[tool completed] {title}", GREEN))
        elif update.get("sessionUpdate") == "tool_call_update" and status == "failed":
            why = _first_text(update.get("content"))
            self._say(self.style.paint(f"[tool failed] {title}", RED) + (f": {why}" if why else ""))

    def output(self, update: dict[str, Any]) -> None:
        """On a terminal, the end of what a finished command printed, dimmed."""
        if not self.style.terminal or self.kinds.get(str(update.get("toolCallId"))) != "execute":
            return
        output = command_output(update.get("content"))
        if not output or output == NO_OUTPUT:
            return
        lines, left_out = tail(output)
        if left_out:
            noun = "line" if left_out == 1 else "lines"
            self._say(self.style.paint(f"  … {left_out} earlier {noun} not shown", DIM))
        for line in lines:
            self._say(self.style.paint(f"  {line}", DIM))

    def details(self, call: dict[str, Any]) -> None:
        """What a call asking for permission will do: its diffs, or the text describing it
        (the command and where it runs, or the paths)."""
        self.diffs(call)
        for item in call.get("content") or []:
            block = item.get("content") if isinstance(item, dict) else None
            if isinstance(block, dict) and block.get("type") == "text" and block.get("text"):
                self._say(str(block["text"]).strip())

    def diffs(self, call: dict[str, Any]) -> None:
        """Print the diffs in a tool call's content that were not printed yet."""
        for item in call.get("content") or []:
            if not isinstance(item, dict) or item.get("type") != "diff":
                continue
            key = (str(item.get("path")), str(item.get("newText")))
            if key not in self.shown:
                self.shown.add(key)
                self._say("\n".join(diff_lines(item, self.style, self.cwd)))

    def _say(self, line: str) -> None:
        print(line, file=self.err, flush=True)


def _first_text(content: Any) -> str:
    """The first line of the first text in a tool call's content ('' if none)."""
    for item in content or []:
        block = item.get("content") if isinstance(item, dict) else None
        if isinstance(block, dict) and block.get("type") == "text" and block.get("text"):
            return str(block["text"]).strip().split("\n", 1)[0]
    return ""


class Printer:
    """Renders session/update notifications: the reply on stdout, the rest on stderr.
    Separate messages (one per model round) are separated by a blank line.

    The first chunk of each new message is held back until anything else arrives. A turn that
    fails shows its failure to an editor as one last message of one chunk; held back, it can go
    to stderr with the failure instead of into the reply (see `finish`).
    """

    def __init__(
        self, out: TextIO, err: TextIO, style: Style | None = None, cwd: Path | None = None
    ) -> None:
        self.out = out
        self.err = err
        self.style = style or Style(err)
        self.tools = ToolLog(err, self.style, (cwd or Path.cwd()).resolve())
        self.in_thought = False
        self.muted = False  # while a stored session is restored: nothing is shown
        self.wrote = False  # whether stdout got any reply text
        self.tail = ""  # the last characters written to stdout
        self.current: str | None = None  # the messageId being written to stdout
        self.held: tuple[str | None, str] | None = None  # a new message's first chunk

    def update(self, params: Params) -> None:
        update = params.get("update") or {}
        kind = update.get("sessionUpdate")
        content = update.get("content") or {}
        if self.muted:
            return
        if kind == "agent_message_chunk" and content.get("type") == "text":
            self._end_thought()
            self._reply(update.get("messageId"), content["text"])
            return
        self.release()
        if kind == "agent_thought_chunk" and content.get("type") == "text":
            self._thought(content["text"])
            return
        self._end_thought()
        self._activity(kind, update)

    def interject(self) -> None:
        """Make room on stderr for something that is not part of the turn's stream."""
        self.release()
        self._end_thought()

    def _thought(self, text: str) -> None:
        if not self.in_thought:
            self.err.write("\n" + self.style.paint("[thinking] ", DIM))
            self.in_thought = True
        self.err.write(self.style.paint(text, DIM))
        self.err.flush()

    def _activity(self, kind: Any, update: dict[str, Any]) -> None:
        if kind in ("tool_call", "tool_call_update"):
            self.tools.update(update)
        elif kind == "plan":
            for entry in update.get("entries", []):
                print(f"[plan] {entry.get('status')}: {entry.get('content')}", file=self.err)
        elif kind == "notice":
            detail = f": {update['description']}" if update.get("description") else ""
            print(f"[{update.get('severity')}] {update.get('title')}{detail}", file=self.err)

    def _reply(self, message_id: str | None, text: str) -> None:
        if self.held is not None and self.held[0] != message_id:
            self.release()
        if self.held is not None:  # the held message goes on: it is a reply
            self.release()
            self._write(text)
        elif self.wrote and message_id == self.current:
            self._write(text)
        else:
            self.held = (message_id, text)

    def release(self) -> None:
        """Print the held first chunk of a message."""
        if self.held is None:
            return
        message_id, text = self.held
        self.held = None
        if self.wrote and message_id != self.current:
            if not self.tail.endswith("\n\n"):
                self.out.write("\n" if self.tail.endswith("\n") else "\n\n")
            text = text.lstrip("\n")
        self.current = message_id
        self._write(text)

    def finish(self, failure: str | None) -> None:
        """The turn is over: end the reply, leaving out the failure's own message."""
        held = self.held
        if held is not None and failure is not None and held[1].strip() == failure.strip():
            self.held = None
        self.release()
        self._end_thought()
        if self.wrote and not self.tail.endswith("\n"):
            self._write("\n")

    def _write(self, text: str) -> None:
        if text:
            self.out.write(text)
            self.out.flush()
            self.wrote = True
            self.tail = (self.tail + text)[-2:]

    def _end_thought(self) -> None:
        if self.in_thought:
            self.err.write("\n")
            self.in_thought = False
