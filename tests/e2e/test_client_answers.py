"""How the agent takes the editor's answers to its own requests: a permission answered
`cancelled` ends the turn as cancelled; the permission request carries a ToolCallUpdate (not a
session update); an error the editor answers becomes a worded tool failure with what the
editor said, logged without a traceback."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.fake_editor import FakeEditor
from tests.support.raw import ErrorReply, Frame, RawServer, stop_reason

Start = Callable[..., Any]


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def updates_of(frames: list[Frame]) -> list[dict[str, Any]]:
    return [f["params"]["update"] for f in frames if f.get("method") == "session/update"]


def agent_text(frames: list[Frame]) -> str:
    return "".join(
        u["content"]["text"]
        for u in updates_of(frames)
        if u["sessionUpdate"] == "agent_message_chunk"
    )


def final_texts(frames: list[Frame]) -> list[tuple[str, str]]:
    """(status, text) of every tool_call_update that ends a call."""
    return [
        (u["status"], u["content"][0]["content"]["text"])
        for u in updates_of(frames)
        if u["sessionUpdate"] == "tool_call_update" and u.get("status") in ("completed", "failed")
    ]


async def open_session(server: RawServer, editor: FakeEditor, cwd: Path, mode: str) -> str:
    editor.attach(server)
    await server.request(
        "initialize", {"protocolVersion": 1, "clientCapabilities": editor.capabilities()}
    )
    answer = await server.request("session/new", {"cwd": str(cwd), "mcpServers": []})
    session = str(answer["result"]["sessionId"])
    await server.request("session/set_mode", {"sessionId": session, "modeId": mode})
    return session


async def prompt(server: RawServer, session: str, text: str) -> tuple[Frame, list[Frame]]:
    req = await server.call(
        "session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": text}]}
    )
    return await server.response(req, timeout=30)


async def test_a_permission_answered_cancelled_ends_the_turn_as_cancelled(
    server_factory: Start, script: Any, tmp_path: Path
) -> None:
    """CodeCompanion's "Cancel" choice answers `cancelled` without sending session/cancel."""
    after = {
        "text": "Fine again.",
        "expect": {
            "roles": ["user", "assistant", "tool", "user"],
            "contains": ["cancelled this tool call", "next question"],
        },
    }
    rounds = [call("run_command", command="echo hi"), after]
    server: RawServer = await server_factory("--script", str(script(rounds)))
    editor = FakeEditor(fs=False, terminal=False, choose=lambda params: None)
    session = await open_session(server, editor, tmp_path, "ask")

    answer, before = await prompt(server, session, "run it")
    assert stop_reason(answer["result"]) == "cancelled"
    assert len(editor.permission_requests) == 1
    ((status, text),) = final_texts(before)
    assert status == "failed" and "cancelled" in text
    assert agent_text(before) == ""  # the model was not asked again

    answer, before = await prompt(server, session, "next question")
    assert stop_reason(answer["result"]) == "end_turn"
    assert agent_text(before) == "Fine again."  # the history the model saw was consistent


async def test_the_permission_request_carries_a_tool_call_update_not_a_session_update(
    server_factory: Start, script: Any, tmp_path: Path
) -> None:
    rounds = [call("run_command", command="echo hi"), {"text": "Done."}]
    server: RawServer = await server_factory("--script", str(script(rounds)))
    editor = FakeEditor(fs=False, terminal=False)
    session = await open_session(server, editor, tmp_path, "ask")
    answer, _ = await prompt(server, session, "run it")
    assert stop_reason(answer["result"]) == "end_turn"
    (request,) = editor.permission_requests
    tool_call = request["toolCall"]
    assert "sessionUpdate" not in tool_call
    assert tool_call["toolCallId"] and tool_call["title"] == "Run `echo hi`"


DETAILS = {"limit": 4, "open": ["term_1", "term_2"], "note": "x" * 5000}


@pytest.mark.parametrize(
    ("method", "tool", "mode"),
    [
        ("terminal/create", call("run_command", command="echo hi"), "bypass"),
        ("fs/read_text_file", call("read_file", path="notes.txt"), "ask"),
        ("fs/write_text_file", call("write_file", path="new.txt", content="x"), "bypass"),
        ("session/request_permission", call("run_command", command="echo hi"), "ask"),
    ],
    ids=["terminal", "read", "write", "permission"],
)
async def test_an_error_the_editor_answers_is_a_worded_tool_failure(
    server_factory: Start,
    script: Any,
    tmp_path: Path,
    method: str,
    tool: dict[str, Any],
    mode: str,
) -> None:
    (tmp_path / "notes.txt").write_text("alpha\n", encoding="utf-8")
    seen = {"text": "I see.", "expect": {"contains": ["Quota exceeded", '"limit": 4', "term_2"]}}
    server: RawServer = await server_factory(
        "--script", str(script([tool, seen])), "--log-level", "warning", "--log-stderr"
    )
    editor = FakeEditor(fs=True, terminal=True)
    session = await open_session(server, editor, tmp_path, mode)

    async def refuse(params: dict[str, Any]) -> dict[str, Any]:
        raise ErrorReply(-32000, "Quota exceeded", DETAILS)

    server.handlers[method] = refuse
    answer, before = await prompt(server, session, "go")
    assert stop_reason(answer["result"]) == "end_turn"
    ((status, text),) = final_texts(before)
    assert status == "failed"
    assert method in text and "Quota exceeded" in text and '"limit": 4' in text
    assert "unexpectedly" not in text and "RemoteError" not in text
    assert len(text) < 1500, "the editor's details are capped"
    assert agent_text(before) == "I see."  # the model read the same words
    await server.close_stdin()
    assert await server.wait() == 0
    log = await server.stderr_text()
    assert "Quota exceeded" in log
    assert "Traceback" not in log
