"""The environment block of the system prompt: today's date, the OS, the shell commands run in,
the session's roots, and the git state of the project (branch, upstream, a short status).

Peers tell the model where it is; without it, models guess the date, the OS and whether there
is a repository. Git is asked once per turn with one `git status --porcelain --branch` bounded
by `GIT_TIMEOUT` (with GIT_OPTIONAL_LOCKS=0, so that it never takes the index lock from the
user's own git), and never before `session/new` is answered: the session starts the probe
after its answer (`Workspace.start`), and a later turn waits for a new status for at most
`workspace.TURN_WAIT`. It runs as the agent's own git (`confine.own_git`): none of the
programs the repository's settings name (fsmonitor, hooks, filters), no keys in its
environment, inside the read-only sandbox where the machine has one.
A folder without `.git` above it costs no process at all.
"""

from __future__ import annotations

import os
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from acp_server.confine import own_git

GIT_TIMEOUT = 2.0  # seconds
STATUS_LINES = 20  # changed files shown; the rest are counted
_BRANCH = re.compile(r"^## (?P<head>.+?)(?:\.\.\.(?P<up>\S+))?(?: \[(?P<state>[^\]]+)\])?$")
SHELL = "/bin/sh"  # what run_command runs command lines with (tools.shell)


@dataclass(frozen=True)
class GitState:
    """What `git status` said, or why it could not be asked (`problem`)."""

    branch: str = ""
    upstream: str = ""
    upstream_state: str = ""  # "ahead 1, behind 2", "gone", "" (up to date)
    changes: tuple[str, ...] = ()
    problem: str = ""


def parse_status(output: str) -> GitState:
    """`git status --porcelain=v1 --branch` output as a GitState."""
    lines = output.splitlines()
    if not lines or not lines[0].startswith("## "):
        return GitState(changes=tuple(lines))
    head = lines[0]
    match = _BRANCH.match(head)
    branch, upstream, state = (
        (match["head"], match["up"] or "", match["state"] or "") if match else (head[3:], "", "")
    )
    for prefix in ("No commits yet on ", "Initial commit on "):
        if branch.startswith(prefix):
            branch = branch.removeprefix(prefix) + " (no commits yet)"
    if branch == "HEAD (no branch)":
        branch = "none (a detached HEAD)"
    return GitState(branch, upstream, state, tuple(lines[1:]))


async def git_state(cwd: Path, timeout: float = GIT_TIMEOUT) -> GitState:
    """Ask git about `cwd` (a repository: the caller checked), within `timeout` seconds."""
    import shutil  # here: with bz2 and lzma it costs a session build ~2 ms

    git = shutil.which("git")
    if git is None:
        return GitState(problem="git is not installed")
    # The project's settings may name programs (fsmonitor, filters, hooks): own_git runs
    # none of them, with no keys in its environment, inside the read-only sandbox.
    command = ("-c", "core.quotepath=off", "status", "--porcelain=v1", "--branch",
               "--ignore-submodules=dirty")  # fmt: skip
    try:
        code, out, err = await own_git.run(git, command, cwd, timeout)
    except TimeoutError:
        return GitState(problem=f"git status took longer than {timeout:g} s")
    except OSError as exc:
        return GitState(problem=f"git could not be started ({exc.strerror or exc})")
    except ValueError as exc:
        return GitState(problem=f"git status was not run: {exc}")
    if code != 0:
        said = err.decode("utf-8", "replace").strip().splitlines()
        return GitState(problem=f"git status failed ({said[0] if said else code})")
    return parse_status(out.decode("utf-8", "replace"))


def describe_git(repo: Path | None, state: GitState | None) -> str:
    """The git line(s) of the block."""
    if repo is None:
        return "- Git: not a git repository"
    if state is None:
        return f"- Git: a repository at {repo} (its status is not known yet)"
    if state.problem:
        return f"- Git: a repository at {repo} ({state.problem})"
    line = f"- Git: a repository at {repo}, branch {state.branch or 'unknown'}"
    if state.upstream:
        line += f", tracking {state.upstream} ({state.upstream_state or 'up to date'})"
    else:
        line += ", no upstream"
    if not state.changes:
        return line + "; no uncommitted changes"
    shown = [f"    {change}" for change in state.changes[:STATUS_LINES]]
    more = len(state.changes) - STATUS_LINES
    if more > 0:
        shown.append(f"    … and {more:,} more")
    count = len(state.changes)
    return (
        line
        + f"; {count:,} changed file{'' if count == 1 else 's'} (git status --short):\n"
        + "\n".join(shown)
    )


def block(repo: Path | None, state: GitState | None) -> str:
    """The `# Environment` section of the system prompt (the base prompt names the session's
    folders: they are not repeated here)."""
    lines = [
        "# Environment",
        f"- Today's date: {today()}",
        f"- Operating system: {_os()}",
        f"- Shell: commands run with {SHELL} -c (the user's login shell is "
        f"{os.environ.get('SHELL') or 'not set'})",
    ]
    lines.append(describe_git(repo, state))
    return "\n".join(lines)


def today() -> str:
    return time.strftime("%Y-%m-%d (%A)")


def _os() -> str:
    if sys.platform == "win32":
        return "Windows"
    info = os.uname()
    name = "macOS (Darwin)" if info.sysname == "Darwin" else info.sysname
    return f"{name} {info.release} ({info.machine})"
