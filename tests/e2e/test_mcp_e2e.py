"""MCP servers from the editor, through the real console script and real MCP servers that the
tests start (tests/support/mcp_server.py, written with the `mcp` package): tools listed, called
with permission, results shown and fed back to the model; failing servers isolated and
reported once; no process left behind."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_tools_e2e import call, final_updates, run_prompt, tool_calls, updates_of
from tests.support.fake_editor import FakeEditor
from tests.support.raw import Frame, RawServer

Start = Callable[..., Any]
MCP_SERVER = Path(__file__).parent.parent / "support" / "mcp_server.py"


def stdio(name: str, behaviour: str = "normal", *extra: str) -> dict[str, Any]:
    args = [str(MCP_SERVER), behaviour, *extra]
    return {"name": name, "command": sys.executable, "args": args, "env": []}


async def open_with(
    server: RawServer, editor: FakeEditor, cwd: Path, servers: list[dict[str, Any]]
) -> str:
    editor.attach(server)
    await server.request(
        "initialize", {"protocolVersion": 1, "clientCapabilities": editor.capabilities()}
    )
    answer = await server.request("session/new", {"cwd": str(cwd), "mcpServers": servers})
    return str(answer["result"]["sessionId"])


def said(frames: list[Frame]) -> str:
    return "".join(
        u["content"]["text"]
        for u in updates_of(frames)
        if u["sessionUpdate"] == "agent_message_chunk"
    )


def children(pid: int) -> list[int]:
    """Every process whose parent is `pid` (zombies included)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_bytes()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()
        if int(fields[1]) == pid:
            found.append(int(entry))
    return found


async def test_stdio_tools_are_offered_called_and_fed_back(
    server_factory: Start, script: Any, tmp_path: Path
) -> None:
    rounds = [
        {
            "expect": {"tools": ["mcp__docs__echo", "mcp__docs__add", "mcp__docs__remove"]},
            **call("mcp__docs__echo", text="hello"),
        },
        {"expect": {"contains": ["echo: hello"]}, **call("mcp__docs__add", a=2, b=3)},
        {"expect": {"contains": ['"sum": 5']}, **call("mcp__docs__remove", thing="x")},
        {"expect": {"contains": ["removed x"]}, **call("mcp__docs__image")},
        {"expect": {"contains": ["image (image/png)"]}, "text": "Done."},
    ]
    editor = FakeEditor(fs=False, terminal=False)
    # Room for the image (~1,000 tokens) beside our own tools, without compacting.
    server = await server_factory("--script", str(script(rounds)), "--context-window", "32768")
    session = await open_with(server, editor, tmp_path, [stdio("docs")])
    stop, frames = await run_prompt(server, session)

    assert stop == "end_turn", said(frames)
    assert "did not match" not in said(frames)
    calls = tool_calls(frames)
    finals = final_updates(frames)
    assert calls["mcp__docs__echo"]["kind"] == "read"
    assert calls["mcp__docs__remove"]["kind"] == "delete"
    assert calls["mcp__docs__add"]["kind"] == "other"
    for update in calls.values():
        assert finals[update["toolCallId"]]["status"] == "completed"
    echo = finals[calls["mcp__docs__echo"]["toolCallId"]]
    assert echo["content"] == [
        {"type": "content", "content": {"type": "text", "text": "echo: hello"}}
    ]
    image = finals[calls["mcp__docs__image"]["toolCallId"]]["content"][0]["content"]
    assert image["type"] == "image" and image["mimeType"] == "image/png"
    # The read-only tool ran without asking; the others asked first.
    asked = [r["toolCall"]["toolCallId"] for r in editor.permission_requests]
    assert calls["mcp__docs__echo"]["toolCallId"] not in asked
    assert calls["mcp__docs__remove"]["toolCallId"] in asked
    assert calls["mcp__docs__add"]["toolCallId"] in asked


def failing_rounds() -> list[dict[str, Any]]:
    """Flaky crashes on its second call; good keeps working; the model is told what is missing."""
    return [
        {
            "expect": {
                "tools": ["mcp__good__echo", "mcp__flaky__echo"],
                "contains": ["gone (", "stuck (", "do not offer or promise them"],
            },
            **call("mcp__flaky__echo", text="one"),
        },
        {"expect": {"contains": ["echo: one"]}, **call("mcp__flaky__echo", text="two")},
        {"expect": {"contains": ["stopped during this call"]}, **call("mcp__good__echo", text="3")},
        {"expect": {"contains": ["echo: 3"]}, "text": "Turn one done."},
        call("mcp__flaky__echo", text="four"),
        {"expect": {"contains": ["echo: four"]}, "text": "Turn two done."},
    ]


