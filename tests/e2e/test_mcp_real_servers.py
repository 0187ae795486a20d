"""MCP servers nobody here wrote, through the real console script: `@modelcontextprotocol/
server-everything` and `server-filesystem` (npm, pinned in tests/package.json) and
`mcp-server-git` and `mcp-server-time` (PyPI, pinned in the `test` extra). 41 tools: in an
8,192-token window they are deferred behind `search_tools` and found on demand; in a 1M window
all of them are offered directly. A call per server, the tiny image, structured content, a
server killed mid-session, and nothing left running after `session/close`."""

from __future__ import annotations

import asyncio
import io
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from acp_server.cli.doctor_mcp import check_mcp
from acp_server.context.tokens import Estimator
from acp_server.messages import ToolSpec
from acp_server.tools.mcp.tool_search import SEARCH_TOOL, TOOL_SHARE
from tests.e2e.test_mcp_e2e import children, open_with, said
from tests.e2e.test_tools_e2e import call, final_updates, run_prompt, tool_calls
from tests.support.fake_editor import FakeEditor
from tests.support.mock_llm import MockLLM

Start = Any
TESTS = Path(__file__).parent.parent
PACKAGES = TESTS / "node_modules" / "@modelcontextprotocol"
NODE = TESTS / "node_modules" / ".bin" / "node"
SMALL = 8192
# server-everything offers its elicitation tools (trigger-elicitation-request and
# trigger-url-elicitation) because the agent answers MCP elicitation (tools/mcp/elicit.py).
COUNTS = {"everything": 15, "filesystem": 14, "git": 12, "time": 2}


def git_repo(path: Path) -> Path:
    """A repository with one commit, made without the user's git configuration."""
    path.mkdir()
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    who = ["-c", "user.name=Test", "-c", "user.email=test@example.invalid"]
    (path / "notes.txt").write_text("first line\n", encoding="utf-8")
    for args in (["init", "-q"], ["add", "notes.txt"], [*who, "commit", "-qm", "Add the notes"]):
        subprocess.run(["git", *args], cwd=path, env=env, check=True)
    return path


def servers(repo: Path) -> list[dict[str, Any]]:
    """The four servers as the editor sends them in `session/new`."""

    def entry(name: str, command: str, *args: str) -> dict[str, Any]:
        return {"name": name, "command": command, "args": list(args), "env": []}

    return [
        entry("everything", str(NODE), str(PACKAGES / "server-everything/dist/index.js"), "stdio"),
        entry(
            "filesystem", str(NODE), str(PACKAGES / "server-filesystem/dist/index.js"), str(repo)
        ),
        entry("git", sys.executable, "-m", "mcp_server_git", "--repository", str(repo)),
        entry("time", sys.executable, "-m", "mcp_server_time", "--local-timezone", "UTC"),
    ]


@pytest.mark.parametrize("window", [SMALL, 4096])
async def test_a_small_window_finds_a_git_tool_through_search(
    server_factory: Start, script: Any, tmp_path: Path, window: int
) -> None:
    repo = git_repo(tmp_path / "repo")
    hidden = ["mcp__git__git_log", "mcp__time__get_current_time", "mcp__everything__echo"]
    rounds = [
        {  # "hello": every MCP tool deferred (8,192 tokens: the default window)
            "expect": {
                "tools": [SEARCH_TOOL, "read_file"],
                "not_tools": hidden,
                "contains": ["git (12 tools)", "everything (15 tools)", "time (2 tools)"],
            },
            "text": "Hello!",
        },
        {"expect": {"not_tools": hidden}, **call(SEARCH_TOOL, query="git log of commits")},
        {
            "expect": {"tools": ["mcp__git__git_log"], "contains": ["mcp__git__git_log:"]},
            **call("mcp__git__git_log", repo_path=str(repo), max_count=1),
        },
        {"expect": {"contains": ["Add the notes"]}, "text": "The last commit adds the notes."},
        # The next turn: the git tool was used, so it is still loaded.
        {"expect": {"tools": ["mcp__git__git_log"], "not_tools": hidden[1:]}, "text": "Yes."},
    ]
    editor = FakeEditor(fs=False, terminal=False)
    server = await server_factory("--script", str(script(rounds)), "--context-window", f"{window}")
    session = await open_with(server, editor, repo, servers(repo))

    stop, frames = await run_prompt(server, session, "hello")
    assert stop == "end_turn" and said(frames) == "Hello!", said(frames)
    stop, frames = await run_prompt(server, session, "what was the last commit?")
    assert stop == "end_turn", said(frames)
    assert "did not match" not in said(frames), said(frames)
    log = final_updates(frames)[tool_calls(frames)["mcp__git__git_log"]["toolCallId"]]
    assert log["status"] == "completed"
    stop, frames = await run_prompt(server, session, "still there?")
    assert said(frames) == "Yes.", said(frames)


