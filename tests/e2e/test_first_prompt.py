"""The first prompt of a fresh process does not wait for what could be done earlier or beside
it (issue 14), but for what decides its shape (issue 30): the first model request waits for
window discovery (bounded by the lookup's time limit; none for a hosted model the catalogue
knows), so it offers what the second does and a provider's cache serves the second from it;
well-formed tool arguments are checked without importing jsonschema (~50 ms)."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.mock_llm import MockLLM, Recorded
from tests.support.mock_llm.http_io import ResponseWriter
from tests.support.raw import Frame, RawServer

Start = Callable[..., Any]
DISCOVERY_PATHS = ("/v1/models", "/models", "/props")
WINDOW = 50_000


class SlowDiscovery(MockLLM):
    """A mock whose discovery endpoints answer only once the test releases them (or after
    10 s); `answered` is set once one of them has answered."""

    def __init__(self) -> None:
        super().__init__(report_window=WINDOW)
        self.release = asyncio.Event()
        self.answered = asyncio.Event()
        self.chat = asyncio.Event()  # set when the first chat request arrives
        self.looked_up = asyncio.Event()  # set when the first discovery request arrives

    async def _route(self, req: Recorded, out: ResponseWriter) -> None:
        if req.method == "GET" and req.path in DISCOVERY_PATHS:
            self.looked_up.set()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.release.wait(), 10)
            await super()._route(req, out)
            self.answered.set()
        else:
            self.chat.set()
            await super()._route(req, out)


def updates_of(frames: list[Frame]) -> list[dict[str, Any]]:
    return [f["params"]["update"] for f in frames if f.get("method") == "session/update"]


async def prompt(server: RawServer, session: str) -> tuple[str, list[dict[str, Any]]]:
    params = {"sessionId": session, "prompt": [{"type": "text", "text": "go"}]}
    answer, before = await server.response(await server.call("session/prompt", params), 8)
    return answer["result"]["stopReason"], updates_of(before)


async def test_the_first_request_waits_for_window_discovery(
    server_factory: Start, tmp_path: Path
) -> None:
    mock = SlowDiscovery()
    await mock.start()
    try:
        env = {"OPENAI_BASE_URL": f"{mock.url}/v1", "OPENAI_API_KEY": "sk-mock"}
        server = await server_factory("--model", "openai:mock-model", env=env)
        session = await server.handshake(str(tmp_path))
        mock.queue({"text": "first"}, {"text": "second"})
        params = {"sessionId": session, "prompt": [{"type": "text", "text": "go"}]}
        req = await server.call("session/prompt", params)
        await asyncio.wait_for(mock.looked_up.wait(), 8)
        await asyncio.sleep(0.5)
        assert not mock.chat.is_set()  # its shape depends on the window: not sent before it
        start = time.monotonic()
        mock.release.set()
        answer, before = await server.response(req, 8)
        assert time.monotonic() - start < 4.0
        assert answer["result"]["stopReason"] == "end_turn"
        # The first turn already budgets for the window the server reported, as the next does.
        for seen in (updates_of(before), (await prompt(server, session))[1]):
            sizes = [u["size"] for u in seen if u["sessionUpdate"] == "usage_update"]
            assert sizes and set(sizes) == {WINDOW}, sizes
    finally:
        await mock.close()


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


async def test_well_formed_tool_calls_do_not_import_jsonschema(
    server_factory: Start, script: Any, tmp_path: Path
) -> None:
    (tmp_path / "notes.txt").write_text("alpha\nbeta\n", encoding="utf-8")
    rounds = [
        call("read_file", path="notes.txt"),
        call("edit_file", path="notes.txt", edits=[{"old_text": "beta", "new_text": "gamma"}]),
        call("update_plan", entries=[{"content": "check the notes", "status": "completed"}]),
        {"text": "done"},
    ]
    # -X importtime (through the environment) lists on stderr every module the server imports.
    env = {"PYTHONPROFILEIMPORTTIME": "1"}
    server = await server_factory("--script", str(script(rounds)), env=env)
    session = await server.handshake(str(tmp_path))
    await server.request("session/set_mode", {"sessionId": session, "modeId": "bypass"})
    stop, seen = await prompt(server, session)
    assert stop == "end_turn"
    failed = [u for u in seen if u.get("status") == "failed"]
    assert not failed, failed
    assert (tmp_path / "notes.txt").read_text(encoding="utf-8") == "alpha\ngamma\n"
    await server.close_stdin()
    await server.wait()
    stderr = await server.stderr_text()
    imported = {line.rsplit("|", 1)[-1].strip() for line in stderr.splitlines()}
    assert "acp_server.tools.files.edit" in imported  # the listing is there
    assert "jsonschema" not in imported


@pytest.mark.parametrize(
    "args", [("--model", "openai:mock-model"), ()], ids=["named-model", "probed-model"]
)
async def test_closing_right_after_session_new_leaves_stderr_quiet(
    server_factory: Start, tmp_path: Path, args: tuple[str, ...]
) -> None:
    """The window lookup started after session/new may still be connecting to the model server
    when the editor closes stdin: the server exits cleanly, with nothing on stderr (some editors
    show any stderr line as an error). Cut off at the interpreter's teardown, a connection
    attempt left "coroutine ... was never awaited" there, in one exit in eight (a named
    model) to two in three (a probed one): hence the repetitions."""
    with socket.socket() as probe:  # a port nothing listens on: connections are refused
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {"OPENAI_BASE_URL": f"http://127.0.0.1:{port}/v1", "ACP_SERVER_DISCOVER": "0"}
    for _ in range(10):
        server = await server_factory(*args, env=env)
        await server.handshake(str(tmp_path))
        await server.close_stdin()
        assert await server.wait() == 0
        assert await server.stderr_text() == ""


# Loaded by none of `initialize`'s work: each is a few milliseconds or more of start-up.
NOT_FOR_INITIALIZE = (
    "httpx",
    "httpcore",
    "anyio",
    "sqlite3",
    "tomllib",
    "jsonschema",
    "mcp",
    "pathspec",
    "acp_server.session.session",
    "acp_server.store.database",
    "acp_server.tools.base",
    "acp_server.tools.mcp.config",
    "acp_server.agent.loop",
    "acp_server.backends.selection.select",  # the backends' construction: at the first prompt
    "shutil",  # argparse asks it for the terminal's width, and it loads three compressors
)
# Never loaded by a first prompt that searches nothing: httpx's command-line client, the
# ignore-file matcher, the package metadata reader (ripgrep's location).
NOT_FOR_A_FIRST_PROMPT = ("click", "pygments", "rich", "pathspec", "importlib.metadata")


async def imports_until(server: Any, reached: Callable[[], Any]) -> set[str]:
    """What the server listed under -X importtime until `reached()` is done; then it is
    killed, so that shutting down adds nothing to the list."""
    await reached()
    await server.stop()
    return {line.rsplit("|", 1)[-1].strip() for line in (await server.stderr_text()).splitlines()}


async def test_initialize_loads_none_of_the_heavy_modules(server_factory: Start) -> None:
    env = {"PYTHONPROFILEIMPORTTIME": "1", "OPENAI_API_KEY": "sk-mock"}
    server = await server_factory("--model", "openai:mock-model", env=env)
    params = {"protocolVersion": 1, "clientCapabilities": {}}
    imported = await imports_until(server, lambda: server.request("initialize", params))
    assert "acp_server.protocol.handlers" in imported  # the listing is there
    assert sorted(imported & set(NOT_FOR_INITIALIZE)) == []


async def test_a_first_prompt_at_once_loads_no_command_line_or_search_modules(
    server_factory: Start, tmp_path: Path
) -> None:
    mock = MockLLM()
    await mock.start()
    try:
        env = {
            "OPENAI_BASE_URL": f"{mock.url}/v1",
            "OPENAI_API_KEY": "sk-mock",
            "PYTHONPROFILEIMPORTTIME": "1",
        }
        server = await server_factory("--model", "openai:mock-model", env=env)
        session = await server.handshake(str(tmp_path))
        mock.queue({"text": "hello"})
        imported = await imports_until(server, lambda: prompt(server, session))
    finally:
        await mock.close()
    assert "httpx" in imported  # the listing covers the HTTP stack's import
    assert sorted(imported & set(NOT_FOR_A_FIRST_PROMPT)) == []
