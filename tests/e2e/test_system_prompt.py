"""The editor's system prompt over real pipes (ACP `systemPrompt`, stable 2026-11-06): `append`
reaches the model after our prompt, `override` replaces our instructions but keeps the mode
rules and the project's roots; both survive compaction, load and resume; a prompt we cannot
apply is -32602 and makes, loads or changes nothing."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support.mock_llm import MockLLM
from tests.support.mock_llm.view import conversation
from tests.support.raw import Frame, RawServer

Start = Callable[..., Any]
APPENDED = "Always answer in French."
OVERRIDE = "You are a terse reviewer. Only point at bugs."
OURS = "How to work:"  # a line of our instructions, which an override leaves out
RULES = "The current mode is decided by the user"  # the mode rules, always kept


def system_prompt(mode: str, text: str) -> dict[str, Any]:
    return {"mode": mode, "content": [{"type": "text", "text": text}]}


async def started(server_factory: Start, mock: MockLLM) -> RawServer:
    mock.responder = lambda body: {"text": "D'accord."}
    env = {"OPENAI_BASE_URL": f"{mock.url}/v1", "OPENAI_API_KEY": "sk-mock"}
    server: RawServer = await server_factory("--model", "openai:mock-model", env=env)
    init = await server.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    caps = init["result"]["agentCapabilities"]["sessionCapabilities"]
    assert caps["systemPrompt"] == {"mode": {"override": {}}}
    return server


async def ask(server: RawServer, session: str, text: str = "Bonjour?") -> Frame:
    params = {"sessionId": session, "prompt": [{"type": "text", "text": text}]}
    answer = await server.request("session/prompt", params, timeout=30)
    assert answer["result"]["stopReason"] == "end_turn", answer
    return answer


def last_system(mock: MockLLM) -> str:
    """The system message of the last turn request (a compaction's summary has no tools)."""
    body = [r for r in mock.chat_requests if r.json.get("tools")][-1].json
    first = conversation(body)[0]
    assert first.role == "system"
    return first.text


def reopen(session: str, cwd: Path, prompt: dict[str, Any] | None) -> Frame:
    params: dict[str, Any] = {"sessionId": session, "cwd": str(cwd), "mcpServers": []}
    if prompt is not None:
        params["systemPrompt"] = prompt
    return params


async def test_append_and_override_reach_the_model_through_compaction_load_and_resume(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path
) -> None:
    (tmp_path / "AGENTS.md").write_text("Project rule: indent with tabs.\n", encoding="utf-8")
    server = await started(server_factory, mock_llm)
    params = {"cwd": str(tmp_path), "mcpServers": []}
    new = await server.request(
        "session/new", {**params, "systemPrompt": system_prompt("append", APPENDED)}
    )
    session = new["result"]["sessionId"]
    await ask(server, session)
    appended = last_system(mock_llm)
    assert appended.startswith("You are a coding agent") and OURS in appended
    assert appended.endswith("\n\n" + APPENDED)
    # ours, then the project's instructions (and the environment), then the client's text
    assert appended.index(OURS) < appended.index("indent with tabs") < appended.index(APPENDED)
    for n in range(4):  # enough history for a compaction to summarise
        await ask(server, session, f"Question {n}: " + "lorem ipsum dolor " * 150)
    await ask(server, session, "/compact")
    assert [r for r in mock_llm.chat_requests if not r.json.get("tools")], "no summary asked"
    await ask(server, session)
    assert last_system(mock_llm) == appended  # compaction summarised the history, not this

    again = await started(server_factory, mock_llm)  # a new process: the stored prompt
    assert "result" in await again.request("session/load", reopen(session, tmp_path, None))
    await ask(again, session)
    assert last_system(mock_llm) == appended

    override = system_prompt("override", OVERRIDE)
    resumed = await again.request("session/resume", reopen(session, tmp_path, override))
    assert "result" in resumed, resumed
    await ask(again, session)
    replaced = last_system(mock_llm)
    assert replaced.startswith(OVERRIDE) and OURS not in replaced and APPENDED not in replaced
    assert RULES in replaced and str(tmp_path) in replaced  # mode rules and roots stay
    assert "indent with tabs" in replaced  # the project's instructions too
    assert "tools" in mock_llm.chat_requests[-1].json  # and so do the tools
    third = await started(server_factory, mock_llm)
    assert "result" in await third.request("session/resume", reopen(session, tmp_path, None))
    await ask(third, session)
    assert last_system(mock_llm) == replaced


def stored_sessions(data: Path) -> int:
    with sqlite3.connect(data / "sessions.sqlite3") as db:
        count: int = db.execute("SELECT COUNT(*) FROM sessions").fetchone()[0]
    return count


async def test_a_prompt_that_cannot_be_applied_is_refused_and_makes_nothing(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path, private_data_dir: Path
) -> None:
    server = await started(server_factory, mock_llm)
    params: dict[str, Any] = {"cwd": str(tmp_path), "mcpServers": []}
    image = {"type": "image", "mimeType": "image/png", "data": "iVBORw0KGgo="}
    refused = {
        "mode": system_prompt("_replace_everything", "x"),
        "content[1]": {"mode": "append", "content": [{"type": "text", "text": "a"}, image]},
        "content": {"mode": "append", "content": []},
    }
    for field, prompt in refused.items():
        answer = await server.request("session/new", {**params, "systemPrompt": prompt})
        assert answer["error"]["code"] == -32602, answer
        assert f"`systemPrompt.{field}`" in answer["error"]["message"]
        assert "No session was changed" in answer["error"]["message"]
    made = await server.request(
        "session/new", {**params, "systemPrompt": system_prompt("append", APPENDED)}
    )
    session = made["result"]["sessionId"]
    await ask(server, session)
    assert stored_sessions(private_data_dir) == 1  # only the one that could be applied

    other = await started(server_factory, mock_llm)
    bad = reopen(session, tmp_path, system_prompt("replace", OVERRIDE))
    answer, before = await other.response(await other.call("session/load", bad), 30)
    assert answer["error"]["code"] == -32602 and before == []  # nothing replayed
    unknown = await other.request(
        "session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": "?"}]}
    )
    assert unknown["error"]["code"] == -32002  # not loaded
    assert "result" in await other.request("session/load", reopen(session, tmp_path, None))
    await ask(other, session)
    assert last_system(mock_llm).endswith("\n\n" + APPENDED)  # the stored prompt is unchanged
