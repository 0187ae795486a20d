"""Toolbox cleanup: a client terminal a tool left behind is killed and released, and an editor
that never answers cannot hang that cleanup."""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path
from typing import Any

import pytest

from acp_server.editor_api import EditorApi, NoEditor
from acp_server.messages import ToolCall
from acp_server.permissions import Permissions, RuleStore
from acp_server.tools import base
from acp_server.tools.base import Presentation, Tool, ToolContext, ToolOutcome
from acp_server.tools.toolbox import Toolbox


class SilentEditor(NoEditor):
    """Accepts terminal/kill and terminal/release but does not answer until `answer` is set."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []
        self.answer = asyncio.Event()

    async def kill_terminal(self, terminal_id: str) -> None:
        self.calls.append(("kill", terminal_id))
        await self.answer.wait()

    async def release_terminal(self, terminal_id: str) -> None:
        self.calls.append(("release", terminal_id))
        await self.answer.wait()


async def leaves_a_terminal(args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
    ctx.terminals.append("term-9")
    return ToolOutcome("done")


def in_folder(tools: list[Tool], folder: Path, client: EditorApi | None = None) -> Toolbox:
    """A toolbox for `tools` working in `folder`, with its own permission rules."""
    return Toolbox(
        tools,
        cwd=folder,
        roots=(folder,),
        client=client if client is not None else NoEditor(),
        permissions=Permissions(RuleStore(folder, folder / "data")),
    )


# update_plan's schema validates the arguments; the tool itself is this stand-in.
LEAVER = Tool(
    name="update_plan",
    description="",
    kind="think",
    effect="think",
    present=lambda args, ctx: Presentation("leave a terminal"),
    run=leaves_a_terminal,
)


async def test_unanswered_cleanup_is_bounded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(base, "CLEANUP_SECONDS", 0.05)
    client = SilentEditor()
    toolbox = in_folder([LEAVER], tmp_path, client)
    call = ToolCall("call-1", "update_plan", {"entries": []})
    started = time.monotonic()
    with caplog.at_level(logging.WARNING):
        outcome = await toolbox.run(call, lambda update: None)
    assert time.monotonic() - started < 1
    assert outcome.text == "done"
    assert client.calls == [("kill", "term-9"), ("release", "term-9")]
    assert "terminal/kill did not finish" in caplog.text
    assert "terminal/release did not finish" in caplog.text
    client.answer.set()  # let the abandoned steps finish before the loop closes
    await asyncio.sleep(0)


def test_decorated_tool_names_still_find_the_tool(tmp_path: Path) -> None:
    """llama.cpp's function-calling template made SmolLM2 call `read_file:`."""
    from acp_server.tools.files.fs import READ_FILE

    box = in_folder([READ_FILE], tmp_path)
    for name in ("read_file", "read_file:", " `read_file` ", '"read_file"'):
        assert box.find(name) is READ_FILE
    assert box.find("write_file") is None


class RecordsPermission(NoEditor):
    """Refuses every permission request and keeps what it was shown."""

    def __init__(self) -> None:
        self.asked: list[dict[str, Any]] = []

    async def request_permission(
        self, tool_call: dict[str, Any], options: list[dict[str, Any]]
    ) -> dict[str, Any]:
        self.asked.append(tool_call)
        return {"outcome": "selected", "optionId": "reject_once"}


async def test_a_command_with_backticks_stays_inside_its_fence(tmp_path: Path) -> None:
    from acp_server.markdown import fence
    from acp_server.tools.commands.shell import RUN_COMMAND

    client = RecordsPermission()
    box = in_folder([RUN_COMMAND], tmp_path, client)
    command = "printf '```\\n# not a heading\\n'"
    outcome = await box.run(ToolCall("c1", "run_command", {"command": command}), lambda u: None)
    assert not outcome.ok
    shown = client.asked[0]["content"][0]["content"]["text"]
    assert shown.startswith(fence(command, "sh") + "\n")


