"""MCP servers, connected the way a session connects them: `probe` starts one, lists its tools
(the names the model would see, and their size in tokens: what they add to every request
unless they are deferred behind search_tools) and ends it. `acp-server doctor --mcp JSON`
reports that in detail (`cli.doctor_mcp`); plain `acp-server doctor` gives one line per
server of the configuration file (`mcp_checks`).

No `mcp` import at module level: `probe` loads it only when there is a server to check.

Why here and not in `tools/mcp/`: this is one of the doctor's checks, and uses `tools/mcp/` the
way a session does (a connection, its tools, their size), so that it checks what sessions get.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from acp_server.doctor import Check, fail, ok
from acp_server.tools.mcp.config import ServerConfig


@dataclass(frozen=True)
class Listed:
    """One tool as the model would see it."""

    name: str
    kind: str
    about: str  # the first line of its description
    tokens: int = 0  # its name, description and schema, as the agent counts them


@dataclass(frozen=True)
class Probe:
    """What came of connecting to one server: its tools, or why it cannot be used."""

    server: ServerConfig
    seconds: float = 0.0
    tools: list[Listed] = field(default_factory=list)
    why: str | None = None

    @property
    def tokens(self) -> int:
        """What all its tools take in a request, in tokens."""
        return sum(t.tokens for t in self.tools)


def size(found: Probe) -> str:
    """Its tools and their size, for a person: "12 tools, ~1,558 tokens"."""
    count = len(found.tools)
    return f"{count} tool{'' if count == 1 else 's'}, ~{found.tokens:,} tokens"


async def probe(server: ServerConfig, cwd: Path) -> Probe:
    """Connect to `server` within its start-up timeout, list its tools, disconnect."""
    from acp_server.context.tokens import Estimator
    from acp_server.tools.mcp.connection import McpConnection, McpUnavailable
    from acp_server.tools.mcp.tool_search import spec_of
    from acp_server.tools.mcp.tools import kind_of, tools_of

    connection = McpConnection(server, cwd, lambda _: None)
    started = time.monotonic()
    try:
        await connection.connect()
    except McpUnavailable as exc:
        return Probe(server, why=str(exc))
    try:
        listed = []
        count = Estimator().tools
        for tool, remote in zip(tools_of(connection, set()), connection.tools, strict=True):
            about = (remote.description or "").strip().splitlines()
            kind = kind_of(remote.annotations)[0]
            tokens = count([spec_of(tool)])
            listed.append(Listed(tool.name, kind, about[0] if about else "", tokens))
        return Probe(server, time.monotonic() - started, listed)
    finally:
        await connection.close()


def hint(server: ServerConfig) -> str:
    """What to look at when `server` cannot be used."""
    if server.transport == "stdio":
        return (
            "Check that the command exists and runs by itself (editors pass an absolute path), "
            "and read its last output quoted above, if any."
        )
    return "Check that the server is running at that address and that the headers are right."


async def mcp_checks(servers: Sequence[ServerConfig], cwd: Path) -> list[Check]:
    """One line per server of the configuration file: connected with N tools, or why not."""
    probes = await asyncio.gather(*(probe(server, cwd) for server in servers))
    return [_check(found) for found in probes]


def _check(found: Probe) -> Check:
    server = found.server
    title = f"MCP server {server.name} ({server.describe()})"
    if found.why is not None:
        return fail(
            f"{title}: not available, its tools would be missing from every session",
            f"{found.why}.\n{hint(server)}\n`acp-server doctor --mcp` checks a server by itself.",
        )
    return ok(f"{title}: connected in {found.seconds:.1f} s, {size(found)}")