async def test_failing_servers_are_isolated_reported_once_and_leave_no_process(
    server_factory: Start, script: Any, tmp_path: Path
) -> None:
    rounds = failing_rounds()
    servers = [
        stdio("good"),
        stdio("gone", "exit"),
        stdio("stuck", "hang"),
        stdio("flaky", "crash2"),
    ]
    env = {"ACP_SERVER_MCP_STARTUP_TIMEOUT": "5"}
    editor = FakeEditor(fs=False, terminal=False)
    server = await server_factory("--script", str(script(rounds)), env=env)
    session = await open_with(server, editor, tmp_path, servers)
    agent = server.proc.pid

    stop, first = await run_prompt(server, session)
    assert stop == "end_turn"
    text = said(first)
    assert "Turn one done." in text and "did not match" not in text, text
    assert text.count("'gone'") == 1 and "exited with code 1" in text
    assert "exiting at start on purpose" in text  # its last words, from its stderr
    assert text.count("'stuck'") == 1 and "within 5 s" in text
    assert "'flaky'" not in text  # its crash is told at the next turn
    finals = final_updates(first)
    statuses = [
        finals[u["toolCallId"]]["status"]
        for u in updates_of(first)
        if u["sessionUpdate"] == "tool_call"
    ]
    assert statuses == ["completed", "failed", "completed"]

    stop, second = await run_prompt(server, session)
    assert stop == "end_turn"
    text = said(second)
    assert "Turn two done." in text and "did not match" not in text, text
    assert text.count("'flaky'") == 1 and "exited with code 3" in text
    assert "'gone'" not in text and "'stuck'" not in text  # told once, not every turn

    assert children(agent)  # the good and the restarted server run
    await server.request("session/close", {"sessionId": session})
    assert children(agent) == []


TOKEN = "s3cret-token-for-the-tests"  # the bearer the tests' HTTP MCP server requires
WRONG = "wr0ng-token-nobody-may-see"


@contextlib.asynccontextmanager
async def http_server(transport: str) -> AsyncIterator[str]:
    """The test MCP server over streamable HTTP or SSE on 127.0.0.1, answering 401 to any
    request without `Authorization: Bearer TOKEN`; yields its URL."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proc = await asyncio.create_subprocess_exec(
        *[sys.executable, str(MCP_SERVER), "normal", f"--{transport}", str(port)],
        *["--require", f"Authorization=Bearer {TOKEN}"],
    )
    try:
        for _ in range(200):
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.close()
                break
            except OSError:
                await asyncio.sleep(0.05)
        yield f"http://127.0.0.1:{port}/{'mcp' if transport == 'http' else 'sse'}"
    finally:
        proc.kill()
        await proc.wait()


def bearer(token: str, form: str) -> Any:
    """The Authorization header as ACP's list of {name, value} or as an object (CodeCompanion)."""
    if form == "object":
        return {"Authorization": f"Bearer {token}"}
    return [{"name": "Authorization", "value": f"Bearer {token}"}]


@pytest.mark.parametrize("form", ["list", "object"])
@pytest.mark.parametrize("transport", ["http", "sse"])
async def test_http_and_sse_servers_get_their_headers(
    server_factory: Start, script: Any, tmp_path: Path, transport: str, form: str
) -> None:
    rounds = [
        {
            "expect": {"tools": ["mcp__web__echo", "mcp__local__echo"]},
            **call("mcp__web__echo", text="over http"),
        },
        {"expect": {"contains": ["echo: over http"]}, **call("mcp__local__echo", text="x")},
        {"expect": {"contains": ["echo: x"]}, "text": "Done."},
    ]
    editor = FakeEditor(fs=False, terminal=False)
    server = await server_factory("--script", str(script(rounds)))
    async with http_server(transport) as url:
        web = {"type": transport, "name": "web", "url": url, "headers": bearer(TOKEN, form)}
        local = {**stdio("local", "noisy"), "env": {"TEST_VALUE": "1"} if form == "object" else []}
        init = await server.request("initialize", {"protocolVersion": 1})
        assert init["result"]["agentCapabilities"]["mcpCapabilities"] == {"http": True, "sse": True}
        editor.attach(server)
        answer = await server.request(
            "session/new", {"cwd": str(tmp_path), "mcpServers": [web, local]}
        )
        session = str(answer["result"]["sessionId"])
        stop, frames = await run_prompt(server, session)
    assert stop == "end_turn"
    assert said(frames) == "Done.", said(frames)


