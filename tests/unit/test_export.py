"""The Markdown export keeps tool output from being read as Markdown.

A README read by a tool must stay inside a code block: its headings must not become the
transcript's headings, and its own code fences must not close ours.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

from acp_server.cli.export import render_markdown
from acp_server.messages import Message, TextPart, ToolCall, text_message
from acp_server.store.database import SessionRow, Store
from acp_server.store.transcript import Recorder

README = "# My project\n\nInstall it:\n\n```sh\npip install .\n```\n\n## Usage\n\nRun it.\n"
SHELL_SHOWN = "Exit code 0\n````\n# built\n```\n````"  # as the shell tool shows output


def outside_fences(markdown: str) -> list[str]:
    """The lines a Markdown reader does not put in a fenced code block (CommonMark fences)."""
    outside: list[str] = []
    fence = ""
    for line in markdown.splitlines():
        if fence:
            if re.fullmatch(rf"{fence}`*\s*", line):
                fence = ""
        elif match := re.match(r"(`{3,})[^`]*$", line):
            fence = match.group(1)
        else:
            outside.append(line)
    return outside


def tool_turn(recorder: Recorder, call: ToolCall, shown: str, result: str) -> None:
    recorder.message(Message("assistant", (), (call,), message_id=f"msg_{call.id}"))
    announce: dict[str, Any] = {
        "sessionUpdate": "tool_call",
        "toolCallId": call.id,
        "title": call.name,
        "status": "pending",
    }
    recorder.shown(announce)
    text = {"type": "content", "content": {"type": "text", "text": shown}}
    done = {"sessionUpdate": "tool_call_update", "toolCallId": call.id, "status": "completed"}
    recorder.shown({**done, "content": [text]})
    recorder.message(text_message("tool", result, tool_call_id=call.id))


async def exported(tmp_path: Path) -> str:
    store = Store(tmp_path / "sessions.sqlite3")
    try:
        now = time.time()
        store.create(SessionRow("s1", str(tmp_path), [], "Read it", now, now, {"mode": "ask"}))
        recorder = Recorder(store, "s1")
        prompt = {"type": "text", "text": "Read the README"}
        recorder.shown({"sessionUpdate": "user_message_chunk", "content": prompt})
        recorder.message(Message("user", (TextPart("Read the README"),)))
        tool_turn(recorder, ToolCall("c1", "read_file", {"path": "README.md"}), README, README)
        tool_turn(recorder, ToolCall("c2", "run_command", {"command": "make"}), SHELL_SHOWN, "")
        recorder.turn_ended("end_turn")
        recorder.flush()
        await store.flush()
        row = store.get("s1")
        assert row is not None
        return render_markdown(row, store)
    finally:
        store.close()


async def test_a_markdown_file_read_by_a_tool_stays_in_a_code_block(tmp_path: Path) -> None:
    text = await exported(tmp_path)
    outside = outside_fences(text)
    assert "# My project" not in outside and "## Usage" not in outside
    assert "Run it." not in outside and "pip install ." not in outside
    assert "```sh\npip install .\n```" in text  # the file's own fence, kept as content


async def test_command_output_is_one_code_block_with_its_status(tmp_path: Path) -> None:
    text = await exported(tmp_path)
    outside = outside_fences(text)
    assert "# built" not in outside and "Exit code 0" not in outside
    assert "````\nExit code 0\n# built\n```\n````" in text
