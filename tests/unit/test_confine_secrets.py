"""The list of secret locations (`is_secret`, `hidden_paths`), the Landlock rules built around
them inside a writable root, and the allowlisted environment of commands."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from acp_server.confine import command_env, secrets
from acp_server.confine.landlock_exec import writable


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """HOME at `tmp/home/u`, where `tmp/home -> var/home`; the agent's folders inside it."""
    (tmp_path / "var" / "home" / "u").mkdir(parents=True)
    (tmp_path / "home").symlink_to("var/home")
    home = tmp_path / "home" / "u"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("ACP_SERVER_DATA_DIR", str(home / "agent-data"))
    monkeypatch.setenv("XDG_STATE_HOME", str(home / ".local" / "state"))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.delenv("ACP_SERVER_CONFIG", raising=False)
    return home


def test_credentials_history_and_the_agents_folders_are_secret(home: Path) -> None:
    for name in (".ssh/id_ed25519", ".config/gh/hosts.yml", ".cargo/credentials.toml",
                 ".bash_history", ".password-store/x.gpg", "agent-data/sessions.sqlite3",
                 ".local/state/acp-server/log/acp-server.log", ".config/acp-server/config.toml",
                 ".docker/config.json", ".kube/config"):  # fmt: skip
        assert secrets.is_secret(home / name), name
    for name in (".bashrc", "code/main.py", ".config/git/config", ".cargo/bin/rg"):
        assert not secrets.is_secret(home / name), name


def test_a_secret_is_known_by_its_real_path_and_through_a_link(home: Path, tmp_path: Path) -> None:
    real = tmp_path / "var" / "home" / "u"
    assert secrets.is_secret(real / ".ssh" / "id_ed25519")
    (home / ".ssh").mkdir()
    (home / "notes.txt").symlink_to(home / ".ssh" / "id_ed25519")
    assert secrets.is_secret(home / "notes.txt")  # where it leads


def test_hidden_paths_are_those_that_exist_under_both_names_without_nesting(
    home: Path, tmp_path: Path
) -> None:
    (home / ".ssh").mkdir()
    (home / ".config" / "acp-server").mkdir(parents=True)
    (home / ".config" / "acp-server" / "config.toml").write_text("")
    hidden = set(secrets.hidden_paths())
    real = tmp_path / "var" / "home" / "u"
    assert {home / ".ssh", real / ".ssh", home / ".config" / "acp-server"} <= hidden
    assert home / ".config" / "acp-server" / "config.toml" not in hidden  # its folder is
    assert home / ".aws" not in hidden


def test_a_writable_root_holding_a_secret_is_granted_around_it(tmp_path: Path) -> None:
    root = tmp_path / "home"
    (root / ".ssh").mkdir(parents=True)
    (root / "code" / "src").mkdir(parents=True)
    (root / ".config" / "gh").mkdir(parents=True)
    (root / ".config" / "git").mkdir()
    (root / ".bashrc").write_text("")
    hidden = [str(root / ".ssh"), str(root / ".config" / "gh")]
    grants = set(writable(str(root), hidden))
    assert grants == {str(root / "code"), str(root / ".bashrc"), str(root / ".config" / "git")}
    assert writable(str(root / "code"), hidden) == [str(root / "code")]
    assert writable(str(root / ".ssh" / "inner"), hidden) == []


def test_commands_keep_the_allowlist_and_the_named_variables_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-" + "7" * 30)
    source = {
        "PATH": "/bin", "HOME": "/h", "LANG": "C.UTF-8", "LC_TIME": "C", "TERM": "xterm",
        "GITHUB_TOKEN": "ghp_x", "AWS_SECRET_ACCESS_KEY": "a", "SSH_AUTH_SOCK": "/s",
        "DOCKER_HOST": "unix:///d", "PWD": "/agent", "CARGO_HOME": "/c", "CARGO_TARGET": "t",
        "OPENAI_API_KEY": "sk-" + "7" * 30,
    }  # fmt: skip
    kept = command_env.command_environment(source)
    assert kept == {"PATH": "/bin", "HOME": "/h", "LANG": "C.UTF-8", "LC_TIME": "C",
                    "TERM": "xterm"}  # fmt: skip
    named = command_env.command_environment(source, ("CARGO_*", "OPENAI_API_KEY"))
    assert named["CARGO_HOME"] == "/c" and named["CARGO_TARGET"] == "t"
    assert "OPENAI_API_KEY" not in named  # the agent's own keys, named or not


def test_keep_env_leaves_an_editor_terminal_the_allowlist(tmp_path: Path) -> None:
    argv = command_env.terminal_argv(["/bin/sh", "-c", "env"], ("EXTRA",), ("PAGER",))
    env = {"PATH": os.environ.get("PATH", "/bin"), "GITHUB_TOKEN": "t", "EXTRA": "e",
           "PAGER": "cat", "LC_ALL": "C"}  # fmt: skip
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    names = {line.split("=", 1)[0] for line in done.stdout.splitlines()}
    assert {"PATH", "EXTRA", "PAGER", "LC_ALL"} <= names and "GITHUB_TOKEN" not in names
    assert argv[0] == sys.executable
