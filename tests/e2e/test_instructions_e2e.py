"""Project instructions and the environment block through the real server, read from the mock
model server's recorded requests: the user's AGENTS.md, the project root's and a nested one,
each at the right time and in the documented order (user, root, nested), still there after a
compaction; the user is told which files were read (once each); the first request names the
date, the OS and the git branch and status of a repository the test makes. The system prompt
stays byte for byte the same for the session: a nested file found, a changed file and a new
git state are told in notes appended to the conversation."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.context_session import ReaderSession, start_reader, turn_requests
from tests.support.mock_llm import MockLLM
from tests.support.mock_llm.view import conversation

Start = Callable[..., Any]
USER, ROOT, NESTED = "USER-RULE-7", "ROOT-RULE-3", "NESTED-RULE-5"
pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def git(cwd: Path, *args: str) -> None:
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, env=env)


def project(tmp_path: Path) -> tuple[Path, Path]:
    """A git repository (branch `trunk`) with a root and a nested AGENTS.md, one commit, one
    untracked file; and a configuration folder with the user's AGENTS.md."""
    repo = tmp_path / "repo"
    (repo / "sub").mkdir(parents=True)
    (repo / "AGENTS.md").write_text(f"{ROOT}: use pnpm, never npm.\n", "utf-8")
    (repo / "CLAUDE.md").write_text("IGNORED-FALLBACK: AGENTS.md wins.\n", "utf-8")
    (repo / "sub" / "AGENTS.md").write_text(f"{NESTED}: tabs in sub/.\n", "utf-8")
    (repo / "sub" / "file0.txt").write_text("word0 begins this file.\n", "utf-8")
    (repo / "file1.txt").write_text("word1 begins this file.\n", "utf-8")
    git(repo, "init", "-q", "-b", "trunk")
    git(repo, "add", ".")
    git(repo, "-c", "user.name=T", "-c", "user.email=t@example.com", "commit", "-q", "-m", "x")
    (repo / "untracked-notes.md").write_text("notes\n", "utf-8")
    config = tmp_path / "config"
    (config / "acp-server").mkdir(parents=True)
    (config / "acp-server" / "AGENTS.md").write_text(f"{USER}: answer briefly.\n", "utf-8")
    return repo, config


async def started(server_factory: Start, mock: MockLLM, tmp_path: Path) -> ReaderSession:
    repo, config = project(tmp_path)
    env = {"XDG_CONFIG_HOME": str(config), "ACP_SERVER_CONFIG": ""}
    return await start_reader(server_factory, mock, repo, "--context-window", "65536", env=env)


def system_of(request: Any) -> str:
    first = conversation(request.json)[0]
    assert first.role == "system"
    return first.text


def notes_of(request: Any) -> list[str]:
    """The agent's notes in the request's conversation, in order."""
    return [t.text for t in conversation(request.json) if t.text.startswith("<agent-note>")]


def order(system: str, *marks: str) -> list[int]:
    return [system.find(mark) for mark in marks]


def told(seen: list[dict[str, Any]]) -> list[str]:
    """What the user was told about instruction files (agent messages: no notices here)."""
    texts = [u["content"]["text"] for u in seen if u["sessionUpdate"] == "agent_message_chunk"]
    return [t.strip() for t in texts if "Project instructions" in t]


async def test_instructions_arrive_in_order_when_due_and_survive_a_compaction(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path
) -> None:
    reader = await started(server_factory, mock_llm, tmp_path)
    first = await reader.ask("file1.txt")
    assert first.stop == "end_turn" and "word1" in first.text
    requests = turn_requests(mock_llm)
    system = system_of(requests[0])
    user, root = order(system, USER, ROOT)
    assert 0 < user < root, system
    assert NESTED not in system and "IGNORED-FALLBACK" not in system
    assert told(first.seen) == [f"Project instructions read: {config_file(tmp_path)}, AGENTS.md."]

    second = await reader.ask("sub/file0.txt")
    assert "word0" in second.text
    before, after = turn_requests(mock_llm)[len(requests) :]
    assert NESTED not in str(before.json)  # not worked in sub/ yet
    assert system_of(after) == system  # the prefix is not rewritten ...
    said = conversation(after.json)
    assert said[-2].role == "tool" and NESTED in said[-1].text  # ... a note follows the result
    assert notes_of(after) == [said[-1].text] and "sub/AGENTS.md" in said[-1].text
    assert told(second.seen) == ["Project instructions also read: sub/AGENTS.md."]

    for _ in range(3):  # older exchanges for the compaction to take
        assert (await reader.ask("file1.txt")).stop == "end_turn"
    compacted = await reader.prompt("/compact")
    assert "Compacted the conversation" in compacted.text
    third = await reader.ask("file1.txt")
    last = turn_requests(mock_llm)[-2]
    assert conversation(last.json)[1].text.startswith("[Earlier conversation, compacted")
    user, root = order(system_of(last), USER, ROOT)
    assert 0 < user < root
    notes = notes_of(last)  # the nested file, its note compacted away, is told again
    assert len(notes) == 1 and NESTED in notes[0] and ROOT not in notes[0], notes
    assert told(third.seen) == []  # once per session


def config_file(tmp_path: Path) -> str:
    return str(tmp_path / "config" / "acp-server" / "AGENTS.md")


