"""The parts of `acp-server run` that talk to a person: the permission question (read from a
pipe standing in for the terminal), its answers, and the styling rules of the printer; and how
`run` ends its server."""

from __future__ import annotations

import asyncio
import io
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from acp_server.cli.run.client import end_server
from acp_server.cli.run.permission import Permissions, choose_policy, option_for
from acp_server.cli.run.printer import Printer, Style

OPTIONS = [
    {"optionId": "allow_once", "name": "Allow once", "kind": "allow_once"},
    {"optionId": "allow_always", "name": "Always allow edits in src", "kind": "allow_always"},
    {"optionId": "reject_once", "name": "Reject", "kind": "reject_once"},
]
REQUEST = {"toolCall": {"toolCallId": "c1", "title": "Write a.txt"}, "options": OPTIONS}


class Terminal(io.StringIO):
    """A stderr that says it is a terminal."""

    def isatty(self) -> bool:
        return True


@pytest.fixture
def keyboard() -> Iterator[tuple[int, int]]:
    read, write = os.pipe()
    yield read, write
    os.close(read)
    os.close(write)


def asking(read: int) -> tuple[Permissions, io.StringIO]:
    err = io.StringIO()
    return Permissions("ask", Printer(io.StringIO(), err), fd=read), err


async def test_the_question_shows_the_scope_of_always_and_takes_the_answer(
    keyboard: tuple[int, int],
) -> None:
    permissions, err = asking(keyboard[0])
    os.write(keyboard[1], b"a\n")
    outcome = await permissions.answer(REQUEST)
    assert outcome == {"outcome": {"outcome": "selected", "optionId": "allow_always"}}
    assert "Allow Write a.txt?" in err.getvalue()
    assert "always (Always allow edits in src)" in err.getvalue()


async def test_end_of_input_rejects() -> None:
    read, write = os.pipe()
    os.close(write)  # Ctrl-D: nothing more will come
    try:
        outcome = await asking(read)[0].answer(REQUEST)
    finally:
        os.close(read)
    assert outcome == {"outcome": {"outcome": "selected", "optionId": "reject_once"}}


async def test_cancelling_answers_a_waiting_question_cancelled(keyboard: tuple[int, int]) -> None:
    permissions, _ = asking(keyboard[0])
    waiting = asyncio.create_task(permissions.answer(REQUEST))
    await asyncio.sleep(0.05)
    permissions.cancel()
    assert await asyncio.wait_for(waiting, 5) == {"outcome": {"outcome": "cancelled"}}


def test_the_policy_and_the_options_chosen() -> None:
    assert choose_policy(yes=True, stdin_is_terminal=True) == "yes"
    assert choose_policy(yes=False, stdin_is_terminal=True) == "ask"
    assert choose_policy(yes=False, stdin_is_terminal=False) == "refuse"
    once_only: list[dict[str, Any]] = [OPTIONS[0], OPTIONS[2]]
    assert option_for(once_only, ("allow_always",)) is None
    assert option_for(once_only, ("allow_once", "allow_always")) == "allow_once"


def test_styling_only_on_a_terminal_without_no_color() -> None:
    assert Style(Terminal(), {}).paint("x", "2") == "\x1b[2mx\x1b[0m"
    assert Style(Terminal(), {"NO_COLOR": "1"}).paint("x", "2") == "x"
    assert Style(io.StringIO(), {}).paint("x", "2") == "x"


def test_an_edit_diff_is_shown_once() -> None:
    err = io.StringIO()
    printer = Printer(io.StringIO(), err, Style(err, {}), cwd=Path("/p"))
    diff = {"type": "diff", "path": "/p/a.txt", "oldText": "old\n", "newText": "new\n"}
    for status in ("pending", "completed"):
        update = {"toolCallId": "c1", "title": "Edit a.txt", "status": status, "content": [diff]}
        kind = "tool_call" if status == "pending" else "tool_call_update"
        printer.update({"update": {"sessionUpdate": kind, **update}})
    shown = err.getvalue()
    assert shown.count("-old") == 1 and shown.count("+new") == 1
    assert "--- a/a.txt\n+++ b/a.txt\n" in shown  # relative to the session's folder
    assert "[tool completed] Edit a.txt" in shown


def test_a_server_that_does_not_end_is_killed_and_its_end_seen_before_run_returns() -> None:
    # A server that ignores the end of its input (stopped, hung). Killing it without waiting
    # let the event loop close first; the end was then reported to a closed loop ("Event loop
    # is closed" after "[stopped: interrupted]", seen on a busy machine).
    async def main() -> asyncio.subprocess.Process:
        proc = await asyncio.create_subprocess_exec(
            "sleep", "60", stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE
        )
        await end_server(proc, grace=0.2)
        return proc

    proc = asyncio.run(main())
    assert proc.returncode == -9  # killed, and that was seen while the loop still ran
