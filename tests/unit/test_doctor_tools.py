"""doctor's lines about the fixed part: the project instructions found and the tools offered."""

from __future__ import annotations

from pathlib import Path

import pytest

from acp_server.doctor.tools import tool_specs, tools_checks
from acp_server.tools.defaults import default_tools


@pytest.fixture
def config_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("ACP_SERVER_CONFIG", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    return tmp_path / "config" / "acp-server"


def test_every_tool_a_session_offers_is_listed_and_measured(
    tmp_path: Path, config_dir: Path
) -> None:
    _, tools = tools_checks(None, tmp_path)
    names = [t.name for t in default_tools()]
    assert [s.name for s in tool_specs()] == names
    assert f"Tools: {len(names)} offered ({', '.join(names)})" in tools.line
    assert "tokens per request" in tools.line and "compact profile: ~" in tools.line


def test_the_instructions_found_are_named_with_their_cost(tmp_path: Path, config_dir: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "AGENTS.md").write_text("Use pnpm. " * 100, encoding="utf-8")
    config_dir.mkdir(parents=True)
    (config_dir / "AGENTS.md").write_text("Be brief.", encoding="utf-8")
    found, tools = tools_checks(None, project)
    assert found.status == "ok"
    assert f"{config_dir / 'AGENTS.md'}, AGENTS.md (~" in found.line
    empty = tmp_path / "empty"
    empty.mkdir()
    (config_dir / "AGENTS.md").unlink()
    (none, plain) = tools_checks(None, empty)
    assert "none found" in none.line
    assert _tokens(plain.line) < _tokens(tools.line)  # the instructions count in the fixed part


def _tokens(line: str) -> int:
    return int(line.split("system prompt ~")[1].split(" tokens")[0].replace(",", ""))


def test_the_tools_are_those_a_session_would_offer(tmp_path: Path, config_dir: Path) -> None:
    from acp_server.settings import FetchSettings

    _, on = tools_checks(None, tmp_path, FetchSettings(enabled=True))
    _, off = tools_checks(None, tmp_path, FetchSettings(enabled=False))
    assert "fetch_url" in on.line and "fetch_url" not in off.line
    assert "command_output" in off.line and "stop_command" in off.line
