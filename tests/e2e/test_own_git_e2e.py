"""A repository makes the agent run nothing through its own git (issue 29, finding 1), over the
real pipes, under bubblewrap and Landlock, as root and as an ordinary user the test makes.

(a) A sandboxed command (no prompt) tries `git config core.fsmonitor ./hook.sh`: it is refused
(`.git` is read-only in the project: bubblewrap, and Landlock's launcher where the kernel gives
it a mount namespace, see confine/vcs_guard.py), and the hook never runs at the later turns'
git status even where the setting could be written.
(b) An untrusted checkout with `core.fsmonitor`, a `.gitattributes` filter whose clean, smudge
and process programs are set, a textconv, a pager, an external diff, an ssh command, a
credential helper and every git hook: `session/new` and three prompts run none of them, while
the environment block the model gets still shows the git status. Every program writes its
environment to a file outside the project: none may appear.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_sandbox_e2e import results
from tests.e2e.test_tools_e2e import open_session, run_prompt
from tests.support.fake_editor import FakeEditor
from tests.support.mock_llm import MockLLM
from tests.support.mock_llm.view import conversation
from tests.support.unprivileged import User, unprivileged
from tests.unit.test_confine_own_git import read_only_binds_work
from tests.unit.test_confine_sandbox import available

Start = Callable[..., Any]
REQUIRED = os.environ.get("ACP_REQUIRE_SANDBOX") == "1"
SECRET = "sk-ant-NEVER-IN-A-HOOK-1234"
HOOKS = [
    "applypatch-msg",
    "pre-applypatch",
    "post-applypatch",
    "pre-commit",
    "pre-merge-commit",
    "prepare-commit-msg",
    "commit-msg",
    "post-commit",
    "pre-rebase",
    "post-checkout",
    "post-merge",
    "pre-push",
    "pre-receive",
    "update",
    "proc-receive",
    "post-receive",
    "post-update",
    "reference-transaction",
    "push-to-checkout",
    "pre-auto-gc",
    "post-rewrite",
    "sendemail-validate",
    "fsmonitor-watchman",
    "post-index-change",
    "p4-changelist",
    "p4-prepare-changelist",
    "p4-post-changelist",
    "p4-pre-submit",
]
pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


@dataclass
class Place:
    """Where one test's server works: the project, HOME, the folder the traps write to."""

    project: Path
    home: Path
    marks: Path
    user: User | None

    def give(self) -> None:
        if self.user is not None:
            self.user.own(self.project, self.home, self.marks)

    def marked(self) -> dict[str, str]:
        return {p.name: p.read_text(errors="replace")[:300] for p in self.marks.iterdir()}


@pytest.fixture(params=["root", "user"])
def place(request: pytest.FixtureRequest, tmp_path: Path) -> Place:
    if request.param == "root":
        for name in ("project", "home", "marks"):
            (tmp_path / name).mkdir()
        return Place(tmp_path / "project", tmp_path / "home", tmp_path / "marks", None)
    user = unprivileged()
    return Place(user.folder("project"), user.folder("home"), user.folder("marks"), user)


def mechanism(how: str) -> str:
    if how != "none" and not available(how):  # type: ignore[arg-type]
        if REQUIRED:
            pytest.fail(f"{how} is not available on this machine")
        pytest.skip(f"{how} is not available on this machine")
    return how


def git(cwd: Path, *args: str) -> None:
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    argv = ["git", "-c", "safe.directory=*", *args]  # the folder may be the test user's
    subprocess.run(argv, cwd=cwd, check=True, capture_output=True, env=env, timeout=30)


def repository(project: Path) -> None:
    (project / "a.txt").write_text("alpha\n", encoding="utf-8")
    (project / ".gitattributes").write_text("*.txt filter=trap diff=trap\n", encoding="utf-8")
    git(project, "init", "-q", "-b", "trunk")
    git(project, "add", ".")
    git(project, "-c", "user.name=T", "-c", "user.email=t@example.com", "commit", "-q", "-m", "x")
    (project / "untracked-notes.md").write_text("notes\n", encoding="utf-8")


def trap(place: Place, name: str) -> str:
    """A program that writes its environment to marks/NAME: its path, executable."""
    path = place.project / "traps" / name
    path.parent.mkdir(exist_ok=True)
    path.write_text(f"#!/bin/sh\nenv > {shlex.quote(str(place.marks / name))}\ncat\n", "utf-8")
    path.chmod(0o755)
    return str(path)


