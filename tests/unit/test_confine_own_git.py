"""The agent's own git (confine/own_git.py) and the read-only version-control folders
(confine/vcs_guard.py): a repository's settings name no program git starts, even without a
sandbox; the environment carries no keys; in the sandbox a command in the project cannot
change `.git` (bubblewrap, and the Landlock launcher's mount namespace), while files at the
project's top are still made."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from acp_server.confine import own_git, vcs_guard
from acp_server.confine.sandbox import Mechanism, wrap
from acp_server.workspace.environment import git_state
from tests.support.policies import made, removed_policies  # noqa: F401 (autouse)
from tests.unit.test_confine_sandbox import available

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def git(cwd: Path, *args: str) -> str:
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    done = subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, env=env, timeout=30, text=True
    )
    return done.stdout


def trap(folder: Path, marks: Path, name: str) -> str:
    path = folder / f"trap-{name}"
    path.write_text(f"#!/bin/sh\nenv > '{marks / name}'\ncat\n", encoding="utf-8")
    path.chmod(0o755)
    return str(path)


def test_every_program_naming_setting_found_is_turned_off() -> None:
    args = own_git.neutral(
        ["filter.lfs.clean", "filter.My.Dots.process", "diff.pdf.textconv", "merge.x.driver",
         "credential.https://h.example.helper", "user.name", "filter.plain", "core.fsmonitor"]
    )  # fmt: skip
    pairs = {
        args[i + 1].split("=", 1)[0]: args[i + 1].split("=", 1)[1] for i in range(0, len(args), 2)
    }
    assert set(args[::2]) == {"-c"}
    assert pairs["core.fsmonitor"] == "false" and pairs["core.hooksPath"] == own_git.NO_HOOKS
    assert pairs["filter.lfs.clean"] == "" and pairs["filter.lfs.required"] == "false"
    assert pairs["filter.My.Dots.process"] == "" and pairs["diff.pdf.textconv"] == ""
    assert pairs["merge.x.driver"] == "" and pairs["credential.https://h.example.helper"] == ""
    assert "user.name" not in pairs and "filter.plain" not in pairs
    with pytest.raises(ValueError, match="cannot override"):
        own_git.neutral(["filter.a=b.clean"])


def test_the_environment_carries_no_keys_and_no_git_switches() -> None:
    env = own_git.environment(
        {"PATH": "/bin", "HOME": "/h", "OPENAI_API_KEY": "sk-1", "GIT_DIR": "/x",
         "GIT_CONFIG_PARAMETERS": "'core.fsmonitor'='/x'", "GIT_EXTERNAL_DIFF": "/x"}
    )  # fmt: skip
    assert env["PATH"] == "/bin" and env["HOME"] == "/h" and env["GIT_OPTIONAL_LOCKS"] == "0"
    assert not {"OPENAI_API_KEY", "GIT_DIR", "GIT_CONFIG_PARAMETERS", "GIT_EXTERNAL_DIFF"} & set(
        env
    )


@needs_git
async def test_without_a_sandbox_the_settings_alone_run_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Filters from an included file, fsmonitor, hooks: none runs, the status is still right."""
    monkeypatch.setenv("ACP_SERVER_SANDBOX_WITH", "none")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-never-seen")
    project, marks = tmp_path / "p", tmp_path / "marks"
    project.mkdir()
    marks.mkdir()
    (project / "a.txt").write_text("alpha\n", encoding="utf-8")
    (project / ".gitattributes").write_text("* filter=inc diff=inc\n", encoding="utf-8")
    git(project, "init", "-q", "-b", "trunk")
    git(project, "add", ".")
    git(project, "-c", "user.name=T", "-c", "user.email=t@e", "commit", "-q", "-m", "x")
    included = tmp_path / "included.cfg"
    included.write_text(
        f'[filter "inc"]\n\tclean = {trap(tmp_path, marks, "clean")}\n'
        f"\tprocess = {trap(tmp_path, marks, 'process')}\n\trequired = true\n"
        f'[diff "inc"]\n\ttextconv = {trap(tmp_path, marks, "textconv")}\n',
        encoding="utf-8",
    )
    git(project, "config", "include.path", str(included))
    git(project, "config", "core.fsmonitor", trap(tmp_path, marks, "fsmonitor"))
    for hook in ("post-index-change", "reference-transaction", "pre-commit"):
        shutil.copy(trap(tmp_path, marks, hook), project / ".git" / "hooks" / hook)
    later = time.time() + 100
    os.utime(project / "a.txt", (later, later))  # stat-dirty: git must look through the filter
    state = await git_state(project, timeout=30)
    assert state.problem == "" and state.branch == "trunk", state
    assert list(marks.iterdir()) == []