def offered(request: Any) -> list[ToolSpec]:
    """The tools of a chat-completions or Anthropic request body."""
    tools = request.json.get("tools", [])
    if request.path == "/v1/messages":
        return [ToolSpec(t["name"], t["description"], t["input_schema"]) for t in tools]
    return [
        ToolSpec(t["function"]["name"], t["function"]["description"], t["function"]["parameters"])
        for t in tools
    ]


def chats(mock: MockLLM) -> list[Any]:
    return [r for r in mock.requests if r.path in ("/v1/chat/completions", "/v1/messages")]


def image_after_the_result(request: Any) -> dict[str, Any]:
    """The image of the last tool result: in the tool_result (Anthropic), or in the user
    message right after the tool message (OpenAI chat: tool messages carry text only)."""
    last = request.json["messages"][-1]
    assert last["role"] == "user", request.json["messages"][-2:]
    if request.path == "/v1/messages":
        result = next(b for b in last["content"] if b["type"] == "tool_result")
        image = next(b for b in result["content"] if b["type"] == "image")
        return {"mime": image["source"]["media_type"], "data": image["source"]["data"]}
    assert request.json["messages"][-2]["role"] == "tool"
    part = next(p for p in last["content"] if p["type"] == "image_url")
    head, data = part["image_url"]["url"].split(",", 1)
    return {"mime": head.removeprefix("data:").removesuffix(";base64"), "data": data}


def mcp_part(tools: list[ToolSpec]) -> list[ToolSpec]:
    return [t for t in tools if t.name.startswith("mcp__") or t.name == SEARCH_TOOL]


async def open_on_mock(
    server_factory: Start, mock: MockLLM, repo: Path, window: int, dialect: str = "openai"
) -> tuple[Any, str]:
    env = {
        "OPENAI_BASE_URL": f"{mock.url}/v1",
        "OPENAI_API_KEY": "sk-mock",
        "ANTHROPIC_BASE_URL": mock.url,
        "ANTHROPIC_API_KEY": "sk-ant-mock",
    }
    mock.set(context_length=window)
    args = ["--model", f"{dialect}:mock-model", "--context-window", str(window)]
    server = await server_factory(*args, env=env)
    editor = FakeEditor(fs=False, terminal=False)
    return server, await open_with(server, editor, repo, servers(repo))


async def test_the_fixed_part_stays_within_the_share(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path
) -> None:
    repo = git_repo(tmp_path / "repo")
    log = {"repo_path": str(repo), "max_count": 1}
    mock_llm.queue(
        {"tool_calls": [{"id": "s1", "name": SEARCH_TOOL, "arguments": {"query": "git log"}}]},
        {"tool_calls": [{"id": "g1", "name": "mcp__git__git_log", "arguments": log}]},
        {"text": "One commit."},
    )
    server, session = await open_on_mock(server_factory, mock_llm, repo, SMALL)
    stop, frames = await run_prompt(server, session, "what was the last commit?")
    assert stop == "end_turn", said(frames)
    # Our own tools take ~45 % of this window: the loaded tool's result may be compacted
    # around (a summary request offers no tools), so the rounds are the requests with tools.
    first, second, third = [r for r in chats(mock_llm) if offered(r)]
    for request in (first, second, third):
        assert Estimator().tools(mcp_part(offered(request))) <= TOOL_SHARE * SMALL
    assert [t.name for t in mcp_part(offered(first))] == [SEARCH_TOOL]
    assert "mcp__git__git_log" in [t.name for t in offered(second)]
    assert "Add the notes" in json.dumps(third.json["messages"][-1])


@pytest.mark.parametrize("dialect", ["openai", "anthropic"])
async def test_the_tiny_image_reaches_a_vision_model(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path, dialect: str
) -> None:
    repo = git_repo(tmp_path / "repo")
    mock_llm.queue(
        {"tool_calls": [{"id": "s1", "name": SEARCH_TOOL, "arguments": {"query": "tiny image"}}]},
        {"tool_calls": [{"id": "i1", "name": "mcp__everything__get-tiny-image", "arguments": {}}]},
        {"text": "A tiny picture."},
    )
    # 16K: the tools are still deferred, and the image (counted as ~1,000 tokens) leaves room.
    server, session = await open_on_mock(server_factory, mock_llm, repo, 2 * SMALL, dialect)
    stop, frames = await run_prompt(server, session, "show me a tiny image")
    assert stop == "end_turn", said(frames)
    _, second, third = chats(mock_llm)
    assert "mcp__everything__get-tiny-image" in [t.name for t in offered(second)]
    # The picture is an image part of the next request, as the server sent it.
    call_id = tool_calls(frames)["mcp__everything__get-tiny-image"]["toolCallId"]
    shown = final_updates(frames)[call_id]["content"]
    sent = next(c["content"] for c in shown if c["content"]["type"] == "image")
    assert image_after_the_result(third) == {"mime": sent["mimeType"], "data": sent["data"]}