def booby_trap(place: Place) -> None:
    """Every program-starting git setting of the class the review found, and every hook."""
    settings = {
        "core.fsmonitor": trap(place, "fsmonitor"),
        "core.pager": trap(place, "pager"),
        "diff.external": trap(place, "external-diff"),
        "core.sshCommand": trap(place, "ssh"),
        "credential.helper": trap(place, "credential"),
        "filter.trap.clean": trap(place, "clean"),
        "filter.trap.smudge": trap(place, "smudge"),
        "filter.trap.process": trap(place, "process"),
        "filter.trap.required": "true",
        "diff.trap.textconv": trap(place, "textconv"),
    }
    for key, value in settings.items():
        git(place.project, "config", key, value)
    for hook in HOOKS:
        hooks = place.project / ".git" / "hooks"
        hooks.mkdir(exist_ok=True)
        shutil.copy(trap(place, f"hook-{hook}"), hooks / hook)
    # Stat-dirty (content unchanged): git status must look at the content, through the filter.
    later = time.time() + 100
    os.utime(place.project / "a.txt", (later, later))


async def start(server_factory: Start, mock: MockLLM, place: Place, how: str) -> Any:
    place.give()
    env = {
        "OPENAI_BASE_URL": f"{mock.url}/v1",
        "OPENAI_API_KEY": "sk-mock",
        "ANTHROPIC_API_KEY": SECRET,
        "HOME": str(place.home),
        "XDG_CONFIG_HOME": str(place.home / ".config"),
        "ACP_SERVER_CONFIG": "",
        "ACP_SERVER_DATA_DIR": str(place.home / "data"),
        "ACP_SERVER_SANDBOX": "workspace-write",
        "ACP_SERVER_SANDBOX_WITH": how,
    }
    args = ("--model", "openai:mock-model")
    if place.user is None:
        return await server_factory(*args, env=env)
    return await server_factory(*args, env=place.user.env(place.home, env), as_user=place.user)


def systems(mock: MockLLM) -> list[str]:
    found = []
    for request in mock.chat_requests:
        first = conversation(request.json)[0]
        if first.role == "system":
            found.append(first.text)
    return found


@pytest.mark.parametrize("how", ["bubblewrap", "landlock"])
async def test_a_sandboxed_command_cannot_plant_an_fsmonitor_the_agent_runs(
    server_factory: Start, mock_llm: MockLLM, place: Place, how: str
) -> None:
    mechanism(how)
    repository(place.project)
    hook = f"printf '#!/bin/sh\\nenv > {place.marks}/planted\\n' > hook.sh && chmod +x hook.sh"
    plant = "git config core.fsmonitor ./hook.sh"
    mock_llm.queue(
        {"tool_calls": [{"id": "c1", "name": "run_command", "arguments": {"command": hook}}]},
        {"tool_calls": [{"id": "c2", "name": "run_command", "arguments": {"command": plant}}]},
        {"text": "Planted."},
        {"text": "One."},
        {"text": "Two."},
    )
    server = await start(server_factory, mock_llm, place, how)
    editor = FakeEditor(fs=False, terminal=False)
    session = await open_session(server, editor, place.project)
    stop, frames = await run_prompt(server, session)
    assert stop == "end_turn"
    assert editor.permission_requests == []  # both ran in the sandbox, without a prompt
    outcome = results(frames)
    assert outcome[hook][0] == "completed", outcome[hook]
    # .git is read-only in the project (under Landlock where the kernel lets the launcher
    # have a mount namespace: vcs_guard.py)
    if how == "bubblewrap" or read_only_binds_work(place.project, place.user):
        status, text = outcome[plant]
        assert status == "failed", text
        assert "blocked by the sandbox" in text and "version-control folders" in text, text
    for _ in range(2):
        assert (await run_prompt(server, session))[0] == "end_turn"
    assert place.marked() == {}
    # The status changed during the session: it is told in a note after the system prompt.
    last = "\n".join(message.text for message in conversation(mock_llm.chat_requests[-1].json))
    assert "branch trunk" in last and "hook.sh" in last, last


@pytest.mark.parametrize("how", ["bubblewrap", "landlock", "none"])
async def test_an_untrusted_checkout_runs_nothing_on_session_new_and_three_turns(
    server_factory: Start, mock_llm: MockLLM, place: Place, how: str
) -> None:
    mechanism(how)
    repository(place.project)
    booby_trap(place)
    mock_llm.queue({"text": "One."}, {"text": "Two."}, {"text": "Three."})
    server = await start(server_factory, mock_llm, place, how)
    session = await open_session(server, FakeEditor(fs=False, terminal=False), place.project)
    for _ in range(3):
        assert (await run_prompt(server, session))[0] == "end_turn"
    said = systems(mock_llm)
    assert place.marked() == {}
    assert len(said) == 3
    for system in said:
        assert "- Git: a repository at" in system and "branch trunk" in system, system
        assert "untracked-notes.md" in system, system
