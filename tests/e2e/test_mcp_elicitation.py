"""An MCP server's questions (MCP elicitation) reach the editor over real pipes, on the session
and the tool call that runs the server's tool, and the answer goes back to the server: a form
when the editor advertised `elicitation.form`, a page (URL mode, then `elicitation/complete`)
when it advertised `elicitation.url`, and a decline the server hears otherwise. The server is
ours (tests/support/mcp_server.py, on the `mcp` package); what it answered is read from the mock
LLM's next request."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.e2e.test_mcp_e2e import open_with, stdio
from tests.support.fake_editor import FakeEditor
from tests.support.mock_llm import MockLLM
from tests.support.mock_llm.view import conversation
from tests.support.raw import RawServer

Start = Callable[..., Any]


def tool(name: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": {}}]}


async def run_tool(
    server_factory: Start, mock: MockLLM, editor: FakeEditor, cwd: Path, name: str
) -> tuple[RawServer, str]:
    env = {"OPENAI_BASE_URL": f"{mock.url}/v1", "OPENAI_API_KEY": "sk-mock"}
    server: RawServer = await server_factory("--model", "openai:mock-model", env=env)
    session = await open_with(server, editor, cwd, [stdio("docs", "elicit")])
    mock.queue(tool(name), {"text": "ok"})
    params = {"sessionId": session, "prompt": [{"type": "text", "text": "go"}]}
    answer = await server.request("session/prompt", params, timeout=60)
    assert answer["result"]["stopReason"] == "end_turn"
    turns = conversation(mock.chat_requests[-1].json)
    return server, [t for t in turns if t.role == "tool"][-1].text


async def test_a_form_reaches_the_editor_and_the_answer_the_server(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path
) -> None:
    async def answer(params: dict[str, Any]) -> dict[str, Any]:
        return {"action": "accept", "content": {"colour": "teal"}}

    editor = FakeEditor(fs=False, terminal=False, answer=answer)
    server, heard = await run_tool(
        server_factory, mock_llm, editor, tmp_path, "mcp__docs__pick_colour"
    )
    assert heard == "colour: teal"
    (asked,) = editor.elicitations
    assert asked["mode"] == "form" and "Which colour" in asked["message"]
    assert "'docs'" in asked["message"]  # says which server asks
    assert asked["requestedSchema"]["properties"]["colour"]["type"] == "string"
    call = next(
        f["params"]["update"]
        for f in server.seen
        if f.get("method") == "session/update"
        and f["params"]["update"]["sessionUpdate"] == "tool_call"
    )
    assert asked["toolCallId"] == call["toolCallId"]


async def test_without_the_capability_the_server_hears_a_decline(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path
) -> None:
    editor = FakeEditor(fs=False, terminal=False)
    server, heard = await run_tool(
        server_factory, mock_llm, editor, tmp_path, "mcp__docs__pick_colour"
    )
    assert heard == "no colour: the user chose decline"
    assert not [f for f in server.seen if f.get("method") == "elicitation/create"]


async def test_a_page_opens_in_url_mode_and_its_completion_is_passed_on(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path
) -> None:
    async def answer(params: dict[str, Any]) -> dict[str, Any]:
        return {"action": "accept"}

    editor = FakeEditor(fs=False, terminal=False, answer=answer, url=True)
    server, heard = await run_tool(server_factory, mock_llm, editor, tmp_path, "mcp__docs__sign_in")
    assert heard == "sign-in: accept"
    (asked,) = editor.elicitations
    assert asked["mode"] == "url" and asked["url"] == "https://login.example.test/start"
    assert asked["elicitationId"] == "login-1"
    async with asyncio.timeout(10):
        while not [f for f in server.seen if f.get("method") == "elicitation/complete"]:
            await asyncio.sleep(0.05)
    done = [f for f in server.seen if f.get("method") == "elicitation/complete"]
    assert [f["params"] for f in done] == [{"elicitationId": "login-1"}]


async def test_a_page_is_declined_when_the_editor_takes_forms_only(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path
) -> None:
    async def answer(params: dict[str, Any]) -> dict[str, Any]:
        return {"action": "accept"}

    editor = FakeEditor(fs=False, terminal=False, answer=answer)  # no url
    _, heard = await run_tool(server_factory, mock_llm, editor, tmp_path, "mcp__docs__sign_in")
    assert heard == "sign-in: decline"
    assert not editor.elicitations


async def test_server_everythings_form_reaches_the_editor_and_its_answer_the_server(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path
) -> None:
    """A server nobody here wrote: every field type it asks for (formats, titled and untitled
    single and multiple choices) passes through as a valid ACP form."""
    from tests.e2e.test_mcp_real_servers import NODE, PACKAGES

    async def answer(params: dict[str, Any]) -> dict[str, Any]:
        return {"action": "accept", "content": {"name": "Ada", "integer": 7, "check": True}}

    editor = FakeEditor(fs=False, terminal=False, answer=answer)
    env = {"OPENAI_BASE_URL": f"{mock_llm.url}/v1", "OPENAI_API_KEY": "sk-mock"}
    server: RawServer = await server_factory("--model", "openai:mock-model", env=env)
    everything = {
        "name": "everything",
        "command": str(NODE),
        "args": [str(PACKAGES / "server-everything/dist/index.js"), "stdio"],
        "env": [],
    }
    session = await open_with(server, editor, tmp_path, [everything])
    mock_llm.queue(tool("mcp__everything__trigger-elicitation-request"), {"text": "ok"})
    params = {"sessionId": session, "prompt": [{"type": "text", "text": "go"}]}
    answered = await server.request("session/prompt", params, timeout=60)
    assert answered["result"]["stopReason"] == "end_turn"
    (asked,) = editor.elicitations
    fields = asked["requestedSchema"]["properties"]
    assert {"name", "email", "titledMultipleSelectEnum"} <= set(fields)
    result = [t for t in conversation(mock_llm.chat_requests[-1].json) if t.role == "tool"][-1]
    assert "- Name: Ada" in result.text and "- Favorite Integer: 7" in result.text


async def test_a_cancel_while_a_servers_form_is_open_withdraws_it(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path
) -> None:
    opened = asyncio.Event()
    never: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()

    async def answer(params: dict[str, Any]) -> dict[str, Any]:
        opened.set()
        return await never

    editor = FakeEditor(fs=False, terminal=False, answer=answer)
    env = {"OPENAI_BASE_URL": f"{mock_llm.url}/v1", "OPENAI_API_KEY": "sk-mock"}
    server: RawServer = await server_factory("--model", "openai:mock-model", env=env)
    session = await open_with(server, editor, tmp_path, [stdio("docs", "elicit")])
    mock_llm.queue(tool("mcp__docs__pick_colour"), {"text": "after"})
    params = {"sessionId": session, "prompt": [{"type": "text", "text": "go"}]}
    req = await server.call("session/prompt", params)
    await asyncio.wait_for(opened.wait(), 30)
    await server.notify("session/cancel", {"sessionId": session})
    answered, _ = await server.response(req, timeout=20)
    assert answered["result"]["stopReason"] == "cancelled"
    asked = next(f for f in server.seen if f.get("method") == "elicitation/create")
    async with asyncio.timeout(10):
        while not [f for f in server.seen if f.get("method") == "$/cancel_request"]:
            await asyncio.sleep(0.05)
    withdrawn = [f for f in server.seen if f.get("method") == "$/cancel_request"]
    assert [f["params"]["requestId"] for f in withdrawn] == [asked["id"]]
    never.cancel()
    answered = await server.request("session/prompt", params, timeout=30)
    assert answered["result"]["stopReason"] == "end_turn"  # the session goes on
