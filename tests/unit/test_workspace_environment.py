"""The environment block: git's status parsed and bounded, a repository asked for real."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from acp_server.workspace import environment
from acp_server.workspace.environment import GitState, block, describe_git, git_state, parse_status

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def test_branch_lines_of_every_shape_are_read() -> None:
    assert parse_status("## main\n") == GitState("main")
    assert parse_status("## main...origin/main\n M a.py\n?? b\n") == GitState(
        "main", "origin/main", "", (" M a.py", "?? b")
    )
    ahead = parse_status("## dev...up/dev [ahead 1, behind 2]\n")
    assert (ahead.branch, ahead.upstream, ahead.upstream_state) == (
        "dev",
        "up/dev",
        "ahead 1, behind 2",
    )
    assert parse_status("## x...o/x [gone]\n").upstream_state == "gone"
    assert parse_status("## No commits yet on trunk\n").branch == "trunk (no commits yet)"
    assert parse_status("## HEAD (no branch)\n").branch == "none (a detached HEAD)"


def test_the_status_is_bounded_and_says_how_much_more() -> None:
    changes = tuple(f"?? file{n}" for n in range(environment.STATUS_LINES + 5))
    text = describe_git(Path("/r"), GitState("main", "o/main", "behind 3", changes))
    assert "branch main, tracking o/main (behind 3)" in text
    assert f"{len(changes)} changed files" in text and "… and 5 more" in text
    assert text.count("?? file") == environment.STATUS_LINES


def test_what_is_said_without_a_status() -> None:
    assert describe_git(None, None) == "- Git: not a git repository"
    assert "not known yet" in describe_git(Path("/r"), None)
    assert "(git is not installed)" in describe_git(
        Path("/r"), GitState(problem="git is not installed")
    )
    clean = describe_git(Path("/r"), GitState("main"))
    assert clean.endswith("branch main, no upstream; no uncommitted changes")


def test_the_block_names_the_date_os_and_shell() -> None:
    text = block(None, None)
    assert text.startswith("# Environment\n- Today's date: 2")
    assert f"- Operating system: {os.uname().sysname}" in text
    assert "commands run with /bin/sh -c" in text
    assert text.endswith("- Git: not a git repository")


@needs_git
async def test_a_real_repository_is_asked(tmp_path: Path) -> None:
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    subprocess.run(["git", "init", "-q", "-b", "work"], cwd=tmp_path, check=True, env=env)
    (tmp_path / "new file.txt").write_text("x", encoding="utf-8")
    state = await git_state(tmp_path)
    assert state == GitState("work (no commits yet)", changes=('?? "new file.txt"',))


@needs_git
async def test_a_failing_or_slow_git_is_a_problem_not_an_error(tmp_path: Path) -> None:
    state = await git_state(tmp_path / "missing")
    assert state.problem == "git could not be started (No such file or directory)"
    (tmp_path / ".git").write_text("gitdir: /nowhere\n", encoding="utf-8")
    # A generous limit: on a loaded machine the failing git may take longer than the default.
    assert (await git_state(tmp_path, timeout=30)).problem.startswith("git status failed (")
    slow = await git_state(tmp_path, timeout=0)
    assert slow.problem == "git status took longer than 0 s"
