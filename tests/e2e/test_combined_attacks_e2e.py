"""Attacks across the pieces of issue 29's fixes, over real pipes: a session whose folder is
HOME (so HOME is writable from the sandbox) planting what the agent itself reads next (its own
configuration, `~/.gitconfig`, `~/.bashrc`), a FIFO named like an instruction file, and the
project's `.git` swapped for a link to another repository between turns.

Each runs under bubblewrap and Landlock, as root and as an ordinary user the test makes.
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_tools_e2e import final_updates, open_session, run_prompt
from tests.support.fake_editor import FakeEditor
from tests.support.mock_llm import MockLLM
from tests.support.unprivileged import User, unprivileged
from tests.unit.test_confine_sandbox import available

Start = Callable[..., Any]


@dataclass
class Home:
    """One test's HOME (the session's folder), the agent's data outside it, and the user."""

    home: Path
    base: Path  # data and state live here, outside HOME
    marks: Path  # where a trap writes when it runs
    user: User | None

    def env(self, how: str) -> dict[str, str]:
        extra = {
            "ACP_SERVER_SANDBOX": "workspace-write",
            "ACP_SERVER_SANDBOX_WITH": how,
            "ACP_SERVER_DATA_DIR": str(self.base / "data"),
            "XDG_STATE_HOME": str(self.base / "state"),
            "XDG_CONFIG_HOME": str(self.home / ".config"),
            "ACP_SERVER_CONFIG": "",
            "ANTHROPIC_API_KEY": "sk-ant-combined-" + uuid.uuid4().hex,
        }
        if self.user is not None:
            return self.user.env(self.home, extra)
        return {"HOME": str(self.home), **extra}

    def give(self) -> None:
        if self.user is not None:
            self.user.own(self.home, self.base, self.marks)

    def marked(self) -> list[str]:
        return sorted(p.name for p in self.marks.iterdir())


@pytest.fixture(params=["root", "user"])
def place(request: pytest.FixtureRequest, tmp_path: Path) -> Home:
    if request.param == "root":
        base = tmp_path
    else:
        user = unprivileged()
        base = user.folder("combined")
    for name in ("home", "marks"):
        (base / name).mkdir()
    (base / "marks").chmod(0o777)
    return Home(base / "home", base, base / "marks", None if request.param == "root" else user)


def mechanism(how: str) -> None:
    if not available(how):  # type: ignore[arg-type]
        pytest.skip(f"{how} is not available on this machine")


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"id": uuid.uuid4().hex[:8], "name": name, "arguments": arguments}]}


async def session_in(
    server_factory: Start,
    mock: MockLLM,
    place: Home,
    how: str,
    rounds: list[dict[str, Any]],
    prompts: int = 1,
    cwd: Path | None = None,
) -> dict[str, dict[str, Any]]:
    """A server started in HOME, one session there playing `rounds` over `prompts` prompts
    (the model is the mock, so that the configuration file is read as with a real one); the
    final update of each tool call."""
    mock.queue(*rounds)
    place.give()
    env = {**place.env(how), "OPENAI_BASE_URL": f"{mock.url}/v1", "OPENAI_API_KEY": "sk-mock"}
    server = await server_factory(
        "--model",
        "openai:mock-model",
        env=env,
        as_user=place.user,
        cwd=str(place.home) if place.user else None,
    )
    editor = FakeEditor(fs=False, terminal=False)
    session = await open_session(server, editor, cwd or place.home)
    frames: list[Any] = []
    for _ in range(prompts):
        stop, more = await run_prompt(server, session)
        assert stop == "end_turn"
        frames += more
    await editor.close()
    await server.stop()
    return final_updates(frames)


def trap_command(place: Home, name: str) -> str:
    """A shell line that, when run anywhere, leaves marks/NAME."""
    return f"touch {place.marks}/{name}"


# --- the agent's own configuration, planted from a session in HOME ------------------------------


@pytest.mark.parametrize("how", ["bubblewrap", "landlock"])
async def test_a_session_in_home_cannot_plant_the_agents_own_configuration(
    server_factory: Start, mock_llm: MockLLM, place: Home, how: str
) -> None:
    """No `~/.config/acp-server` yet (a user who never ran `login`): a sandboxed command
    in a session in HOME makes one whose config.toml starts an MCP server (outside any
    sandbox, with the agent's keys) and switches the sandbox off. The next session must not
    start it."""
    mechanism(how)
    config = place.home / ".config" / "acp-server" / "config.toml"
    mcp = json.dumps(["-c", trap_command(place, "mcp-server-ran")])
    plant = (
        f"mkdir -p '{config.parent}' && printf '%s\\n' "
        f"'[mcp_servers.planted]' 'command = \"/bin/sh\"' 'args = {mcp}' > '{config}'"
    )
    rounds = [call("run_command", command=plant), {"text": "Planted."}]
    outcome = await session_in(server_factory, mock_llm, place, how, rounds)
    assert len(outcome) == 1
    # The next session, in this server or the next one, reads its configuration again.
    await session_in(server_factory, mock_llm, place, how, [{"text": "Hello."}])
    assert place.marked() == []
    assert not config.exists(), [u.get("rawOutput") for u in outcome.values()]


# --- ~/.gitconfig and ~/.bashrc, planted from a session in HOME --------------------------------


