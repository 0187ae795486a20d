"""Questions to the user over real pipes (ACP elicitation, form mode): the model's ask_user is
offered only to an editor that advertised `elicitation.form`; the editor's accept, decline and
cancel each reach the model in its next request; a `session/cancel` while the form is open
withdraws it and ends the turn `cancelled`, and the session goes on. Every frame is checked
against the schema (`server_factory`)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.fake_editor import FakeEditor
from tests.support.mock_llm import MockLLM
from tests.support.mock_llm.view import conversation, tool_names
from tests.support.raw import RawServer

Start = Callable[..., Any]


def ask(**arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": "ask_user", "arguments": arguments}]}


async def started(
    server_factory: Start, mock: MockLLM, editor: FakeEditor, cwd: Path
) -> tuple[RawServer, str]:
    env = {
        "OPENAI_BASE_URL": f"{mock.url}/v1",
        "OPENAI_API_KEY": "sk-mock",
        # A model's window as hosted ones have: at the 8,192 tokens assumed for a model nobody
        # described, the questions to the user are the first tools left out (context/profile).
        "ACP_SERVER_CONTEXT_WINDOW": "32768",
    }
    server: RawServer = await server_factory("--model", "openai:mock-model", env=env)
    editor.attach(server)
    caps = editor.capabilities()
    await server.request("initialize", {"protocolVersion": 1, "clientCapabilities": caps})
    new = await server.request("session/new", {"cwd": str(cwd), "mcpServers": []})
    return server, str(new["result"]["sessionId"])


async def prompt(server: RawServer, session: str, text: str = "go") -> str:
    params = {"sessionId": session, "prompt": [{"type": "text", "text": text}]}
    answer = await server.request("session/prompt", params, timeout=30)
    return str(answer["result"]["stopReason"])


def last_tool_result(mock: MockLLM) -> str:
    turns = conversation(mock.chat_requests[-1].json)
    return [t for t in turns if t.role == "tool"][-1].text


@pytest.mark.parametrize(
    ("reply", "heard"),
    [
        ({"action": "accept", "content": {"answer": "Postgres"}}, "The user answered: Postgres"),
        ({"action": "decline"}, "The user chose not to answer (they declined it)"),
        ({"action": "cancel"}, "The user chose not to answer (they cancelled the question)"),
    ],
    ids=["accept", "decline", "cancel"],
)
async def test_the_answer_reaches_the_model(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path, reply: dict[str, Any], heard: str
) -> None:
    async def answer(params: dict[str, Any]) -> dict[str, Any]:
        return reply

    editor = FakeEditor(answer=answer)
    server, session = await started(server_factory, mock_llm, editor, tmp_path)
    mock_llm.queue(ask(question="Which database?", choices=["Postgres", "SQLite"]), {"text": "ok"})
    assert await prompt(server, session) == "end_turn"

    assert "ask_user" in tool_names(mock_llm.chat_requests[0].json)
    (asked,) = editor.elicitations
    assert asked["sessionId"] == session and asked["mode"] == "form"
    assert asked["message"] == "Which database?"
    assert asked["toolCallId"]  # scoped to the call that asked
    choices = asked["requestedSchema"]["properties"]["answer"]["oneOf"]
    assert [c["const"] for c in choices] == ["Postgres", "SQLite"]
    assert last_tool_result(mock_llm).startswith(heard)


async def test_several_choices_and_words_of_their_own(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path
) -> None:
    async def answer(params: dict[str, Any]) -> dict[str, Any]:
        return {"action": "accept", "content": {"answer": ["lint", "test"], "other": "and docs"}}

    editor = FakeEditor(answer=answer)
    server, session = await started(server_factory, mock_llm, editor, tmp_path)
    question = ask(
        question="Which checks?", choices=["lint", "test", "bench"], multiple=True, free_text=True
    )
    mock_llm.queue(question, {"text": "ok"})
    assert await prompt(server, session) == "end_turn"
    form = editor.elicitations[0]["requestedSchema"]["properties"]
    assert form["answer"]["type"] == "array" and form["answer"]["items"]["enum"][2] == "bench"
    assert form["other"]["type"] == "string"
    assert (
        last_tool_result(mock_llm)
        == "The user answered: lint, test (and in their own words) and docs"
    )


async def test_without_the_capability_nothing_is_asked_and_the_tool_is_not_offered(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path
) -> None:
    editor = FakeEditor()  # no elicitation advertised
    server, session = await started(server_factory, mock_llm, editor, tmp_path)
    mock_llm.queue(ask(question="Which database?"), {"text": "ok"})
    assert await prompt(server, session) == "end_turn"
    first = mock_llm.chat_requests[0].json
    assert "ask_user" not in tool_names(first)
    assert "ask_user" not in conversation(first)[0].text  # nor in the system prompt
    assert not editor.elicitations
    assert not [f for f in server.seen if f.get("method") == "elicitation/create"]
    assert "Unknown tool 'ask_user'" in last_tool_result(mock_llm)


async def test_a_cancel_while_the_form_is_open_ends_the_turn_and_the_session_goes_on(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path
) -> None:
    opened = asyncio.Event()
    never: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()

    async def answer(params: dict[str, Any]) -> dict[str, Any]:
        opened.set()
        return await never  # the user does not answer

    editor = FakeEditor(answer=answer)
    server, session = await started(server_factory, mock_llm, editor, tmp_path)
    mock_llm.queue(ask(question="Which database?"), {"text": "after"})
    params = {"sessionId": session, "prompt": [{"type": "text", "text": "go"}]}
    req = await server.call("session/prompt", params)
    await asyncio.wait_for(opened.wait(), 20)
    await server.notify("session/cancel", {"sessionId": session})
    answer_frame, before = await server.response(req, timeout=20)
    assert answer_frame["result"]["stopReason"] == "cancelled"
    withdrawn = [f for f in before if f.get("method") == "$/cancel_request"]
    asked = next(f for f in server.seen if f.get("method") == "elicitation/create")
    assert [f["params"]["requestId"] for f in withdrawn] == [asked["id"]]
    never.cancel()

    assert await prompt(server, session, "again") == "end_turn"  # the session is usable
    assert mock_llm.pending == 0


@pytest.mark.parametrize("approve", [True, False], ids=["accept-edits", "declined"])
async def test_plan_mode_approval_switches_the_mode_and_the_edit_runs_without_asking(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path, approve: bool
) -> None:
    async def answer(params: dict[str, Any]) -> dict[str, Any]:
        if approve:
            return {"action": "accept", "content": {"mode": "accept_edits"}}
        return {"action": "decline"}

    (tmp_path / "notes.txt").write_text("alpha\n", encoding="utf-8")
    editor = FakeEditor(fs=False, terminal=False, answer=answer)
    server, session = await started(server_factory, mock_llm, editor, tmp_path)
    await server.request("session/set_mode", {"sessionId": session, "modeId": "plan"})
    edit = {"path": "notes.txt", "edits": [{"old_text": "alpha", "new_text": "beta"}]}
    mock_llm.queue(
        {"tool_calls": [{"name": "plan_ready", "arguments": {"summary": "Rename alpha."}}]},
        {"tool_calls": [{"name": "edit_file", "arguments": edit}]},
        {"text": "done"},
    )
    params = {"sessionId": session, "prompt": [{"type": "text", "text": "plan it"}]}
    req = await server.call("session/prompt", params)
    answered, frames = await server.response(req, timeout=30)
    assert answered["result"]["stopReason"] == "end_turn"

    (asked,) = editor.elicitations
    modes = [o["const"] for o in asked["requestedSchema"]["properties"]["mode"]["oneOf"]]
    assert modes == ["accept_edits", "ask", "plan"] and "Rename alpha." in asked["message"]
    shown = [f["params"]["update"] for f in frames if f.get("method") == "session/update"]
    changed = [u["currentModeId"] for u in shown if u["sessionUpdate"] == "current_mode_update"]
    options = [u for u in shown if u["sessionUpdate"] == "config_option_update"]
    if approve:
        assert changed == ["accept_edits"] and options
        assert options[-1]["configOptions"][0]["currentValue"] == "accept_edits"
        assert (tmp_path / "notes.txt").read_text(encoding="utf-8") == "beta\n"
        assert not editor.permission_requests  # Accept edits: the edit ran without a question
    else:
        assert changed == [] and not options
        assert (tmp_path / "notes.txt").read_text(encoding="utf-8") == "alpha\n"
        assert "stays in Plan mode" in conversation(mock_llm.chat_requests[1].json)[-1].text