@pytest.mark.parametrize("transport", ["http", "sse"])
async def test_a_wrong_header_fails_only_that_server_and_stays_secret(
    server_factory: Start,
    script: Any,
    tmp_path: Path,
    transport: str,
    default_log_file: Path,
    private_data_dir: Path,
) -> None:
    rounds = [
        {"expect": {"tools": ["mcp__local__echo"]}, **call("mcp__local__echo", text="x")},
        {"expect": {"contains": ["echo: x"]}, "text": "Done."},
        {"text": "Again."},
    ]
    editor = FakeEditor(fs=False, terminal=False)
    server = await server_factory("--script", str(script(rounds)), "--log-level", "debug")
    async with http_server(transport) as url:
        web = {"type": transport, "name": "web", "url": url, "headers": bearer(WRONG, "list")}
        session = await open_with(server, editor, tmp_path, [web, stdio("local")])
        stop, first = await run_prompt(server, session)
        stop2, second = await run_prompt(server, session)
    assert (stop, stop2) == ("end_turn", "end_turn")
    text = said(first)
    assert text.count("'web'") == 1 and "not available" in text and text.endswith("Done."), text
    assert "refused the connection (HTTP 401 Unauthorized)" in text and "headers" in text, text
    assert said(second) == "Again."  # told once
    await server.close_stdin()
    await server.wait()
    places = {
        "frames": json.dumps(server.seen),
        "stderr": await server.stderr_text(),
        "log": default_log_file.read_text("utf-8"),
        **{
            str(path): path.read_bytes().decode("utf-8", "replace")
            for path in private_data_dir.rglob("*")
            if path.is_file()
        },
    }
    assert "web" in places["log"]  # the failure was logged, without the header's value
    assert [where for where, content in places.items() if WRONG in content] == []


async def test_an_mcp_over_acp_server_is_refused_clearly(
    server_factory: Start, tmp_path: Path
) -> None:
    server = await server_factory()
    await server.request("initialize", {"protocolVersion": 1})
    acp = {"type": "acp", "name": "editor-tools", "serverId": "s1"}
    answer = await server.request("session/new", {"cwd": str(tmp_path), "mcpServers": [acp]})
    assert answer["error"]["code"] == -32602
    message = answer["error"]["message"]
    assert (
        "'editor-tools'" in message
        and "MCP-over-ACP" in message
        and "stdio, http or sse" in message
    )


