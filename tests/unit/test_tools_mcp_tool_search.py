"""The tool budget: which MCP tools are deferred, what search_tools finds and loads, how long."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from acp_server.context.profile import ToolRoom
from acp_server.context.tokens import Estimator
from acp_server.messages import ToolSpec
from acp_server.tools.base import Presentation, Tool, ToolContext, ToolOutcome
from acp_server.tools.mcp.config import ToolsMode
from acp_server.tools.mcp.tool_search import SEARCH_TOOL, McpTool, ToolCatalog, rank, spec_of, words


def tool(name: str, description: str, padding: int = 0) -> Tool:
    def present(arguments: dict[str, Any], ctx: ToolContext) -> Presentation:
        return Presentation(name)

    async def run(arguments: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        return ToolOutcome("ran")

    schema = {"type": "object", "description": "x " * padding}
    return Tool(name, description, "other", "execute", present, run, input_schema=schema)


GIT = [
    tool("mcp__git__git_log", "Shows the commit logs."),
    tool("mcp__git__git_status", "Shows the working tree status."),
    tool("mcp__git__git_diff", "Shows differences between branches or commits."),
]
TIME = [tool("mcp__time__get_current_time", "Get the current time in a specific timezone.")]


def catalog(mode: ToolsMode = "auto", share: float = 0.15) -> ToolCatalog:
    found = ToolCatalog(share)
    found.begin_turn([*(McpTool(t, "git", mode) for t in GIT), McpTool(TIME[0], "time")])
    return found


def room(window: int) -> ToolRoom:
    return ToolRoom(window, Estimator().tools)


def test_tools_that_fit_are_offered_and_the_search_tool_is_not() -> None:
    assert catalog().hidden(room(1_000_000)) == {SEARCH_TOOL}


def test_tools_over_the_share_are_deferred_until_found() -> None:
    found = catalog()
    small = room(940)  # 141 tokens for MCP tools: less than the four take
    assert Estimator().tools([spec_of(t) for t in [*GIT, *TIME]]) > 141
    assert found.hidden(small) == {t.name for t in [*GIT, *TIME]}
    answer = found.search("commit log")
    assert answer.startswith("Found 1 tool(s)") and "mcp__git__git_log: Shows" in answer
    assert answer.endswith("not loaded (no room left in the context window): mcp__git__git_diff.")
    assert "mcp__git__git_log" not in found.hidden(small)
    assert "mcp__git__git_status" in found.hidden(small)


def test_a_server_marked_always_is_never_deferred_and_deferred_always_is() -> None:
    always = catalog("always")
    assert always.hidden(room(200)) == {TIME[0].name}
    deferred = catalog("deferred")
    assert deferred.hidden(room(1_000_000)) == {t.name for t in GIT}


def test_a_loaded_tool_stays_while_it_is_used() -> None:
    found = catalog()
    small = room(940)
    found.hidden(small)
    found.search("mcp__git__git_log")
    found.begin_turn(found.tools)  # the next turn: found in the last one, still loaded
    assert "mcp__git__git_log" not in found.hidden(small)
    found.used("mcp__git__git_log")
    found.begin_turn(found.tools)
    assert "mcp__git__git_log" not in found.hidden(small)
    found.begin_turn(found.tools, new=False)  # the same turn again (/compact): still loaded
    assert "mcp__git__git_log" not in found.hidden(small)
    found.begin_turn(found.tools)  # not called in the last turn: unloaded
    assert "mcp__git__git_log" in found.hidden(small)


def test_what_does_not_fit_the_share_is_found_but_not_loaded() -> None:
    big = tool("mcp__big__render_chart", "Render a chart.", padding=2000)
    found = ToolCatalog(0.15)
    found.begin_turn([McpTool(big, "big")])
    found.hidden(room(2000))
    answer = found.search("chart")
    assert "none fits" in answer and "render_chart" in answer
    assert big.name in found.hidden(room(2000))


def test_a_search_without_matches_lists_what_can_be_loaded() -> None:
    found = catalog()
    found.hidden(room(940))
    answer = found.search("weather")
    assert answer.startswith("No tool matches 'weather'")
    assert "git: mcp__git__git_log, mcp__git__git_status" in answer


def test_ranking_prefers_names_and_reads_word_prefixes() -> None:
    entries: Sequence[McpTool] = [McpTool(t, "git") for t in GIT]
    assert [t.tool.name for t in rank("status", entries)] == ["mcp__git__git_status"]
    assert [t.tool.name for t in rank("commit", entries)][:2] == [
        "mcp__git__git_log",
        "mcp__git__git_diff",
    ]
    assert words("getTinyImage git_log") == {"get", "tiny", "image", "git", "log"}


def test_search_answers_plainly_when_nothing_is_deferred() -> None:
    found = catalog()
    found.hidden(room(1_000_000))
    assert found.search("git").startswith("Every tool is already in your tool list")


def test_the_search_tool_is_a_read(tmp_path: Any) -> None:
    made = catalog().tool()
    assert (made.name, made.kind, made.effect) == (SEARCH_TOOL, "search", "read")
    assert isinstance(spec_of(made), ToolSpec)
