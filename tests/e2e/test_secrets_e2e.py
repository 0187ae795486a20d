"""The agent's API keys stay secret end to end: not in any frame the editor gets, not in the
session store, not in the logs, not in the environment of the commands the model runs.

The model servers are the mock LLM (over TCP) and the real console script runs each test.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_tools_e2e import final_updates, open_session
from tests.support.fake_editor import FakeEditor
from tests.support.mock_llm import MockLLM
from tests.support.raw import RawServer

Start = Callable[..., Any]


def new_key() -> str:
    return f"sk-live-SECRET-{uuid.uuid4().hex}"


def model_env(mock: MockLLM, key: str, **extra: str) -> dict[str, str]:
    return {
        "ACP_SERVER_RETRY_ATTEMPTS": "1",
        "OPENAI_BASE_URL": f"{mock.url}/v1",
        "OPENAI_API_KEY": key,
        "ANTHROPIC_BASE_URL": mock.url,
        "ANTHROPIC_API_KEY": key,
        **extra,
    }


async def prompt(server: RawServer, session: str, text: str = "go") -> list[dict[str, Any]]:
    """The session/update payloads of one turn (which must end normally)."""
    params = {"sessionId": session, "prompt": [{"type": "text", "text": text}]}
    answer, before = await server.response(await server.call("session/prompt", params), 20)
    assert "result" in answer, answer
    return [f["params"]["update"] for f in before if f.get("method") == "session/update"]


def shown_text(updates: list[dict[str, Any]]) -> str:
    return "".join(
        u["content"]["text"] for u in updates if u["sessionUpdate"] == "agent_message_chunk"
    )


def stored_bytes(data_dir: Path) -> bytes:
    """Everything the server wrote under its data directory (database, WAL, rules)."""
    return b"".join(p.read_bytes() for p in sorted(data_dir.rglob("*")) if p.is_file())


@pytest.mark.parametrize("dialect", ["openai", "anthropic"])
async def test_a_key_the_model_server_echoes_is_neither_shown_nor_stored(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path, private_data_dir: Path, dialect: str
) -> None:
    key = new_key()
    server = await server_factory("--model", f"{dialect}:mock-model", env=model_env(mock_llm, key))
    session = await server.handshake(str(tmp_path))
    mock_llm.queue(
        {"fault": "status", "status": 401, "message": f"Incorrect API key provided: {key}"},
        {"fault": "status", "status": 400, "body": f"bad request; you sent Bearer {key}"},
        {"text": "partial words here", "fault": "error_frame", "after": 1, "message": key},
    )
    shown = [shown_text(await prompt(server, session)) for _ in range(3)]
    await server.close_stdin()
    await server.wait()

    sent = mock_llm.chat_requests[0].headers
    assert key in (sent.get("authorization", "") + sent.get("x-api-key", ""))  # it was sent
    assert "Incorrect API key provided: [redacted]" in shown[0]
    assert "[redacted]" in shown[1] and "[redacted]" in shown[2]
    assert key not in json.dumps(server.seen)
    assert key.encode() not in stored_bytes(private_data_dir)


async def test_a_debug_log_has_no_key_and_no_http_library_chatter(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path
) -> None:
    """httpx/httpcore debug logs print headers (here a response header echoing the key)."""
    key, log_file = new_key(), tmp_path / "debug.log"
    server = await server_factory(
        "--model",
        "openai:mock-model",
        "--log-level",
        "debug",
        "--log-file",
        str(log_file),
        "--log-stderr",
        env=model_env(mock_llm, key),
    )
    session = await server.handshake(str(tmp_path))
    mock_llm.queue({"text": "hello there", "headers": {"X-Echo": f"Bearer {key}"}})
    assert shown_text(await prompt(server, session)) == "hello there"
    await server.close_stdin()
    await server.wait()
    for text in (await server.stderr_text(), log_file.read_text("utf-8")):
        assert "acp_server" in text  # our own debug lines are there
        assert key not in text
        assert "httpcore" not in text and "authorization" not in text.lower()


async def test_asked_for_http_library_logs_are_there_but_redacted(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path
) -> None:
    key, log_file = new_key(), tmp_path / "debug.log"
    env = model_env(mock_llm, key, ACP_SERVER_LOG_THIRD_PARTY="1")
    server = await server_factory(
        "--model", "openai:mock-model", "--log-file", str(log_file), env=env
    )
    session = await server.handshake(str(tmp_path))
    mock_llm.queue({"text": "hello there", "headers": {"X-Echo": f"Bearer {key}"}})
    await prompt(server, session)
    await server.close_stdin()
    await server.wait()
    text = log_file.read_text("utf-8")
    assert "httpcore" in text and "Bearer [redacted]" in text
    assert key not in text


@pytest.mark.parametrize("through_editor", [True, False], ids=["editor-terminal", "local"])
async def test_commands_the_model_runs_do_not_see_the_keys(
    server_factory: Start,
    script: Callable[[list[dict[str, Any]]], Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    through_editor: bool,
) -> None:
    key = new_key()
    monkeypatch.setenv("OPENAI_API_KEY", key)  # the editor has it too: its terminals inherit it
    rounds: list[dict[str, Any]] = [
        {"tool_calls": [{"name": "run_command", "arguments": {"command": "env; echo END"}}]},
        {"text": "done"},
    ]
    server = await server_factory(
        "--script", str(script(rounds)), env={"OPENAI_API_KEY": key, "ANTHROPIC_API_KEY": key}
    )
    editor = FakeEditor(fs=False, terminal=through_editor)
    editor.attach(server)
    capabilities = {"clientCapabilities": editor.capabilities(), "protocolVersion": 1}
    await server.request("initialize", capabilities)
    answer = await server.request("session/new", {"cwd": str(tmp_path), "mcpServers": []})
    session = answer["result"]["sessionId"]
    await server.request("session/set_mode", {"sessionId": session, "modeId": "bypass"})
    await prompt(server, session)
    output = (
        b"".join(editor.outputs.values()).decode() if through_editor else json.dumps(server.seen)
    )
    await editor.close()
    assert "END" in output and "PATH=" in output  # the command ran and printed its env
    assert key not in output and key not in json.dumps(server.seen)


async def test_a_key_a_command_prints_is_hidden_from_the_model_the_editor_and_the_store(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path, private_data_dir: Path
) -> None:
    """The command runs outside the sandbox and prints the key the agent holds (here it is
    written in the command line, as a model that saw it somewhere would): the result the model
    reads, what the editor is shown and the replay of the stored session say [redacted]."""
    key = new_key()
    env = model_env(mock_llm, key)
    project = tmp_path / "project"
    project.mkdir()
    arguments = {"command": f"echo the key is {key}", "outside_sandbox": True, "reason": "see"}
    mock_llm.queue(
        {"tool_calls": [{"name": "run_command", "arguments": arguments}]}, {"text": "done"}
    )
    server = await server_factory("--model", "openai:mock-model", env=env)
    editor = FakeEditor(fs=False, terminal=False)
    session = await open_session(server, editor, project)
    await prompt(server, session)
    await server.close_stdin()
    await server.wait()

    answered = [m for m in mock_llm.chat_requests[1].json["messages"] if m["role"] == "tool"]
    assert "the key is [redacted]" in json.dumps(answered) and key not in json.dumps(answered)
    (shown,) = final_updates(server.seen).values()
    assert shown["status"] == "completed" and "the key is [redacted]" in json.dumps(shown)
    assert key not in json.dumps(server.seen)  # the call, the permission request, the result

    again = await server_factory("--model", "openai:mock-model", env=env)
    editor.attach(again)
    await again.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    load = {"sessionId": session, "cwd": str(project), "mcpServers": []}
    answer, replay = await again.response(await again.call("session/load", load))
    assert "result" in answer, answer
    assert "the key is [redacted]" in json.dumps(replay) and key not in json.dumps(replay)
