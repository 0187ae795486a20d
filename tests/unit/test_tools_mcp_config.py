"""MCP server configurations: the editor's entries in both shapes, the configuration file's
tables, the merge, and tool names every model API accepts."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from acp_server.config.file import ConfigError, load_config
from acp_server.errors import InvalidParams
from acp_server.tools.mcp.config import ServerConfig, from_editor, merged, pairs, tool_name

VALID = re.compile(r"[a-zA-Z0-9_-]{1,64}")


def test_env_and_headers_as_a_list_or_an_object() -> None:
    listed = [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]
    assert pairs(listed, "env") == pairs({"A": "1", "B": "2"}, "env") == (("A", "1"), ("B", "2"))
    assert pairs(None, "env") == ()
    with pytest.raises(InvalidParams, match="env"):
        pairs(["A=1"], "env")


def test_editor_entries_of_every_transport() -> None:
    entries: list[dict[str, Any]] = [
        {"name": "s", "command": "/bin/s", "args": ["-v"], "env": {"K": "v"}},
        {"type": "http", "name": "h", "url": "http://127.0.0.1:1/mcp", "headers": []},
        {"type": "sse", "name": "e", "url": "http://127.0.0.1:1/sse", "headers": None},
    ]
    stdio, http, sse = from_editor(entries, acp_allowed=False)
    assert (stdio.transport, stdio.command, stdio.args, stdio.env) == (
        "stdio",
        "/bin/s",
        ("-v",),
        (("K", "v"),),
    )
    assert (http.transport, sse.transport) == ("http", "sse")
    with pytest.raises(InvalidParams, match="MCP-over-ACP"):
        from_editor([{"type": "acp", "name": "a", "serverId": "1"}], acp_allowed=False)


def test_the_editor_wins_a_name_clash_and_keeps_the_files_timeouts() -> None:
    file = [
        ServerConfig("docs", command="/old", startup_timeout=3, call_timeout=7),
        ServerConfig("only-file", command="/f"),
    ]
    editor = [ServerConfig("docs", command="/new"), ServerConfig("only-editor", command="/e")]
    by_name = {s.name: s for s in merged(editor, file)}
    assert set(by_name) == {"docs", "only-file", "only-editor"}
    assert by_name["docs"].command == "/new"
    assert (by_name["docs"].startup_timeout, by_name["docs"].call_timeout) == (3, 7)


def test_tool_names_are_valid_and_unique() -> None:
    taken: set[str] = set()
    plain = tool_name("docs", "search", taken)
    assert plain == "mcp__docs__search"
    odd = tool_name("my server.io", "do/it", taken)
    assert odd == "mcp__my_server_io__do_it"
    long_names = [tool_name("s" * 50, f"tool_{'x' * 40}_{n}", taken) for n in range(3)]
    for name in [plain, odd, *long_names]:
        assert VALID.fullmatch(name), name
        taken.add(name)
    assert len(set(long_names)) == 3
    assert tool_name("docs", "search", taken) == "mcp__docs__search_2"


def test_the_configuration_file_declares_servers_with_timeouts(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(
        "[mcp_servers.docs]\n"
        'command = "/usr/bin/docs-mcp"\n'
        'args = ["--stdio"]\n'
        'env = { DOCS_TOKEN = "t" }\n'
        "startup_timeout = 3\n"
        "call_timeout = 30\n"
        "[mcp_servers.web]\n"
        'type = "http"\n'
        'url = "https://example.com/mcp"\n'
        'headers = { Authorization = "Bearer abc" }\n',
        encoding="utf-8",
    )
    docs, web = load_config(path, {}).mcp_servers
    assert (docs.command, docs.args, docs.env) == (
        "/usr/bin/docs-mcp",
        ("--stdio",),
        (("DOCS_TOKEN", "t"),),
    )
    assert (docs.startup_timeout, docs.call_timeout, docs.origin) == (
        3,
        30,
        "the configuration file",
    )
    assert (web.transport, web.url, web.headers) == (
        "http",
        "https://example.com/mcp",
        (("Authorization", "Bearer abc"),),
    )


def test_a_server_without_command_or_url_is_reported_with_its_line(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('[mcp_servers.broken]\nargs = ["x"]\n', encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_config(path, {})
    assert "mcp_servers.broken" in str(caught.value)


@pytest.mark.parametrize(
    "headers",
    [
        {"Authorization": ["Bearer s3cret-token-value"]},
        [{"name": "Authorization", "value": {"token": "s3cret-token-value"}}],
        [{"name": "Authorization", "value": "Bearer s3cret-token-value"}, "s3cret-token-value"],
    ],
)
def test_unusable_headers_are_refused_without_repeating_their_values(headers: Any) -> None:
    entry = {"type": "http", "name": "web", "url": "http://127.0.0.1:1/mcp", "headers": headers}
    with pytest.raises(InvalidParams) as refused:
        from_editor([entry], acp_allowed=False)
    message = str(refused.value)
    assert "`mcpServers[0].headers` must be a list of {name, value}" in message, message
    assert "or an object of names to" in message
    assert "s3cret" not in message and "schemas" not in message


def test_tools_mode_from_the_file_and_from_the_editors_meta(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(
        "mcp_tool_share = 0.1\n"
        '[mcp_servers.git]\ncommand = "/usr/bin/git-mcp"\ntools = "deferred"\n'
        '[mcp_servers.time]\ncommand = "/usr/bin/time-mcp"\n',
        encoding="utf-8",
    )
    config = load_config(path, {})
    assert config.mcp_tool_share == 0.1
    assert [s.tools for s in config.mcp_servers] == ["deferred", "auto"]
    meta = {"acpServer": {"tools": "always"}}
    editor = from_editor([{"name": "git", "command": "/e", "_meta": meta}], acp_allowed=False)
    assert editor[0].tools == "always"
    by_name = {s.name: s for s in merged(editor, config.mcp_servers)}
    assert by_name["git"].tools == "always"  # the editor's choice wins
    plain = from_editor([{"name": "git", "command": "/e"}], acp_allowed=False)
    assert merged(plain, config.mcp_servers)[0].tools == "deferred"  # else the file's


def test_an_unknown_tools_mode_is_refused_naming_the_field(tmp_path: Path) -> None:
    entry = {"name": "git", "command": "/e", "_meta": {"acpServer": {"tools": "sometimes"}}}
    with pytest.raises(InvalidParams) as caught:
        from_editor([entry], acp_allowed=False)
    assert "mcpServers[0]._meta.acpServer.tools is 'sometimes'" in str(caught.value)
    path = tmp_path / "config.toml"
    path.write_text('[mcp_servers.git]\ncommand = "/g"\ntools = "never"\n', encoding="utf-8")
    with pytest.raises(ConfigError) as refused:
        load_config(path, {})
    assert 'line 3, `mcp_servers.git.tools`: must be one of "auto", "always", "deferred"' in str(
        refused.value
    )
