"""The tool budget: MCP tools deferred behind `search_tools` when they would crowd the window.

Every MCP server adds its tools' schemas to every request: 41 tools took ~4,700 tokens, more than
half of an 8,192-token window before the conversation starts. The MCP tools may take at most
`share` of the window (`TOOL_SHARE`, 15 %, `mcp_tool_share` in the configuration file). When
they would take more, they are *deferred*: the model is offered `search_tools` instead, which
finds tools by the words of their names and descriptions and loads the best matches, as many
as fit in that share, for the following rounds. A loaded tool stays loaded for the rest of the
turn it was found in, and for each next turn as long as it is called. Tools that are not
offered can still be called by name (the toolbox knows them all).

A server's tools can be marked "always" (never deferred, not counted in the share) or
"deferred" (always behind the search, whatever the window); "auto" is the default.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from acp_server.context.profile import ToolRoom, first_sentence
from acp_server.messages import ToolSpec
from acp_server.tools.base import Presentation, Tool, ToolContext, ToolOutcome
from acp_server.tools.mcp.config import ToolsMode

TOOL_SHARE = 0.15  # of the window, the most the MCP tools' descriptions may take
SEARCH_TOOL = "search_tools"
MAX_FOUND = 5  # tools loaded by one search at most
_WORD = re.compile(r"[a-z0-9]+")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
SEARCH_DESCRIPTION = (
    "Find tools of the connected MCP servers that are not in your tool list yet, by words in "
    "their names and descriptions, and load the best matches: from your next step on you can "
    "call them like any other tool. Use it whenever a task needs a capability none of your "
    "tools has."
)


@dataclass(frozen=True)
class McpTool:
    """An MCP tool as the catalog sees it: the tool, its server and that server's mode."""

    tool: Tool
    server: str
    mode: ToolsMode = "auto"


def spec_of(tool: Tool) -> ToolSpec:
    """The tool as offered to the model (MCP tools carry their schema)."""
    return ToolSpec(tool.name, tool.description, tool.input_schema or {"type": "object"})


def words(text: str) -> set[str]:
    """The words of a name or description, lowercased (`gitLog`, `git_log` → git, log)."""
    return set(_WORD.findall(_CAMEL.sub(" ", text).lower()))