def marked(marker: str) -> list[int]:
    """Processes (MCP servers) whose command line carries `marker`."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                if marker.encode() in Path(f"/proc/{entry}/cmdline").read_bytes():
                    found.append(int(entry))
    return found


@pytest.mark.parametrize("how", ["stdin EOF", "SIGTERM"])
async def test_every_server_process_ends_when_the_agent_exits(
    server_factory: Start, script: Any, tmp_path: Path, how: str
) -> None:
    marker = f"marker-{tmp_path.name}"
    server = await server_factory("--script", str(script([{"text": "hi"}])))
    editor = FakeEditor(fs=False, terminal=False)
    servers = [stdio("a", "normal", marker), stdio("b", "normal", marker)]
    session = await open_with(server, editor, tmp_path, servers)
    assert (await run_prompt(server, session))[0] == "end_turn"  # both connected by now
    assert len(marked(marker)) == 2
    if how == "SIGTERM":
        server.terminate()
    else:
        await server.close_stdin()
    await server.wait()
    for _ in range(100):
        if not marked(marker):
            break
        await asyncio.sleep(0.05)
    assert marked(marker) == []


async def test_load_and_resume_connect_the_servers_given_there(
    server_factory: Start, script: Any, tmp_path: Path
) -> None:
    rounds = [
        {"text": "first"},
        {"expect": {"tools": ["mcp__later__echo"]}, **call("mcp__later__echo", text="loaded")},
        {"expect": {"contains": ["echo: loaded"]}, "text": "after load"},
        {"expect": {"tools": ["mcp__again__echo"]}, "text": "after resume"},
    ]
    server = await server_factory("--script", str(script(rounds)))
    editor = FakeEditor(fs=False, terminal=False)
    session = await open_with(server, editor, tmp_path, [])
    assert (await run_prompt(server, session))[0] == "end_turn"
    load = {"sessionId": session, "cwd": str(tmp_path), "mcpServers": [stdio("later")]}
    assert "result" in await server.request("session/load", load)
    stop, frames = await run_prompt(server, session)
    assert (stop, said(frames)) == ("end_turn", "after load")
    resume = {"sessionId": session, "cwd": str(tmp_path), "mcpServers": [stdio("again")]}
    assert "result" in await server.request("session/resume", resume)
    stop, frames = await run_prompt(server, session)
    assert (stop, said(frames)) == ("end_turn", "after resume")
    # The loaded session's server ended when resume replaced it: one server runs.
    assert len(children(server.proc.pid)) == 1


async def test_a_cancel_stops_only_the_call_in_flight(
    server_factory: Start, script: Any, tmp_path: Path
) -> None:
    rounds = [
        call("mcp__s__slow", seconds=30),
        {"expect": {"tools": ["mcp__s__echo"]}, **call("mcp__s__echo", text="still here")},
        {"expect": {"contains": ["echo: still here"]}, "text": "The server still works."},
    ]
    server = await server_factory("--script", str(script(rounds)))
    editor = FakeEditor(fs=False, terminal=False)
    session = await open_with(server, editor, tmp_path, [stdio("s")])
    prompt = {"sessionId": session, "prompt": [{"type": "text", "text": "go"}]}
    req = await server.call("session/prompt", prompt)
    await server.until(
        lambda f: f.get("params", {}).get("update", {}).get("status") == "in_progress", timeout=20
    )
    await server.notify("session/cancel", {"sessionId": session})
    answer, _ = await server.response(req, timeout=10)
    assert answer["result"]["stopReason"] == "cancelled"
    stop, frames = await run_prompt(server, session)
    assert (stop, said(frames)) == ("end_turn", "The server still works.")


async def test_an_editor_that_shows_notices_gets_one_notice_per_failure(
    server_factory: Start, script: Any, tmp_path: Path
) -> None:
    rounds = [
        {"expect": {"tools": ["mcp__ok__fail"]}, **call("mcp__ok__fail", reason="why not")},
        {"expect": {"contains": ["The tool reported an error"]}, "text": "Done."},
        {"text": "Again."},
    ]
    server = await server_factory("--script", str(script(rounds)))
    caps: dict[str, Any] = {"session": {"notices": {}}}
    await server.request("initialize", {"protocolVersion": 1, "clientCapabilities": caps})
    FakeEditor(fs=False, terminal=False).attach(server)
    servers = [stdio("ok"), stdio("gone", "exit")]
    answer = await server.request("session/new", {"cwd": str(tmp_path), "mcpServers": servers})
    session = str(answer["result"]["sessionId"])
    stop, first = await run_prompt(server, session)
    stop2, second = await run_prompt(server, session)
    assert (stop, stop2) == ("end_turn", "end_turn")
    assert (said(first), said(second)) == ("Done.", "Again.")
    every = first + second
    notices = [u for u in updates_of(every) if u["sessionUpdate"] == "notice"]
    assert len(notices) == 1 and "'gone'" in notices[0]["title"], notices
    (fail,) = [u for u in updates_of(first) if u["sessionUpdate"] == "tool_call"]
    assert final_updates(first)[fail["toolCallId"]]["status"] == "failed"


async def test_malformed_servers_on_load_resume_and_fork_are_invalid_params(
    server_factory: Start, tmp_path: Path
) -> None:
    # Their schemas only say "objects": the entries are checked like session/new's (the wire
    # fuzz found internal errors here).
    server = await server_factory()
    await server.request("initialize", {"protocolVersion": 1})
    new = await server.request("session/new", {"cwd": str(tmp_path), "mcpServers": []})
    session = new["result"]["sessionId"]
    bad: list[dict[str, Any]] = [{"command": "/x"}, {"name": "n", "command": "/x", "args": 5}]
    for method in ("session/load", "session/resume", "session/fork"):
        for entry in bad:
            params = {"sessionId": session, "cwd": str(tmp_path), "mcpServers": [entry]}
            answer = await server.request(method, params)
            assert answer["error"]["code"] == -32602, (method, entry, answer)
            assert "mcpServers[0]" in answer["error"]["message"]
