"""MCP server configurations: what the editor sends and the configuration file declares.

No `mcp` import here: this is read on `session/new`, which must stay fast. The editor sends
`mcpServers` entries (ACP `McpServer`): stdio (`command`, `args`, `env`), `http` and `sse`
(`url`, `headers`). `env` and `headers` are accepted both as ACP's list of `{name, value}` and
as an object (CodeCompanion sends an object). The configuration file's `[mcp_servers.NAME]`
tables are merged in; the editor's entry wins when both name the same server, and keeps the
file's timeouts for it.

Tool names offered to the model are `mcp__<server>__<tool>`, within `[a-zA-Z0-9_-]{1,64}`
(strict model APIs reject others): other characters become `_`, and a long name is cut and
made unique with a short hash.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from acp_server import redaction, schemas
from acp_server.errors import InvalidParams

log = logging.getLogger(__name__)

Transport = Literal["stdio", "http", "sse"]
# Whether a server's tools are deferred behind `search_tools` (see `tool_search`): "auto" when
# they would crowd the window, "always" loaded, or "deferred" whatever the window.
ToolsMode = Literal["auto", "always", "deferred"]
TOOLS_MODES: tuple[ToolsMode, ...] = ("auto", "always", "deferred")
STARTUP_TIMEOUT = 10.0  # seconds for a server to start and list its tools
CALL_TIMEOUT = 120.0  # seconds for one tool call
# The defaults for every server; the configuration file sets them per server.
STARTUP_ENV = "ACP_SERVER_MCP_STARTUP_TIMEOUT"
CALL_ENV = "ACP_SERVER_MCP_CALL_TIMEOUT"
NAME_LIMIT = 64
_BAD_CHARS = re.compile(r"[^a-zA-Z0-9_-]")


@dataclass(frozen=True)
class ServerConfig:
    """One MCP server to connect to."""

    name: str
    transport: Transport = "stdio"
    command: str = ""
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    url: str = ""
    headers: tuple[tuple[str, str], ...] = field(default=(), repr=False)  # may hold tokens
    startup_timeout: float = STARTUP_TIMEOUT
    call_timeout: float = CALL_TIMEOUT
    origin: str = "the editor"  # or "the configuration file"
    tools: ToolsMode = "auto"  # the editor's `_meta.acpServer.tools`, or the file's `tools`

    def describe(self) -> str:
        """Where it runs, for a person (no headers or env values: they may be secrets)."""
        if self.transport == "stdio":
            return "stdio: " + " ".join([self.command, *self.args])
        return f"{self.transport}: {self.url}"


def pairs(value: Any, what: str) -> tuple[tuple[str, str], ...]:
    """`env`/`headers` as (name, value) pairs, from a list of `{name, value}` or an object."""
    if value is None:
        return ()
    if isinstance(value, Mapping):
        return tuple((str(k), str(v)) for k, v in value.items())
    if isinstance(value, list) and all(
        isinstance(i, Mapping) and "name" in i and "value" in i for i in value
    ):
        return tuple((str(i["name"]), str(i["value"])) for i in value)
    raise InvalidParams(
        f"Invalid params: `{what}` must be a list of {{name, value}} objects or an object of "
        "names to values.",
        {"field": what},
    )


def from_editor(
    entries: Sequence[Mapping[str, Any]] | None, acp_allowed: bool
) -> list[ServerConfig]:
    """The editor's `mcpServers`, checked; -32602 naming the entry when one cannot be used."""
    # The shape session/new is checked against, for load, resume and fork (and doctor) too.
    found = schemas.problems("acp/session_new.json", {"cwd": "/", "mcpServers": entries or []})
    if found:
        raise InvalidParams("Invalid params: " + "; ".join(found) + ".", {"errors": found})
    servers: list[ServerConfig] = []
    for n, entry in enumerate(entries or ()):
        kind = entry.get("type") or "stdio"
        where = f"mcpServers[{n}]"
        if kind == "acp" and not acp_allowed:
            raise InvalidParams(
                f"Invalid params: {where} ({entry.get('name')!r}) is an MCP-over-ACP server "
                '(type "acp"), which this agent does not support (it does not advertise '
                "mcpCapabilities.acp). Give it as a stdio, http or sse server instead.",
                {"field": f"{where}.type"},
            )
        if kind not in ("stdio", "http", "sse"):
            raise InvalidParams(
                f"Invalid params: {where} has type {kind!r}; this agent connects to stdio, "
                "http and sse MCP servers.",
                {"field": f"{where}.type"},
            )
        servers.append(remembered(_server(entry, _transport(kind), where)))
    return servers