class ToolCatalog:
    """The MCP tools of one session, which of them are deferred, and what is loaded."""

    def __init__(self, share: float = TOOL_SHARE) -> None:
        self.share = share
        self._tools: dict[str, McpTool] = {}
        self._loaded: dict[str, int] = {}  # name: the turn it was last found or called in
        self._turn = 0
        self._deferred: list[McpTool] = []  # as decided for the latest request
        self._room: ToolRoom | None = None

    def begin_turn(self, tools: Iterable[McpTool], *, new: bool = True) -> None:
        """A new turn (`new`; else the same one, e.g. for /compact), with the servers' tools
        as they are now; tools neither found nor called in the last turn are unloaded."""
        self._turn += 1 if new else 0
        self._tools = {t.tool.name: t for t in tools}
        self._loaded = {
            name: turn
            for name, turn in self._loaded.items()
            if name in self._tools and turn >= self._turn - 1
        }

    @property
    def tools(self) -> list[McpTool]:
        return list(self._tools.values())

    def limit(self, room: ToolRoom) -> int:
        """The most the MCP tools may take in this window, in tokens."""
        return int(room.window * self.share)

    def hidden(self, room: ToolRoom) -> set[str]:
        """The names left out of the next request: the deferred tools not loaded, or the search
        tool when nothing is deferred."""
        self._room = room
        auto = [t for t in self._tools.values() if t.mode == "auto"]
        deferred = [t for t in self._tools.values() if t.mode == "deferred"]
        if room.measure([spec_of(t.tool) for t in auto]) > self.limit(room):
            deferred += auto
        self._deferred = deferred
        if not deferred:
            return {SEARCH_TOOL}
        return {t.tool.name for t in deferred if t.tool.name not in self._loaded}

    def used(self, name: str) -> None:
        """A loaded tool was called: it stays loaded for the next turn too."""
        if name in self._loaded:
            self._loaded[name] = self._turn

    def servers(self) -> dict[str, int]:
        """Each server with tools, and how many."""
        counts: dict[str, int] = {}
        for t in self._tools.values():
            counts[t.server] = counts.get(t.server, 0) + 1
        return counts

    def search(self, query: str) -> str:
        """Find and load the best matches for `query`; the answer for the model."""
        if not self._deferred:
            return "Every tool is already in your tool list: call the one you need directly."
        ranked = rank(query, self._deferred)
        if not ranked:
            return f"No tool matches {query!r}. {self._inventory()}"
        loaded, left = self._load(ranked[:MAX_FOUND])
        lines = [f"- {t.tool.name}: {first_sentence(t.tool.description)}" for t in loaded]
        text = (
            f"Found {len(loaded)} tool(s); they are loaded, so call them directly from your "
            "next step on:\n" + "\n".join(lines)
            if loaded
            else "Found tools, but none fits in this model's context window now."
        )
        if left:
            names = ", ".join(t.tool.name for t in left)
            text += f"\nAlso found, not loaded (no room left in the context window): {names}."
        return text

    def _load(self, found: Sequence[McpTool]) -> tuple[list[McpTool], list[McpTool]]:
        """Load what fits within the share, unloading the oldest others first."""
        room = self._room
        if room is None:  # not offered yet: nothing to measure against
            return [], list(found)
        names = {t.tool.name for t in found}
        for name in found_names_first(self._loaded, names):
            self._loaded.pop(name)
            if self._room_left(room, found) >= 0:
                break
        loaded: list[McpTool] = []
        for t in found:
            loaded.append(t)
            if self._room_left(room, loaded) < 0:
                loaded.pop()
        for t in loaded:
            self._loaded[t.tool.name] = self._turn
        return loaded, [t for t in found if t not in loaded]

    def _room_left(self, room: ToolRoom, adding: Sequence[McpTool]) -> int:
        kept = [t.tool for t in self._tools.values() if t.tool.name in self._loaded]
        kept += [t.tool for t in adding if t.tool.name not in self._loaded]
        specs = [spec_of(t) for t in kept]
        search = ToolSpec(SEARCH_TOOL, SEARCH_DESCRIPTION, {"type": "object"})
        return self.limit(room) - room.measure([search, *specs])

    def _inventory(self) -> str:
        by_server: dict[str, list[str]] = {}
        for t in self._deferred:
            by_server.setdefault(t.server, []).append(t.tool.name)
        listed = "; ".join(f"{s}: {', '.join(names)}" for s, names in by_server.items())
        return f"The tools that can be loaded are: {listed}."

    def tool(self) -> Tool:
        """The `search_tools` tool of this catalog."""

        def present(arguments: dict[str, Any], ctx: ToolContext) -> Presentation:
            return Presentation(f"Search tools: {arguments.get('query', '')}")

        async def run(arguments: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
            return ToolOutcome(self.search(str(arguments["query"])))

        return Tool(
            name=SEARCH_TOOL,
            description=SEARCH_DESCRIPTION,
            kind="search",
            effect="read",
            present=present,
            run=run,
        )


def found_names_first(loaded: dict[str, int], keep: set[str]) -> list[str]:
    """The loaded names that may be unloaded to make room, oldest first."""
    return [name for name, _ in sorted(loaded.items(), key=lambda kv: kv[1]) if name not in keep]


def rank(query: str, tools: Sequence[McpTool]) -> list[McpTool]:
    """The tools that match `query`, best first: a word in the name counts twice as much as
    one in the description; a full tool name finds that tool alone."""
    exact = [t for t in tools if t.tool.name == query.strip()]
    if exact:
        return exact
    wanted = words(query)
    scored = []
    for n, t in enumerate(tools):
        name = words(t.tool.name) | words(t.server)
        text = words(t.tool.description)
        score = sum(2 * _hit(w, name) + _hit(w, text) for w in wanted)
        if score:
            scored.append((-score, n, t))
    return [t for _, _, t in sorted(scored, key=lambda s: (s[0], s[1]))]


def _hit(word: str, vocabulary: set[str]) -> int:
    """1 when `word` is in `vocabulary` or starts one of its words (`commit` → `commits`)."""
    if len(word) < 2:
        return 0
    return int(word in vocabulary or any(v.startswith(word) for v in vocabulary))
