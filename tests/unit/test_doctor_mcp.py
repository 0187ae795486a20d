"""`acp-server doctor --mcp`: the report on a working server, on failing ones, on bad JSON."""

from __future__ import annotations

import io
import json
import re
import sys
from pathlib import Path

from acp_server.cli import main
from acp_server.cli.doctor_mcp import check_mcp

MCP_SERVER = Path(__file__).parent.parent / "support" / "mcp_server.py"


def server(name: str, behaviour: str) -> dict[str, object]:
    return {"name": name, "command": sys.executable, "args": [str(MCP_SERVER), behaviour]}


def test_a_working_server_lists_its_tools_with_their_kinds(tmp_path: Path) -> None:
    out = io.StringIO()
    assert check_mcp(json.dumps(server("docs", "normal")), out, tmp_path) == 0
    report = out.getvalue()
    assert "MCP server 'docs'" in report
    total = re.search(r"; 6 tools, ~([\d,]+) tokens \(deferred behind search_tools when", report)
    sizes = [int(n) for n in re.findall(r"\]  ~(\d+) tokens  ", report)]
    assert total and len(sizes) == 6 and all(sizes), report
    assert int(total[1].replace(",", "")) == sum(sizes)
    assert re.search(r"mcp__docs__echo  \[read\]  ~\d+ tokens  Repeat the text back.", report)
    assert "mcp__docs__remove  [delete]" in report and "mcp__docs__add  [other]" in report
    assert "All 1 MCP server(s) work." in report


def test_failing_servers_say_why_and_exit_1(tmp_path: Path) -> None:
    servers = [
        server("gone", "exit"),
        {"name": "missing", "command": str(tmp_path / "no-such-server"), "args": []},
        server("docs", "normal"),
    ]
    out = io.StringIO()
    assert check_mcp(json.dumps(servers), out, tmp_path) == 1
    report = out.getvalue()
    assert "'gone'" in report and "exited with code 1" in report
    assert "exiting at start on purpose" in report  # its stderr, quoted
    assert "could not be started (No such file or directory)" in report
    assert "2 of 3 MCP server(s) could not be used." in report


def test_unusable_json_is_explained(tmp_path: Path) -> None:
    for text, expected in [
        ("{not json", "not valid JSON"),
        ('{"command": "/x"}', 'give an object like {"name"'),
        ('{"name": "x"}', "`mcpServers[0].command` is required"),
        ('{"type": "http", "name": "x", "url": 5}', "`mcpServers[0].url` must be a string"),
        ('{"type": "acp", "name": "a", "serverId": "1"}', "MCP-over-ACP"),
    ]:
        out = io.StringIO()
        assert check_mcp(text, out, tmp_path) == 1
        assert expected in out.getvalue(), out.getvalue()


def test_the_doctor_subcommand_runs_the_check() -> None:
    assert main(["doctor", "--mcp", "{not json"]) == 1


def test_a_server_marked_always_says_so(tmp_path: Path) -> None:
    entry = {**server("docs", "normal"), "_meta": {"acpServer": {"tools": "always"}}}
    out = io.StringIO()
    assert check_mcp(json.dumps(entry), out, tmp_path) == 0
    assert "tokens (always offered):" in out.getvalue()