async def test_the_first_request_holds_the_environment(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path
) -> None:
    days = {time.strftime("%Y-%m-%d")}
    reader = await started(server_factory, mock_llm, tmp_path)
    await reader.ask("file1.txt")
    days.add(time.strftime("%Y-%m-%d"))  # a test run across midnight
    system = system_of(turn_requests(mock_llm)[0])
    block = system[system.index("# Environment") :]
    assert any(f"Today's date: {day}" in block for day in days), block
    assert f"Operating system: {os.uname().sysname}" in block
    assert f"project at {tmp_path / 'repo'}" in system
    assert "branch trunk, no upstream" in block
    assert "1 changed file" in block and "?? untracked-notes.md" in block


async def test_the_environment_and_the_instructions_are_refreshed_when_they_change(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path
) -> None:
    reader = await started(server_factory, mock_llm, tmp_path)
    await reader.ask("file1.txt")
    (tmp_path / "repo" / "file1.txt").write_text("word1 changed.\n", "utf-8")
    (tmp_path / "repo" / "AGENTS.md").write_text("ROOT-RULE-4: use yarn now.\n", "utf-8")
    git(tmp_path / "repo", "checkout", "-q", "-b", "feature")
    await reader.ask("file1.txt")
    first, last = turn_requests(mock_llm)[0], turn_requests(mock_llm)[-2]
    assert system_of(last) == system_of(first)  # byte for byte: the cache still serves it
    notes = notes_of(last)
    assert len(notes) == 1, notes  # one note, after the new prompt
    assert conversation(last.json)[-1].text == notes[0]
    assert "branch feature" in notes[0] and " M file1.txt" in notes[0], notes[0]
    assert "ROOT-RULE-4: use yarn now." in notes[0] and ROOT not in notes[0]


async def test_an_editor_that_shows_notices_is_told_with_one(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path
) -> None:
    repo, config = project(tmp_path)
    env = {"XDG_CONFIG_HOME": str(config), "ACP_SERVER_CONFIG": ""}
    caps: dict[str, Any] = {"session": {"notices": {}}}
    reader = await start_reader(server_factory, mock_llm, repo, env=env, capabilities=caps)
    turn = await reader.ask("file1.txt")
    notices = [u for u in turn.seen if u["sessionUpdate"] == "notice"]
    assert [(n["severity"], n["title"]) for n in notices] == [
        ("info", f"Project instructions read: {config_file(tmp_path)}, AGENTS.md.")
    ]
    assert told(turn.seen) == []


async def test_a_long_file_in_a_small_window_is_clipped_and_the_turn_works(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path
) -> None:
    repo, config = project(tmp_path)
    (repo / "AGENTS.md").write_text(f"{ROOT}: long.\n" + "Always be careful.\n" * 2000, "utf-8")
    env = {"XDG_CONFIG_HOME": str(config), "ACP_SERVER_CONFIG": ""}
    reader = await start_reader(server_factory, mock_llm, repo, "--context-window", "4096", env=env)
    turn = await reader.ask("file1.txt")
    assert turn.stop == "end_turn" and "word1" in turn.text, turn.text
    system = system_of(turn_requests(mock_llm)[0])
    assert ROOT in system and "This file has 38,019 characters; only the first" in system
    assert told(turn.seen)[0].endswith("(clipped: too long to give in full).")


@pytest.mark.parametrize("case", ["outside", "secret-inside", "proc-environ"])
async def test_an_instructions_file_that_links_away_is_skipped_with_a_note(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path, case: str
) -> None:
    """Links to a key outside the project, to a key inside it (the session works in the home
    folder), and to the agent's own environment: none of it reaches the model."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("SECRET-KEY-INSIDE\n", "utf-8")
    (tmp_path / "outside.md").write_text("SECRET-KEY-OUTSIDE\n", "utf-8")
    project = {
        "outside": tmp_path / "repo",
        "secret-inside": home,
        "proc-environ": tmp_path / "repo",
    }[case]
    project.mkdir(exist_ok=True)
    target = {
        "outside": tmp_path / "outside.md",
        "secret-inside": home / ".ssh" / "id_ed25519",
        "proc-environ": Path("/proc/self/environ"),
    }[case]
    (project / "AGENTS.md").symlink_to(target)
    (project / "CLAUDE.md").write_text(f"{ROOT}: the fallback is read.\n", "utf-8")
    env = {
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "ACP_SERVER_CONFIG": "",
        "HOME": str(home),
        "SECRET_MARKER": "SECRET-KEY-ENVIRON",
    }
    reader = await start_reader(server_factory, mock_llm, project, env=env)
    turn = await reader.prompt("hello")
    assert turn.stop == "end_turn"

    bodies = json.dumps([r.json for r in mock_llm.chat_requests])
    assert "SECRET-KEY" not in bodies
    system = system_of(turn_requests(mock_llm)[0])
    leads = "/proc/" if case == "proc-environ" else os.path.realpath(target)
    why = (
        "where keys and credentials are kept" if case == "secret-inside" else "outside the project"
    )
    assert f"[AGENTS.md was not read: it leads to {leads}" in system and why in system
    assert ROOT in system  # the next name in the folder is read instead
    said = " ".join(u["content"]["text"] for u in turn.seen if "content" in u)
    assert "AGENTS.md was not read" in said
