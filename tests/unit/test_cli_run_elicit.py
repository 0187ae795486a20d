"""`acp-server run`'s answers to a form (cli/run/elicit), on a real pseudo-terminal: each field in
turn, a choice with one key, several as numbers, text and yes/no as lines; Ctrl-D declines,
a cancel of the turn (Ctrl-C) cancels, and piped stdin declines saying why."""

from __future__ import annotations

import asyncio
import io
import os
import pty
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from acp_server.cli.run.elicit import Questions
from acp_server.cli.run.permission import Permissions
from acp_server.cli.run.printer import Printer

FORM = {
    "sessionId": "s",
    "mode": "form",
    "message": "Set up the project",
    "requestedSchema": {
        "type": "object",
        "properties": {
            "db": {
                "type": "string",
                "title": "Database",
                "oneOf": [
                    {"const": "pg", "title": "Postgres"},
                    {"const": "lite", "title": "SQLite"},
                ],
            },
            "checks": {
                "type": "array",
                "title": "Checks",
                "items": {"type": "string", "enum": ["lint", "test", "bench"]},
            },
            "name": {"type": "string", "title": "Name"},
            "public": {"type": "boolean", "title": "Public"},
            "port": {"type": "integer", "title": "Port"},
        },
        "required": ["db", "name"],
    },
}


@pytest.fixture
async def terminal() -> AsyncIterator[tuple[int, Questions, io.StringIO]]:
    leader, follower = pty.openpty()
    err = io.StringIO()
    permissions = Permissions("ask", Printer(io.StringIO(), err, cwd=Path.cwd()), fd=follower)
    yield leader, Questions(permissions, fd=follower), err
    os.close(leader)
    os.close(follower)


async def typed(leader: int, err: io.StringIO, after: str, keys: bytes) -> None:
    """Type `keys` once stderr shows `after` (within 10 s)."""
    async with asyncio.timeout(10):
        while after not in err.getvalue():
            await asyncio.sleep(0.01)
    os.write(leader, keys)


async def test_every_field_is_asked_in_turn(terminal: tuple[int, Questions, io.StringIO]) -> None:
    leader, questions, err = terminal
    asking = asyncio.create_task(questions.answer(FORM))
    await typed(leader, err, "Press 1-2:", b"2")
    await typed(leader, err, "e.g. 1 3", b"3 1 9\n")
    await typed(leader, err, "Name:", b"demo\n")
    await typed(leader, err, "Public (optional):", b"y\n")
    await typed(leader, err, "Port (optional):", b"\n")  # left out
    async with asyncio.timeout(10):
        answer: dict[str, Any] = await asking
    assert answer == {
        "action": "accept",
        "content": {"db": "lite", "checks": ["bench", "lint"], "name": "demo", "public": True},
    }
    assert "[question] Set up the project" in err.getvalue() and "[2] SQLite" in err.getvalue()


async def test_ctrl_d_declines(terminal: tuple[int, Questions, io.StringIO]) -> None:
    leader, questions, err = terminal
    asking = asyncio.create_task(questions.answer(FORM))
    await typed(leader, err, "Press 1-2:", b"\x04")
    async with asyncio.timeout(10):
        assert await asking == {"action": "decline"}


async def test_a_cancelled_turn_cancels(terminal: tuple[int, Questions, io.StringIO]) -> None:
    _, questions, err = terminal
    asking = asyncio.create_task(questions.answer(FORM))
    async with asyncio.timeout(10):
        while "Press 1-2:" not in err.getvalue():
            await asyncio.sleep(0.01)
    questions.permissions.cancel()  # what Ctrl-C does in `run`
    async with asyncio.timeout(10):
        assert await asking == {"action": "cancel"}


async def test_piped_stdin_declines_and_says_why() -> None:
    err = io.StringIO()
    permissions = Permissions("refuse", Printer(io.StringIO(), err, cwd=Path.cwd()))
    questions = Questions(permissions)
    questions.fd = None  # as with stdin piped
    assert await questions.answer(FORM) == {"action": "decline"}
    assert "stdin is not a terminal" in err.getvalue()