def test_the_control_folders_found_in_a_root(tmp_path: Path) -> None:
    root, other = tmp_path / "root", tmp_path / "other"
    (root / ".git").mkdir(parents=True)
    (root / ".hg").mkdir()
    (other / "wt").mkdir(parents=True)
    gitdir = root / ".git" / "worktrees" / "wt"
    gitdir.mkdir(parents=True)
    (gitdir / "commondir").write_text("../..\n", encoding="utf-8")
    (other / "wt" / ".git").write_text(f"gitdir: {gitdir}\n", encoding="utf-8")
    found = vcs_guard.protected((root, other / "wt"))
    assert found == [root / ".git", root / ".hg", other / "wt" / ".git"]
    # A pointer to a git folder outside every root: that folder is read-only already.
    assert vcs_guard.protected((other / "wt",)) == [other / "wt" / ".git"]


def read_only_binds_work(folder: Path, user: Any = None) -> bool:
    """Whether this kernel lets a process bind a folder read-only in a mount namespace of its
    own (as `user`, a User of tests/support/unprivileged.py: in a user namespace too), as the
    Landlock launcher does; asked of util-linux's `unshare`, not of the code under test."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return False
    mounts = f"mount --bind {folder} {folder} && mount -o remount,bind,ro {folder}"
    argv = [unshare, "-m", "sh", "-c", mounts]
    who: dict[str, Any] = {}
    if user is not None:
        argv[1:2] = ["-U", "-r", "-m"]
        who = {"user": user.uid, "group": user.gid, "extra_groups": []}
    done = subprocess.run(argv, capture_output=True, timeout=30, check=False, **who)
    return done.returncode == 0


@needs_git
@pytest.mark.parametrize("how", ["bubblewrap", "landlock"])
def test_in_the_sandbox_a_command_cannot_change_git_but_still_makes_files(
    tmp_path: Path, how: Mechanism
) -> None:
    if not available(how):
        pytest.skip(f"{how} is not available on this machine")
    if how == "landlock" and not read_only_binds_work(tmp_path):
        pytest.skip("this kernel refuses the launcher a mount namespace: .git stays writable")
    project = tmp_path / "project"
    project.mkdir()
    git(project, "init", "-q")
    (project / "evil.cfg").write_text("[core]\n\tfsmonitor = /bin/false\n", encoding="utf-8")
    policy = made("workspace-write", (project,))
    attacks = [
        "git config core.fsmonitor ./hook.sh",
        "echo x > .git/hooks/pre-commit",
        "rm .git/config",
        "mv evil.cfg .git/config",
        "mv .git gone",
        "ln -sf ../evil.cfg .git/config",
        # as root too: bubblewrap drops every capability (--cap-drop ALL), Landlock's launcher
        # empties every set, so the read-only bind over .git cannot be taken off
        "umount -l .git",
        "umount -l .git && git config core.fsmonitor ./hook.sh",
        "umount -l .git; echo x > .git/hooks/pre-commit",
    ]
    before = (project / ".git" / "config").read_text(encoding="utf-8")
    for attack in attacks:
        done = subprocess.run(
            wrap(["sh", "-c", attack], policy, how),
            cwd=project,
            capture_output=True,
            timeout=30,
            check=False,
        )
        assert done.returncode != 0, attack
    assert (project / ".git" / "config").read_text(encoding="utf-8") == before
    assert not (project / ".git" / "hooks" / "pre-commit").exists()
    created = subprocess.run(
        wrap(["sh", "-c", "echo new > new.txt && mkdir d && mv new.txt d/"], policy, how),
        cwd=project,
        capture_output=True,
        timeout=30,
        check=False,
    )
    assert created.returncode == 0, created.stderr
    assert (project / "d" / "new.txt").read_text(encoding="utf-8") == "new\n"


@needs_git
@pytest.mark.parametrize("how", ["bubblewrap", "landlock"])
def test_a_worktrees_pointer_file_cannot_be_pointed_elsewhere(
    tmp_path: Path, how: Mechanism
) -> None:
    """A session in a linked worktree: its `.git` is a file naming the git folder; replaced, the
    agent's and the user's git would read the settings of a folder the command made."""
    if not available(how):
        pytest.skip(f"{how} is not available on this machine")
    if how == "landlock" and not read_only_binds_work(tmp_path):
        pytest.skip("this kernel refuses the launcher a mount namespace: .git stays writable")
    main, worktree = tmp_path / "main", tmp_path / "wt"
    main.mkdir()
    git(main, "init", "-q")
    git(
        main,
        "-c",
        "user.name=T",
        "-c",
        "user.email=t@e",
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        "x",
    )
    git(main, "worktree", "add", "-q", str(worktree))
    pointer = (worktree / ".git").read_text(encoding="utf-8")
    policy = made("workspace-write", (worktree,))
    for attack in ("echo 'gitdir: /tmp' > .git", "rm .git", "git config core.fsmonitor ./x"):
        done = subprocess.run(
            wrap(["sh", "-c", attack], policy, how),
            cwd=worktree,
            capture_output=True,
            timeout=30,
            check=False,
        )
        assert done.returncode != 0, attack
    assert (worktree / ".git").read_text(encoding="utf-8") == pointer
    assert "fsmonitor" not in (main / ".git" / "config").read_text(encoding="utf-8")
