"""`acp-server doctor --mcp JSON`: connect to MCP servers the way a session would, and say
what came of it: each server's tools (the names the model sees, their kind, size in tokens
and description) and their total size, or why it could not be used. Useful when a user's
server "does not show up", or to see what a server costs every request.

JSON is one server as an editor sends it in `mcpServers` (stdio: `name`, `command`, `args`,
`env`; http/sse: `type`, `name`, `url`, `headers`), or a list of them. Exit code 0 when every
server connected, 1 otherwise (or when the JSON cannot be used).

Why here and not in `tools/mcp/`: this is a command (its arguments, its printing, its exit code),
beside `cli/doctor.py` whose option it is; the probe is `doctor/mcp.py`, the servers `tools/mcp/`.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, TextIO

from acp_server.doctor.mcp import hint, probe, size
from acp_server.errors import InvalidParams
from acp_server.tools.mcp.config import ServerConfig, from_editor


def check_mcp(text: str, out: TextIO, cwd: Path | None = None) -> int:
    """Connect to the servers `text` describes, report to `out`; 0 when all connected."""
    try:
        servers = _servers(text)
    except ValueError as exc:
        out.write(f"The MCP server configuration cannot be used: {exc}\n")
        return 1
    results = asyncio.run(_check_all(servers, cwd or Path.cwd(), out))
    failed = results.count(False)
    if failed:
        out.write(f"\n{failed} of {len(results)} MCP server(s) could not be used.\n")
        return 1
    out.write(f"\nAll {len(results)} MCP server(s) work.\n")
    return 0


def _servers(text: str) -> list[ServerConfig]:
    try:
        data: Any = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"it is not valid JSON ({exc.msg} at line {exc.lineno}).") from None
    entries = data if isinstance(data, list) else [data]
    if not entries or not all(isinstance(e, dict) and e.get("name") for e in entries):
        raise ValueError(
            'give an object like {"name": "docs", "command": "/path/to/server", "args": []} '
            'or {"type": "http", "name": "web", "url": "https://…"}, or a list of them.'
        )
    try:
        return from_editor(entries, acp_allowed=False)
    except InvalidParams as exc:
        raise ValueError(str(exc).removeprefix("Invalid params: ")) from None


async def _check_all(servers: list[ServerConfig], cwd: Path, out: TextIO) -> list[bool]:
    results = []
    for server in servers:
        results.append(await _check(server, cwd, out))
    return results


def _offered(server: ServerConfig) -> str:
    """How a session offers its tools, for a person."""
    if server.tools == "always":
        return "always offered"
    if server.tools == "deferred":
        return "always found through search_tools"
    return "deferred behind search_tools when all MCP tools exceed the tool budget"


async def _check(server: ServerConfig, cwd: Path, out: TextIO) -> bool:
    """Connect to one server and list its tools; False when it cannot be used."""
    out.write(f"MCP server {server.name!r} ({server.describe()})\n")
    found = await probe(server, cwd)
    if found.why is not None:
        out.write(f"  not available: {found.why}.\n  {hint(server)}\n")
        return False
    out.write(f"  connected in {found.seconds:.1f} s; {size(found)} ({_offered(server)}):\n")
    for tool in found.tools:
        line = f"    {tool.name}  [{tool.kind}]  ~{tool.tokens:,} tokens  {tool.about}"
        out.write(line.rstrip() + "\n")
    return True
