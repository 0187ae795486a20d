"""`acp-server config` shows every setting the file holds that changes what a session does: the
sandbox level and the [fetch] table too, each with the variable that overrides it when set."""

from __future__ import annotations

import tomllib
from pathlib import Path

from acp_server.config.file import load_config
from acp_server.config.show import render_effective

FILE = """sandbox = "read-only"

[fetch]
enabled = false
allow_private = true
"""


def shown(tmp_path: Path, text: str, env: dict[str, str]) -> str:
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    return render_effective(load_config(path, {}), env)


def test_the_sandbox_level_and_the_fetch_table_are_shown(tmp_path: Path) -> None:
    text = shown(tmp_path, FILE, {})
    assert 'sandbox = "read-only"' in text.splitlines()
    assert "[fetch]\nenabled = false\nallow_private = true\n" in text
    again = tomllib.loads(text)  # still TOML a person can copy back
    assert again["sandbox"] == "read-only"
    assert again["fetch"] == {"enabled": False, "allow_private": True}


def test_a_variable_that_overrides_the_file_is_named(tmp_path: Path) -> None:
    env = {"ACP_SERVER_SANDBOX": "off", "ACP_SERVER_FETCH": "on"}
    lines = shown(tmp_path, FILE, env).splitlines()
    assert 'sandbox = "read-only"  # ACP_SERVER_SANDBOX=off overrides it' in lines
    assert "enabled = false  # ACP_SERVER_FETCH=on overrides it" in lines


def test_unset_the_default_sandbox_is_said_and_no_fetch_table_is_made_up(tmp_path: Path) -> None:
    text = shown(tmp_path, 'default_mode = "plan"\n', {})
    assert "# sandbox: not set (the default, workspace-write)" in text.splitlines()
    assert "[fetch]" not in text
