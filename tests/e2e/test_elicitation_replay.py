"""Questions after the fact and in subagents, over real pipes: a question and its answer are
stored with the session and `session/load` shows them as the user saw them (the model's
ask_user, and an MCP server's question in its tool call); a subagent's question goes to the
editor under the child's session id when the client opted in to subagents, else as the
parent's own tool call, like its permission requests."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_mcp_e2e import stdio
from tests.support.fake_editor import FakeEditor
from tests.support.mock_llm import MockLLM
from tests.support.raw import Frame, RawServer

Start = Callable[..., Any]


def calls(name: str, call_id: str = "call_1", **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"id": call_id, "name": name, "arguments": arguments}]}


async def accept(params: dict[str, Any]) -> dict[str, Any]:
    first = next(iter(params["requestedSchema"]["properties"]))
    return {"action": "accept", "content": {first: "teal"}}


async def opened(
    server_factory: Start, mock: MockLLM, cwd: Path, caps: dict[str, Any], mcp: list[Any]
) -> tuple[RawServer, str, FakeEditor]:
    env = {"OPENAI_BASE_URL": f"{mock.url}/v1", "OPENAI_API_KEY": "sk-mock"}
    server: RawServer = await server_factory("--model", "openai:mock-model", env=env)
    editor = FakeEditor(fs=False, terminal=False, answer=accept)
    editor.attach(server)
    init = {"protocolVersion": 1, "clientCapabilities": {**editor.capabilities(), **caps}}
    await server.request("initialize", init)
    new = await server.request("session/new", {"cwd": str(cwd), "mcpServers": mcp})
    return server, str(new["result"]["sessionId"]), editor


async def prompt(server: RawServer, session: str) -> list[Frame]:
    params = {"sessionId": session, "prompt": [{"type": "text", "text": "go"}]}
    answer, frames = await server.response(await server.call("session/prompt", params), 60)
    assert answer["result"]["stopReason"] == "end_turn"
    return frames


def shown_text(frames: list[Frame]) -> str:
    """Every text the tool calls showed, in order."""
    texts = []
    for frame in frames:
        update = frame.get("params", {}).get("update", {}) if frame.get("method") else {}
        for item in update.get("content") or [] if "toolCallId" in update else []:
            if item.get("type") == "content" and item["content"].get("type") == "text":
                texts.append(item["content"]["text"])
    return "\n".join(texts)


async def loaded(server_factory: Start, cwd: Path, session: str) -> list[Frame]:
    again: RawServer = await server_factory("--model", "openai:mock-model")
    editor = FakeEditor(fs=False, terminal=False, answer=accept)
    caps = editor.capabilities()
    await again.request("initialize", {"protocolVersion": 1, "clientCapabilities": caps})
    load = {"sessionId": session, "cwd": str(cwd), "mcpServers": []}
    answer, replay = await again.response(await again.call("session/load", load), 30)
    assert "result" in answer
    return replay


async def test_load_shows_the_question_and_the_answer(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path
) -> None:
    server, session, _ = await opened(server_factory, mock_llm, tmp_path, {}, [])
    mock_llm.queue(calls("ask_user", question="Which colour?"), {"text": "ok"})
    live = shown_text(await prompt(server, session))
    assert "Which colour?\n\nThe user answered: teal" in live
    replay = shown_text(await loaded(server_factory, tmp_path, session))
    assert "Which colour?\n\nThe user answered: teal" in replay


async def test_load_shows_an_mcp_servers_question(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path
) -> None:
    mcp = [stdio("docs", "elicit")]
    server, session, _ = await opened(server_factory, mock_llm, tmp_path, {}, mcp)
    mock_llm.queue(calls("mcp__docs__pick_colour"), {"text": "ok"})
    live = shown_text(await prompt(server, session))
    question = "The MCP server 'docs' asks: Which colour should the theme use?"
    assert f"{question}\n\nThe user answered." in live
    replay = shown_text(await loaded(server_factory, tmp_path, session))
    assert f"{question}\n\nThe user answered." in replay and "colour: teal" in replay


@pytest.mark.parametrize("opted_in", [True, False], ids=["child-session", "as-the-parent"])
async def test_a_subagents_question_goes_where_its_permission_requests_go(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path, opted_in: bool
) -> None:
    caps: dict[str, Any] = {"subagents": {}} if opted_in else {}
    server, parent, editor = await opened(server_factory, mock_llm, tmp_path, caps, [])
    job = {"description": "Ask", "prompt": "Ask the user for a colour.", "tools": ["ask_user"]}
    mock_llm.queue(
        calls("task", "call_task", **job),  # the parent
        calls("ask_user", "call_child", question="Which colour?"),  # the child
        {"text": "The user said teal."},  # the child's answer
        {"text": "Parent done."},
    )
    frames = await prompt(server, parent)
    (asked,) = editor.elicitations
    updates = [f["params"] for f in frames if f.get("method") == "session/update"]
    task_call = next(
        u["update"]["toolCallId"]
        for u in updates
        if u["sessionId"] == parent and u["update"].get("title") == "Subagent: Ask"
    )
    if opted_in:
        child = next(
            u["update"]["sessionId"]
            for u in updates
            if u["update"]["sessionUpdate"] == "subagent_update" and "title" in u["update"]
        )
        assert asked["sessionId"] == child != parent
        states = [
            u["update"]["state"]["state"]
            for u in updates
            if u["update"]["sessionUpdate"] == "subagent_update"
        ]
        assert states[:3] == ["running", "requires_action", "running"]
        assert asked["toolCallId"] == "call_child"
    else:
        assert asked["sessionId"] == parent and asked["toolCallId"] == task_call == "call_task"