async def test_a_large_window_offers_every_tool_and_each_server_answers(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path
) -> None:
    repo = git_repo(tmp_path / "repo")
    calls = [
        ("mcp__everything__echo", {"message": "ping"}),
        ("mcp__everything__get-structured-content", {"location": "New York"}),
        ("mcp__filesystem__read_text_file", {"path": str(repo / "notes.txt")}),
        ("mcp__git__git_status", {"repo_path": str(repo)}),
        ("mcp__time__get_current_time", {"timezone": "UTC"}),
    ]
    mock_llm.queue(
        *(
            {"tool_calls": [{"id": f"c{n}", "name": name, "arguments": args}]}
            for n, (name, args) in enumerate(calls)
        ),
        {"text": "All done."},
    )
    server, session = await open_on_mock(server_factory, mock_llm, repo, 1_000_000)
    editor_answers = await run_prompt(server, session, "use every server")
    stop, frames = editor_answers
    assert stop == "end_turn", said(frames)
    requests = chats(mock_llm)
    names = [t.name for t in offered(requests[0])]
    assert SEARCH_TOOL not in names
    for server_name, count in COUNTS.items():
        assert len([n for n in names if n.startswith(f"mcp__{server_name}__")]) == count
    finals = final_updates(frames)
    shown = tool_calls(frames)
    for name, _ in calls:
        assert finals[shown[name]["toolCallId"]]["status"] == "completed", finals
    results = json.dumps(requests[-1].json["messages"])
    assert "echo: ping" in results.lower() or "ping" in results
    assert "first line" in results and "temperature" in results.lower()
    structured = finals[shown["mcp__everything__get-structured-content"]["toolCallId"]]
    assert structured.get("rawOutput"), structured
    assert "UTC" in results or "timezone" in results


async def test_a_server_killed_mid_session_and_close_leaves_no_process(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path
) -> None:
    repo = git_repo(tmp_path / "repo")
    now = {"timezone": "UTC"}
    mock_llm.queue(
        {"tool_calls": [{"id": "t1", "name": "mcp__time__get_current_time", "arguments": now}]},
        {"text": "Noted."},
        {"tool_calls": [{"id": "t2", "name": "mcp__time__get_current_time", "arguments": now}]},
        {"text": "Still working."},
        {"text": "You are welcome."},
    )
    server, session = await open_on_mock(server_factory, mock_llm, repo, 1_000_000)
    stop, frames = await run_prompt(server, session, "what time is it?")
    assert stop == "end_turn", said(frames)
    agent = server.proc.pid
    running = children(agent)
    assert len(running) == 4, running
    time_server = next(p for p in running if b"mcp_server_time" in cmdline(p))
    os.kill(time_server, signal.SIGKILL)
    for _ in range(100):  # until the agent has reaped it: killed between calls, not during one
        if time_server not in children(agent):
            break
        await asyncio.sleep(0.05)
    stop, frames = await run_prompt(server, session, "and now?")
    assert stop == "end_turn", said(frames)
    # Killed between calls: the user is told, and the next call starts it again.
    assert [u["status"] for u in final_updates(frames).values()] == ["completed"]
    assert len(children(agent)) == 4
    stop, frames = await run_prompt(server, session, "thanks")  # told at the next turn
    assert "The MCP server 'time' stopped (it exited with code -9)" in said(frames)
    await server.request("session/close", {"sessionId": session})
    assert children(agent) == []


def cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def test_doctor_lists_each_servers_tool_count_and_size(tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo")
    out = io.StringIO()
    assert check_mcp(json.dumps(servers(repo)), out, repo) == 0, out.getvalue()
    report = out.getvalue()
    for name, count in COUNTS.items():
        found = re.search(
            rf"MCP server '{name}' .*\n  connected in .*; {count} tools, ~([\d,]+)", report
        )
        assert found and int(found[1].replace(",", "")) > 100 * count // 2, report


async def test_a_server_marked_always_in_meta_is_offered_in_a_small_window(
    server_factory: Start, script: Any, tmp_path: Path
) -> None:
    repo = git_repo(tmp_path / "repo")
    given = servers(repo)
    given[2]["_meta"] = {"acpServer": {"tools": "always"}}  # git
    given[3]["_meta"] = {"acpServer": {"tools": "deferred"}}  # time
    rounds = [
        {
            "expect": {
                "tools": ["mcp__git__git_log", "mcp__git__git_status", SEARCH_TOOL],
                "not_tools": ["mcp__time__get_current_time", "mcp__everything__echo"],
            },
            "text": "Hello!",
        }
    ]
    editor = FakeEditor(fs=False, terminal=False)
    server = await server_factory("--script", str(script(rounds)))
    session = await open_with(server, editor, repo, given)
    stop, frames = await run_prompt(server, session, "hello")
    assert stop == "end_turn" and said(frames) == "Hello!", said(frames)