def remembered(server: ServerConfig) -> ServerConfig:
    """`server`, its tokens (headers, env variables named like keys) now hidden everywhere."""
    redaction.remember_headers(server.headers)
    redaction.remember_environment(server.env)
    return server


def seconds_from_env(name: str, default: float) -> float:
    """A timeout from the environment; the default (and a logged error) when it is unusable."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = 0.0
    if value > 0:
        return value
    log.error("%s=%r is not a positive number of seconds; using %g s", name, raw, default)
    return default


def _server(entry: Mapping[str, Any], kind: Transport, where: str) -> ServerConfig:
    return ServerConfig(
        name=str(entry["name"]),
        transport=kind,
        command=str(entry.get("command") or ""),
        args=tuple(str(a) for a in entry.get("args") or ()),
        env=pairs(entry.get("env"), f"{where}.env"),
        url=str(entry.get("url") or ""),
        headers=pairs(entry.get("headers"), f"{where}.headers"),
        startup_timeout=seconds_from_env(STARTUP_ENV, STARTUP_TIMEOUT),
        call_timeout=seconds_from_env(CALL_ENV, CALL_TIMEOUT),
        tools=_tools_mode(entry, where),
    )


def _tools_mode(entry: Mapping[str, Any], where: str) -> ToolsMode:
    """The file's `tools`, or the editor's `_meta.acpServer.tools` (ACP keeps extensions in
    `_meta`); -32602 for a value that is none of the modes."""
    meta = entry.get("_meta")
    ours = meta.get("acpServer") if isinstance(meta, Mapping) else None
    value = entry.get("tools") or (ours.get("tools") if isinstance(ours, Mapping) else None)
    if value is None:
        return "auto"
    for mode in TOOLS_MODES:
        if value == mode:
            return mode
    field_name = "tools" if "tools" in entry else "_meta.acpServer.tools"
    raise InvalidParams(
        f"Invalid params: {where}.{field_name} is {value!r}; it must be one of "
        '"auto" (deferred when the tools would crowd the context window), "always" (always '
        'loaded) or "deferred" (always found through search_tools).',
        {"field": f"{where}.{field_name}"},
    )


def _transport(kind: str) -> Transport:
    return "http" if kind == "http" else "sse" if kind == "sse" else "stdio"


def from_file(tables: Mapping[str, Mapping[str, Any]]) -> list[ServerConfig]:
    """The configuration file's `[mcp_servers.NAME]` tables (already checked by its schema)."""
    servers = []
    for name, table in tables.items():
        kind = table.get("type") or ("stdio" if "command" in table else "http")
        base = _server({**table, "name": name}, _transport(kind), f"mcp_servers.{name}")
        servers.append(
            replace(
                base,
                startup_timeout=float(table.get("startup_timeout", base.startup_timeout)),
                call_timeout=float(table.get("call_timeout", base.call_timeout)),
                origin="the configuration file",
            )
        )
    return servers


def merged(editor: Iterable[ServerConfig], file: Iterable[ServerConfig]) -> list[ServerConfig]:
    """The file's servers and the editor's; on a name clash the editor's wins, with the file's
    timeouts (the editor has no way to give timeouts)."""
    from_file_by_name = {s.name: s for s in file}
    result: dict[str, ServerConfig] = dict(from_file_by_name)
    for server in editor:
        known = from_file_by_name.get(server.name)
        if known is not None:
            server = replace(
                server,
                startup_timeout=known.startup_timeout,
                call_timeout=known.call_timeout,
                tools=server.tools if server.tools != "auto" else known.tools,
            )
        result[server.name] = server
    return list(result.values())


def tool_name(server: str, tool: str, taken: set[str]) -> str:
    """`mcp__<server>__<tool>` as a name every model API accepts, unique among `taken`."""
    name = _BAD_CHARS.sub("_", f"mcp__{server}__{tool}")
    if len(name) > NAME_LIMIT:
        import hashlib  # rarely needed: not with the configuration's imports

        digest = hashlib.sha256(f"{server}\0{tool}".encode()).hexdigest()[:8]
        name = f"{name[: NAME_LIMIT - 9]}_{digest}"
    unique, counter = name, 2
    while unique in taken:
        suffix = f"_{counter}"
        unique, counter = name[: NAME_LIMIT - len(suffix)] + suffix, counter + 1
    return unique
