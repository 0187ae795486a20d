"""Logging over real pipes: stderr stays silent at the default level (editors such as
agent-shell show every stderr line as an error), the log file gets the lines instead, and no
key or Authorization header ever reaches it."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support.fake_editor import FakeEditor
from tests.support.mock_llm import MockLLM, running_mock_llm
from tests.support.raw import Frame, RawServer, stop_reason

Start = Callable[..., Any]
SHELL = {"name": "run_command", "arguments": {"command": "echo hello"}}


def mock_env(mock: MockLLM, key: str) -> dict[str, str]:
    return {
        "ACP_SERVER_RETRY_ATTEMPTS": "1",
        "OPENAI_BASE_URL": f"{mock.url}/v1",
        "OPENAI_API_KEY": key,
        "ACP_SERVER_DISCOVER": "0",
    }


async def prompt(server: RawServer, session: str, text: str) -> int:
    params = {"sessionId": session, "prompt": [{"type": "text", "text": text}]}
    return int(await server.call("session/prompt", params))


def is_permission(frame: Frame) -> bool:
    return frame.get("method") == "session/request_permission"


async def full_session(server: RawServer, mock: MockLLM, cwd: Path) -> None:
    """initialize, new, a prompt with a tool call and a permission, a cancelled one, close,
    load, close; each answered as it should be."""
    editor = FakeEditor(terminal=False)
    editor.attach(server)
    init = {"protocolVersion": 1, "clientCapabilities": editor.capabilities()}
    assert "result" in await server.request("initialize", init)
    new = await server.request("session/new", {"cwd": str(cwd), "mcpServers": []})
    session = new["result"]["sessionId"]
    mock.queue({"tool_calls": [SHELL]}, {"text": "It printed hello."})
    answer, _ = await server.response(await prompt(server, session, "run echo"), 20)
    assert stop_reason(answer["result"]) == "end_turn"
    assert len(editor.permission_requests) == 1
    del server.handlers["session/request_permission"]  # the next one stays unanswered
    mock.queue({"tool_calls": [SHELL]})
    running = await prompt(server, session, "again")
    await server.until(is_permission)
    await server.notify("session/cancel", {"sessionId": session})
    answer, _ = await server.response(running)
    assert stop_reason(answer["result"]) == "cancelled"
    assert (await server.request("session/close", {"sessionId": session}))["result"] == {}
    load = {"sessionId": session, "cwd": str(cwd), "mcpServers": []}
    assert "result" in await server.request("session/load", load)
    assert (await server.request("session/close", {"sessionId": session}))["result"] == {}
    await server.close_stdin()
    assert await server.wait() == 0


async def test_stderr_is_silent_through_a_full_session_and_the_log_file_has_the_lines(
    server_factory: Start, tmp_path: Path, default_log_file: Path
) -> None:
    key = f"sk-live-SECRET-{uuid.uuid4().hex}"
    async with running_mock_llm(api_key=key) as mock:
        server = await server_factory("--model", "openai:mock-model", env=mock_env(mock, key))
        await full_session(server, mock, tmp_path)
    assert await server.stderr_text() == ""
    text = default_log_file.read_text("utf-8")
    assert " INFO acp_server" in text  # what happened is in the log file instead
    assert key not in text


async def test_a_debug_log_of_a_session_that_used_a_key_has_no_key_and_no_authorization(
    server_factory: Start, tmp_path: Path, default_log_file: Path
) -> None:
    """The server requires the key; one answer echoes it back in an error, as some do."""
    key = f"sk-live-SECRET-{uuid.uuid4().hex}"
    async with running_mock_llm(api_key=key) as mock:
        env = {**mock_env(mock, key), "ACP_SERVER_LOG": "debug", "ACP_SERVER_LOG_THIRD_PARTY": "1"}
        server = await server_factory("--model", "openai:mock-model", env=env)
        mock.queue({"fault": "status", "status": 400, "message": f"bad key {key}"})
        session = await server.handshake(str(tmp_path))
        answer, _ = await server.response(await prompt(server, session, "hello"), 20)
        assert "result" in answer
        await server.close_stdin()
        assert await server.wait() == 0
        assert mock.chat_requests[0].headers["authorization"] == f"Bearer {key}"  # it was used
    assert await server.stderr_text() == ""
    text = default_log_file.read_text("utf-8")
    assert " DEBUG acp_server" in text and "httpcore" in text
    assert key not in text
    assert f"Bearer {key}" not in text and key[len("sk-live-") :] not in text


async def test_debug_lines_go_to_the_file_and_to_stderr_only_when_asked(
    server_factory: Start, script: Callable[[list[dict[str, Any]]], Path], tmp_path: Path
) -> None:
    path = script([{"text": "hi"}, {"text": "hi"}])
    quiet_log, loud_log = tmp_path / "quiet.log", tmp_path / "loud.log"
    quiet = await server_factory(
        "--script", str(path), "--log-level", "debug", "--log-file", str(quiet_log)
    )
    loud = await server_factory(
        "--script", str(path), "--log-level", "debug", "--log-file", str(loud_log),
        env={"ACP_SERVER_LOG_STDERR": "1"},
    )  # fmt: skip
    for server in (quiet, loud):
        session = await server.handshake(str(tmp_path))
        answer, _ = await server.response(await prompt(server, session, "hello"))
        assert stop_reason(answer["result"]) == "end_turn"
        await server.close_stdin()
        assert await server.wait() == 0
    assert await quiet.stderr_text() == ""
    assert " DEBUG acp_server" in quiet_log.read_text("utf-8")
    assert "DEBUG acp_server" in await loud.stderr_text()
    assert " DEBUG acp_server" in loud_log.read_text("utf-8")


async def test_a_level_that_does_not_exist_is_a_start_up_error_that_says_which(
    server_factory: Start,
) -> None:
    server = await server_factory(env={"ACP_SERVER_LOG": "verbose"})
    assert await server.wait() == 2
    stderr = await server.stderr_text()
    assert "ACP_SERVER_LOG is 'verbose'" in stderr and "debug, info, warning, error" in stderr