async def test_deferred_mcp_tools_are_found_through_search_and_then_offered(
    tmp_path: Path,
) -> None:
    from acp_server.context.profile import ToolRoom
    from acp_server.context.tokens import Estimator
    from acp_server.tools.mcp.tool_search import SEARCH_TOOL, McpTool, ToolCatalog

    async def ran(args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        return ToolOutcome("42 commits")

    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    git_log = Tool(
        "mcp__git__git_log",
        "Shows the commit logs.",
        "read",
        "read",
        lambda args, ctx: Presentation("log"),
        ran,
        input_schema=schema,
    )
    catalog = ToolCatalog(0.15)
    catalog.begin_turn([McpTool(git_log, "git", "deferred")])  # behind the search in any window
    toolbox = Toolbox(
        [LEAVER, git_log],
        cwd=tmp_path,
        roots=(tmp_path,),
        client=NoEditor(),
        permissions=Permissions(RuleStore(tmp_path)),
        catalog=catalog,
    )
    large = ToolRoom(1_000_000, Estimator().tools)
    assert [s.name for s in toolbox.specs()] == ["update_plan", "mcp__git__git_log"]
    assert [s.name for s in toolbox.specs(large)] == ["update_plan", SEARCH_TOOL]
    found = await toolbox.run(ToolCall("c1", SEARCH_TOOL, {"query": "commit logs"}), print)
    assert found.ok and "mcp__git__git_log" in found.text
    assert [s.name for s in toolbox.specs(large)] == [
        "update_plan",
        "mcp__git__git_log",
        SEARCH_TOOL,
    ]
    called = await toolbox.run(ToolCall("c2", "mcp__git__git_log", {"n": 1}), print)
    assert called.text == "42 commits"


async def test_a_key_in_what_a_tool_shows_or_returns_is_hidden(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever the tool: the toolbox hides the agent's keys in its result, its content, its
    raw output and the updates it sends while it runs."""
    key = "sk-test-" + "7" * 32
    monkeypatch.setenv("OPENAI_API_KEY", key)

    async def prints_the_key(args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        ctx.emit({"sessionUpdate": "tool_call_update", "content": [{"text": key}]})
        return ToolOutcome(f"key {key}", content=[{"text": key}], raw_output={"out": [key]})

    show = Tool("show", "", "think", "think", lambda a, c: Presentation(key), prints_the_key, {})
    box = in_folder([show], tmp_path)
    sent: list[dict[str, Any]] = []
    call = ToolCall("c1", "show", {"say": key})
    outcome = await box.run(call, sent.append)
    assert outcome.text == "key [redacted]"
    assert outcome.content == [{"text": "[redacted]"}]
    assert outcome.raw_output == {"out": ["[redacted]"]}
    assert sent == [{"sessionUpdate": "tool_call_update", "content": [{"text": "[redacted]"}]}]
    announced = box.announce(call)  # its title and its input
    assert key not in str(announced) and announced["rawInput"] == {"say": "[redacted]"}


async def test_a_native_call_with_an_empty_optional_string_runs_without_it(
    tmp_path: Path,
) -> None:
    """The rule text-call recovery applies, for calls a server parsed itself (Ollama's and
    llama.cpp's parsers hand over Qwen's grep with `"glob": ""` as written): grep's schema wants
    a non-empty glob or none, and "" can only mean none. A required one is still refused."""
    from acp_server.tools.search.grep import GREP

    (tmp_path / "util.py").write_text("def old_name(x):\n    return x\n")
    box = in_folder([GREP], tmp_path)
    arguments = {"pattern": "old_name", "path": "", "glob": "", "ignore_case": False}
    outcome = await box.run(ToolCall("c1", "grep", arguments), lambda u: None)
    assert outcome.ok and "util.py" in outcome.text, outcome.text
    outcome = await box.run(ToolCall("c2", "grep", {"pattern": ""}), lambda u: None)
    assert not outcome.ok and "pattern" in outcome.text, outcome.text
