"""The ACP methods in process: an `AcpAgent` whose connection is an in-process peer.

The agent's requests (permission, fs/*) are answered by the fake editor, its session/update
notifications are kept; each session gets its backend from the factory given to the agent.
The e2e tests cover the same methods over real pipes; these run in milliseconds.
"""

from __future__ import annotations

import asyncio
import itertools
import sqlite3
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from acp_server.backends import Backend
from acp_server.backends.scripted import ScriptedBackend
from acp_server.errors import ResourceNotFound
from acp_server.protocol.handlers import AcpAgent
from acp_server.settings import store_path
from acp_server.wire.jsonrpc import Params
from tests.support.fake_editor import FakeEditor, InProcessPeer

Call = Callable[[str, Params], Awaitable[Any]]


class Editor:
    """One in-process editor driving one agent: call methods, read what it was sent."""

    def __init__(self, backends: Iterator[Backend], editor: FakeEditor | None = None) -> None:
        self.agent = AcpAgent(lambda: next(backends))  # each session its own backend
        self.peer = InProcessPeer(editor or FakeEditor())
        self.agent.conn = self.peer
        self.requests = self.agent.request_handlers()

    async def call(self, method: str, params: Params) -> Any:
        return await self.requests[method](params)

    def notify(self, method: str, params: Params) -> None:
        result = self.agent.notification_handlers()[method](params)
        assert result is None

    async def start(self, cwd: Path) -> str:
        caps = {"fs": {"readTextFile": True, "writeTextFile": True}, "terminal": False}
        await self.call("initialize", {"protocolVersion": 1, "clientCapabilities": caps})
        created = await self.call("session/new", {"cwd": str(cwd), "mcpServers": []})
        return str(created["sessionId"])

    def prompt(self, session_id: str, text: str) -> asyncio.Task[Any]:
        params = {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}
        return asyncio.create_task(self.call("session/prompt", params))

    def reply_chunks(self, session_id: str | None = None) -> list[tuple[str, str]]:
        """(session id, text) of each agent message chunk, in the order they were sent."""
        return [
            (params["sessionId"], params["update"]["content"]["text"])
            for method, params in self.peer.notifications
            if method == "session/update"
            and params["update"]["sessionUpdate"] == "agent_message_chunk"
            and session_id in (None, params["sessionId"])
        ]

    def reply(self, session_id: str) -> str:
        return "".join(text for _, text in self.reply_chunks(session_id))


def script(*rounds: dict[str, Any]) -> ScriptedBackend:
    return ScriptedBackend.from_rounds(list(rounds))


async def test_two_sessions_of_one_agent_run_different_backends_at_the_same_time(
    tmp_path: Path,
) -> None:
    alpha = script({"text": "alpha " * 8, "delay_ms": 2})
    beta = script({"text": "beta " * 8, "delay_ms": 2})
    editor = Editor(iter([alpha, beta]))
    a, b = await editor.start(tmp_path), await editor.start(tmp_path)
    answers = await asyncio.gather(editor.prompt(a, "go"), editor.prompt(b, "go"))
    assert list(answers) == [{"stopReason": "end_turn"}] * 2
    assert editor.reply(a) == "alpha " * 8
    assert editor.reply(b) == "beta " * 8
    assert (len(alpha.requests), len(beta.requests)) == (1, 1)
    order = [sid for sid, _ in editor.reply_chunks()]
    assert order.index(b) < len(order) - 1 - order[::-1].index(a), "one ran after the other"


async def test_session_cancel_ends_the_running_prompt_and_the_queued_ones(tmp_path: Path) -> None:
    backend = script({"text": "one two three four five", "delay_ms": 50}, {"text": "Again."})
    editor = Editor(iter([backend]))
    session = await editor.start(tmp_path)
    running = editor.prompt(session, "first")
    async with asyncio.timeout(5):
        while not editor.reply_chunks(session):
            await asyncio.sleep(0.001)
    queued = editor.prompt(session, "second")
    await asyncio.sleep(0)
    editor.notify("session/cancel", {"sessionId": session})
    assert await running == {"stopReason": "cancelled"}
    assert await queued == {"stopReason": "cancelled"}
    assert await editor.prompt(session, "third") == {"stopReason": "end_turn"}
    assert editor.reply(session).endswith("Again.")


async def test_a_tool_call_asks_the_editor_and_writes_through_it(tmp_path: Path) -> None:
    call = {"name": "write_file", "arguments": {"path": "notes.txt", "content": "hello\n"}}
    fake = FakeEditor(terminal=False)
    editor = Editor(iter([script({"tool_calls": [call]}, {"text": "Written."})]), fake)
    session = await editor.start(tmp_path)
    assert await editor.prompt(session, "write it") == {"stopReason": "end_turn"}
    assert len(fake.permission_requests) == 1
    assert fake.writes == [(str(tmp_path / "notes.txt"), "hello\n")]
    statuses = [u.get("status") for u in editor.peer.updates(session) if "toolCallId" in u]
    assert statuses[-1] == "completed"


async def test_a_mode_set_is_announced_both_ways_and_kept_for_resume(tmp_path: Path) -> None:
    editor = Editor(itertools.repeat(script()))
    session = await editor.start(tmp_path)
    await editor.call("session/set_mode", {"sessionId": session, "modeId": "plan"})
    kinds = [u["sessionUpdate"] for u in editor.peer.updates(session)]
    assert kinds == ["current_mode_update", "config_option_update"]
    loaded = await editor.call(
        "session/resume", {"sessionId": session, "cwd": str(tmp_path), "mcpServers": []}
    )
    assert loaded["modes"]["currentModeId"] == "plan"


async def test_a_session_is_found_by_resume_while_its_creation_is_still_being_written(
    tmp_path: Path,
) -> None:
    # The store writes on its own thread; a slow write (here: the database locked by another
    # connection for a moment) used to make load/resume/fork/close answer "not found" for a
    # session that session/new had just created.
    editor = Editor(itertools.repeat(script()))
    await editor.start(tmp_path)
    await editor.call("session/list", {})  # the store is open and has been read
    other = sqlite3.connect(store_path(), isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    asyncio.get_running_loop().call_later(0.1, other.execute, "COMMIT")
    try:
        session = await editor.start(tmp_path)
        params = {"sessionId": session, "cwd": str(tmp_path), "mcpServers": []}
        assert "modes" in await editor.call("session/resume", params)
    finally:
        await asyncio.sleep(0.15)
        other.close()


async def test_a_prompt_for_an_unknown_session_is_not_found(tmp_path: Path) -> None:
    editor = Editor(iter([script()]))
    await editor.start(tmp_path)
    with pytest.raises(ResourceNotFound):
        await editor.prompt("sess_unknown", "hello")
