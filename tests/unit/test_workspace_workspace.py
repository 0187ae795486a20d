"""The workspace of a session: nested instructions once a tool worked in their folder, the user
told once per file, git asked after session/new and again per turn."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from acp_server.messages import ToolCall, text_message
from acp_server.workspace.workspace import Workspace, user_folder


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def made(tmp_path: Path) -> Workspace:
    (tmp_path / "p" / ".git").mkdir(parents=True)
    write(tmp_path / "p" / "AGENTS.md", "ROOT")
    write(tmp_path / "p" / "app" / "AGENTS.md", "APP")
    write(tmp_path / "p" / "app" / "deep" / "CLAUDE.md", "DEEP")
    write(tmp_path / "p" / "app" / "deep" / "x.py", "")
    write(tmp_path / "cfg" / "AGENTS.md", "USER")
    return Workspace(tmp_path / "p", (), tmp_path / "cfg")


def call(**arguments: object) -> ToolCall:
    return ToolCall("c1", "read_file", dict(arguments))


def texts(workspace: Workspace) -> list[str]:
    return [f.text for f in workspace.found()]


def test_a_nested_file_applies_once_a_tool_worked_under_its_folder(tmp_path: Path) -> None:
    workspace = made(tmp_path)
    assert texts(workspace) == ["USER", "ROOT"]
    assert workspace.touched(call(pattern="*.py")) is False  # no path: nothing noted
    assert workspace.touched(call(path="app/deep/x.py")) is True
    assert texts(workspace) == ["USER", "ROOT", "APP", "DEEP"]  # every folder on the way down
    assert workspace.touched(call(path=str(tmp_path / "p" / "app"))) is False
    assert workspace.touched(call(path=str(tmp_path / "elsewhere" / "f"))) is False
    assert "ROOT" in workspace.current() and "DEEP" in workspace.current()


def test_the_user_is_told_once_per_file(tmp_path: Path) -> None:
    workspace = made(tmp_path)
    said: list[tuple[str, str]] = []
    workspace.tell_news(lambda text, severity: said.append((text, severity)))
    workspace.tell_news(lambda text, severity: said.append((text, severity)))
    workspace.touched(call(path="app/x.py"))
    workspace.tell_news(lambda text, severity: said.append((text, severity)))
    assert said == [
        (f"Project instructions read: {tmp_path / 'cfg' / 'AGENTS.md'}, AGENTS.md.", "info"),
        ("Project instructions also read: app/AGENTS.md.", "info"),
    ]


def test_the_user_file_sits_beside_the_configuration_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ACP_SERVER_CONFIG", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert user_folder(None) == tmp_path / "acp-server"
    assert user_folder(str(tmp_path / "etc" / "mine.toml")) == tmp_path / "etc"


async def test_outside_a_repository_no_git_is_asked(tmp_path: Path) -> None:
    workspace = Workspace(tmp_path, (), None)
    if workspace.repo is not None:
        pytest.skip(f"the temporary folder is inside a git repository ({workspace.repo})")
    workspace.start()
    assert workspace._probe is None
    assert "Git: not a git repository" in await workspace.prompt_part(None)


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
async def test_git_is_asked_after_start_and_again_each_turn(tmp_path: Path) -> None:
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    subprocess.run(["git", "init", "-q", "-b", "one"], cwd=tmp_path, check=True, env=env)
    workspace = Workspace(tmp_path, (), None)
    assert "not known yet" in workspace.current()
    workspace.start()
    assert "branch one (no commits yet)" in await workspace.prompt_part(None)
    subprocess.run(["git", "checkout", "-q", "-b", "two"], cwd=tmp_path, check=True, env=env)
    assert "branch two (no commits yet)" in await workspace.prompt_part(None)


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
async def test_a_cancelled_turn_leaves_the_probe_for_the_next(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    workspace = Workspace(tmp_path, (), None)
    workspace.start()
    waiting = asyncio.create_task(workspace.prompt_part(None))
    await asyncio.sleep(0)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert "Git: a repository at" in await workspace.prompt_part(None)
    assert "not known yet" not in workspace.current()


async def test_a_slow_git_delays_a_later_turn_by_turn_wait_at_most(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "git"
    # The agent's git lists the settings first (`config --list`: answered at once), then asks
    # for the status (slow).
    fake.write_text(
        '#!/bin/sh\ncase "$*" in *" config --list "*) exit 0;; esac\n'
        'sleep "$(cat "$0.delay")"\necho \'## \'"$(cat "$0.branch")"\n'
    )
    fake.chmod(0o755)
    (bin_dir / "git.delay").write_text("0")
    (bin_dir / "git.branch").write_text("one")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    (tmp_path / "repo" / ".git").mkdir(parents=True)
    workspace = Workspace(tmp_path / "repo", (), None)
    assert "branch one," in await workspace.prompt_part(None)
    (bin_dir / "git.delay").write_text("1")
    (bin_dir / "git.branch").write_text("two")
    loop = asyncio.get_running_loop()
    start = loop.time()
    assert "branch one," in await workspace.prompt_part(None)  # the last state, not waited for
    assert loop.time() - start < 0.9
    await asyncio.sleep(1.2)
    assert "branch two," in await workspace.prompt_part(None)
    workspace.close()


def test_another_root_of_the_session_has_its_files_from_its_top(tmp_path: Path) -> None:
    (tmp_path / "p").mkdir()
    write(tmp_path / "lib" / "AGENTS.md", "LIB")
    write(tmp_path / "lib" / "core" / "AGENTS.md", "CORE")
    write(tmp_path / "lib" / "core" / "a.c", "")
    workspace = Workspace(tmp_path / "p", (tmp_path / "lib",), None)
    assert workspace.touched(call(path=str(tmp_path / "lib" / "core" / "a.c")))
    assert texts(workspace) == ["LIB", "CORE"]


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
async def test_the_system_prompt_stays_and_what_changed_is_told_once_in_a_note(
    tmp_path: Path,
) -> None:
    workspace = made(tmp_path)
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    subprocess.run(["git", "init", "-q", "-b", "one"], cwd=tmp_path / "p", check=True, env=env)
    await workspace.prompt_part(None)
    system = workspace.system_for("BASE", "\n\nEND")
    assert "ROOT" in system and "branch one (no commits yet)" in system
    assert workspace.news() == ""  # nothing changed since the system prompt was made
    write(tmp_path / "p" / "new.txt", "x")
    write(tmp_path / "p" / "AGENTS.md", "ROOT CHANGED")
    await workspace.prompt_part(None)
    assert workspace.system_for("BASE", "\n\nEND") == system  # the same bytes
    news = workspace.news()
    assert "?? new.txt" in news and "ROOT CHANGED" in news and "USER" not in news
    assert workspace.news() == ""  # told once
    workspace.recall([text_message("user", "the note was compacted away")])
    assert "ROOT CHANGED" in workspace.news()  # told again: the model lost it
    assert workspace.system_for("OTHER", "\n\nEND") != system  # a new base: made anew
    assert "ROOT CHANGED" in workspace.system and workspace.news() == ""
    workspace.close()