@pytest.mark.parametrize("how", ["bubblewrap", "landlock"])
async def test_a_planted_gitconfig_or_bashrc_in_home_runs_nothing_of_the_agents(
    server_factory: Start, mock_llm: MockLLM, place: Home, how: str
) -> None:
    """HOME is a writable root, so `~/.gitconfig`, git's XDG config and `~/.bashrc` can be
    written by a sandboxed command (by design: the user's own shell reads `~/.bashrc`). The
    agent's own git (the environment block at every turn) and what it runs itself must run
    none of what they name, over the next turns."""
    mechanism(how)
    place.home.joinpath("a.txt").write_text("x\n", encoding="utf-8")
    git = ["git", "-c", "safe.directory=*"]
    clean = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    for args in (["init", "-q"], ["add", "a.txt"]):
        subprocess.run([*git, *args], cwd=place.home, env=clean, check=True, timeout=30)
    hook = place.home / "hook.sh"
    hook.write_text(f"#!/bin/sh\n{trap_command(place, 'hook-ran')}\n", encoding="utf-8")
    hook.chmod(0o755)
    gitconfig = (
        f"printf '%s\\n' '[core]' '\\tfsmonitor = {hook}' '\\tpager = {hook}' "
        f"'\\thooksPath = {place.home}' '[include]' '\\tpath = {place.home}/more.cfg' "
        f"> ~/.gitconfig && mkdir -p ~/.config/git && cp ~/.gitconfig ~/.config/git/config "
        f"&& printf '[core]\\n\\tfsmonitor = {hook}\\n' > ~/more.cfg"
    )
    bashrc = f"echo '{trap_command(place, 'bashrc-ran')}' >> ~/.bashrc; cp ~/.bashrc ~/.profile"
    rounds = [
        call("run_command", command=gitconfig),
        call("run_command", command=bashrc),
        {"text": "Planted."},
        {"text": "One."},
        {"text": "Two."},
    ]
    outcome = await session_in(server_factory, mock_llm, place, how, rounds, prompts=3)
    if how == "bubblewrap":  # Landlock cannot let a file be made beside a hidden folder
        assert [u["status"] for u in outcome.values()] == ["completed"] * 2, outcome
        assert (place.home / ".gitconfig").exists() and (place.home / ".bashrc").exists()
    assert place.marked() == []


# --- a FIFO named like an instruction file ------------------------------------------------------


@pytest.mark.parametrize("how", ["bubblewrap", "landlock"])
async def test_a_fifo_named_agents_md_freezes_nothing(
    server_factory: Start, mock_llm: MockLLM, place: Home, how: str
) -> None:
    """A sandboxed command makes FIFOs named like instruction files, at the project's top and
    in a nested folder; a tool call there then makes the agent look for that folder's
    instructions, and the next turn for the top's. Opening a FIFO to read it waits for a
    writer that never comes: the turns must end all the same."""
    mechanism(how)
    project = place.home / "project"
    (project / "sub").mkdir(parents=True)
    (project / "sub" / "notes.txt").write_text("notes\n", encoding="utf-8")
    fifos = "mkfifo AGENTS.md CLAUDE.md sub/AGENTS.md sub/CLAUDE.md sub/deeper.md"
    rounds = [
        call("run_command", command=fifos),
        call("read_file", path=str(project / "sub" / "notes.txt")),
        call("list_directory", path=str(project / "sub")),
        {"text": "Read."},
        call("read_file", path=str(project / "sub" / "notes.txt")),
        {"text": "Again."},
    ]
    outcome = await session_in(server_factory, mock_llm, place, how, rounds, 2, cwd=project)
    statuses = [u["status"] for u in outcome.values()]
    assert statuses[0] == "completed" and statuses[1] == "completed", outcome
    assert (project / "sub" / "AGENTS.md").is_fifo()


# --- .git swapped for a link to another repository between turns -------------------------------


@pytest.mark.parametrize("how", ["bubblewrap", "landlock", "none"])
async def test_git_swapped_for_a_link_to_a_trapped_repository_runs_nothing(
    server_factory: Start, mock_llm: MockLLM, place: Home, how: str
) -> None:
    """A command makes a second repository whose settings and hooks start a program, then
    replaces the project's `.git` by a link to it (or by a `gitdir:` file naming it). The
    sandbox keeps `.git` (a mount point under bubblewrap); with no sandbox (`none`: the
    command asks, and the test's editor allows it) the swap lands, and the agent's own git at
    the next turns must still run none of what the other repository names."""
    if how != "none":
        mechanism(how)
    project = place.home / "project"
    project.mkdir()
    (project / "a.txt").write_text("a\n", encoding="utf-8")
    clean = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    subprocess.run(["git", "init", "-q"], cwd=project, env=clean, check=True, timeout=30)
    hook = project / "hook.sh"
    hook.write_text(f"#!/bin/sh\n{trap_command(place, 'hook-ran')}\ncat\n", encoding="utf-8")
    hook.chmod(0o755)
    other = (
        f"git init -q other && git -C other config core.fsmonitor '{hook}' && "
        f"git -C other config core.pager '{hook}' && for h in pre-commit post-checkout "
        "fsmonitor-watchman post-index-change reference-transaction; do "
        f"cp '{hook}' other/.git/hooks/$h; done"
    )
    swap = (
        "mv .git .git-old || rm -rf .git; ln -s other/.git .git || "
        "printf 'gitdir: other/.git\\n' > .git; ls -la .git"
    )
    rounds = [
        call("run_command", command=other),
        call("run_command", command=swap),
        {"text": "Swapped."},
        {"text": "One."},
        {"text": "Two."},
    ]
    outcome = await session_in(server_factory, mock_llm, place, how, rounds, 3, cwd=project)
    assert next(u["status"] for u in outcome.values()) == "completed", outcome
    if how == "bubblewrap":
        assert (project / ".git").is_dir() and not (project / ".git").is_symlink()
    if how == "none":  # the swap landed: the agent's git now reads the trapped repository
        assert (project / ".git").is_symlink() or (project / ".git").is_file()
    assert place.marked() == []
