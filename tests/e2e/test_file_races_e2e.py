"""The file tools use the path they checked, over the real wire (issue 29, findings 3, 8, 9).

A command running in the sandbox needs no prompt, so it can swap a file of the project for a
link between the permission check and the read or write. Here the test plays that command:
deterministically where the fake editor's answer is the moment in between (the permission
request, the editor's read), else with a thread that swaps as fast as it can over 40 tries.
A file outside the project stands in for ~/.bashrc and for a key.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_tools_e2e import call, final_updates, open_session, run_prompt, tool_calls
from tests.support.fake_editor import FakeEditor
from tests.support.raw import Frame, RawServer

Start = Callable[..., Any]
ORIGINAL = "# the user's shell setup\n"
SECRET = "SECRET-KEY-7f3a9c"
TRIES = 100  # at least 40 (issue 29); each try takes a few ms


def bashrc(tmp_path: Path) -> Path:
    """The file outside the project that a swapped link leads to."""
    outside = tmp_path / "home"
    outside.mkdir(exist_ok=True)
    path = outside / ".bashrc"
    path.write_text(ORIGINAL, encoding="utf-8")
    return path


def swap_for_link(path: Path, target: Path) -> None:
    """Replace `path` by a link to `target` in one step (what a sandboxed `ln -sf` does)."""
    link = path.with_name(f".{path.name}.link")
    with contextlib.suppress(FileNotFoundError):
        link.unlink()
    link.symlink_to(target)
    os.replace(link, path)


SWAPPER = """
import os, sys, time
path, target, text = sys.argv[1], sys.argv[2], sys.argv[3]
folder, name = os.path.split(path)
plain, link, master = (os.path.join(folder, f".{name}.{k}") for k in ("plain", "link", "master"))
with open(master, "w") as f:
    f.write(text)
print("ready", flush=True)
def hold():  # each state about as long as the other
    until = time.perf_counter() + 0.00005
    while time.perf_counter() < until:
        pass
while True:
    os.link(master, plain)
    os.replace(plain, path)
    hold()
    os.symlink(target, link)
    os.replace(link, path)
    hold()
"""


@contextlib.contextmanager
def swapping(path: Path, target: Path, text: str) -> Iterator[None]:
    """A process (like a sandboxed command) turning `path` into a link to `target` and back
    (a file holding `text`) as fast as it can, while the block runs."""
    proc = subprocess.Popen(
        [sys.executable, "-c", SWAPPER, str(path), str(target), text],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        yield
    finally:
        proc.kill()
        proc.wait(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()


def env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {"ACP_SERVER_DATA_DIR": str(tmp_path / "data"), **extra}


def project_with_notes(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    (project / "notes.txt").write_text("alpha\n", encoding="utf-8")
    return project


def results(frames: list[Frame]) -> list[str]:
    return [json.dumps(update) for update in final_updates(frames).values()]


# -- writes -------------------------------------------------------------------------------------


@pytest.mark.parametrize("through_editor", [True, False], ids=["editor-fs", "local"])
async def test_an_approved_write_never_lands_where_a_link_swapped_in_leads(
    server_factory: Start, script: Any, tmp_path: Path, through_editor: bool
) -> None:
    project, outside = project_with_notes(tmp_path), bashrc(tmp_path)

    def swap_then_allow(params: dict[str, Any]) -> str:
        swap_for_link(project / "notes.txt", outside)  # while the user reads the diff
        return "allow_once"

    editor = FakeEditor(fs=through_editor, terminal=False, choose=swap_then_allow)
    rounds = [call("write_file", path="notes.txt", content="PWNED\n"), {"text": "done"}]
    server = await server_factory("--script", str(script(rounds)), env=env(tmp_path))
    session = await open_session(server, editor, project)
    stop, frames = await run_prompt(server, session)

    assert stop == "end_turn"
    assert len(editor.permission_requests) == 1  # "Write notes.txt", with its diff
    assert outside.read_text(encoding="utf-8") == ORIGINAL
    if through_editor:  # the editor would follow the link: it is not asked to write
        assert editor.writes == []
        assert "link" in results(frames)[0]
    else:  # the approved file was written: the link swapped in is replaced
        assert not (project / "notes.txt").is_symlink()
        assert (project / "notes.txt").read_text(encoding="utf-8") == "PWNED\n"


class SwappingEditor(FakeEditor):
    """An editor whose read of a file is the moment a command swaps it for a link."""

    def __init__(self, swap: Callable[[], None], **kw: Any) -> None:
        super().__init__(**kw)
        self.swap = swap

    async def read_text_file(self, params: dict[str, Any]) -> dict[str, Any]:
        answer = await super().read_text_file(params)
        self.swap()
        return answer


@pytest.mark.parametrize("tool", ["write_file", "edit_file"])
async def test_accept_edits_never_writes_through_a_link_swapped_in_after_the_read(
    server_factory: Start, script: Any, tmp_path: Path, tool: str
) -> None:
    """Through the editor, the swap comes as the editor reads; the write is then refused (as
    main's code did too: the edit's own check sees the link). A swap after that check has no
    moment the test can hold: the race test below tries it 40 times."""
    project, outside = project_with_notes(tmp_path), bashrc(tmp_path)
    editor = SwappingEditor(
        lambda: swap_for_link(project / "notes.txt", outside),
        fs=True,
        terminal=False,
        choose=lambda params: "reject_once",
    )
    arguments: dict[str, Any] = (
        {"content": "PWNED\n"}
        if tool == "write_file"
        else {"edits": [{"old_text": "alpha", "new_text": "PWNED"}]}
    )
    rounds = [call(tool, path="notes.txt", **arguments), {"text": "done"}]
    server = await server_factory("--script", str(script(rounds)), env=env(tmp_path))
    session = await open_session(server, editor, project, mode="accept_edits")
    stop, frames = await run_prompt(server, session)

    assert stop == "end_turn"
    assert outside.read_text(encoding="utf-8") == ORIGINAL
    assert editor.writes == []
    (result,) = results(frames)
    assert '"failed"' in result  # the edit now leads outside: asked, and the user rejected it


async def test_accept_edits_with_every_prompt_rejected_writes_only_inside_under_a_swapping_race(
    server_factory: Start, script: Any, tmp_path: Path
) -> None:
    project, outside = project_with_notes(tmp_path), bashrc(tmp_path)
    editor = FakeEditor(fs=False, terminal=False, choose=lambda params: "reject_once")
    writes = [
        {"name": "write_file", "arguments": {"path": "notes.txt", "content": f"PWNED {n}\n"}}
        for n in range(TRIES)
    ]
    rounds = [{"tool_calls": writes}, {"text": "done"}]
    server = await server_factory("--script", str(script(rounds)), env=env(tmp_path))
    session = await open_session(server, editor, project, mode="accept_edits")
    with swapping(project / "notes.txt", outside, "alpha\n"):
        stop, _ = await run_prompt(server, session)

    assert stop == "end_turn"
    assert outside.read_text(encoding="utf-8") == ORIGINAL


# -- reads --------------------------------------------------------------------------------------


async def test_an_approved_read_returns_the_file_that_was_approved(
    server_factory: Start, script: Any, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    shared, key = tmp_path / "shared.txt", tmp_path / "id_ed25519"
    shared.write_text("shared notes\n", encoding="utf-8")
    key.write_text(f"{SECRET}\n", encoding="utf-8")
    (project / "notes.txt").symlink_to(shared)  # outside the project: reading it asks

    def repoint_then_allow(params: dict[str, Any]) -> str:
        swap_for_link(project / "notes.txt", key)  # while the user reads "shared.txt"
        return "allow_once"

    editor = FakeEditor(fs=False, terminal=False, choose=repoint_then_allow)
    rounds = [call("read_file", path="notes.txt"), {"text": "done"}]
    server = await server_factory("--script", str(script(rounds)), env=env(tmp_path))
    session = await open_session(server, editor, project)
    stop, frames = await run_prompt(server, session)

    assert stop == "end_turn"
    assert SECRET not in json.dumps(server.seen)
    assert "shared notes" in results(frames)[0]
    (asked,) = editor.permission_requests
    assert str(shared) in asked["toolCall"]["title"]


async def test_read_file_never_returns_what_a_swapped_link_leads_to(
    server_factory: Start, script: Any, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    (project / "docs").mkdir(parents=True)
    key = tmp_path / "id_ed25519"
    key.write_text(f"{SECRET}\n", encoding="utf-8")
    editor = FakeEditor(fs=False, terminal=False, choose=lambda params: "reject_once")
    reads = [{"name": "read_file", "arguments": {"path": "docs/notes.txt"}}] * TRIES
    rounds = [{"tool_calls": reads}, {"text": "done"}]
    server = await server_factory("--script", str(script(rounds)), env=env(tmp_path))
    session = await open_session(server, editor, project)
    with swapping(project / "docs" / "notes.txt", key, "harmless notes\n"):
        stop, frames = await run_prompt(server, session, "read it")

    assert stop == "end_turn"
    assert len(final_updates(frames)) == TRIES
    assert SECRET not in json.dumps(server.seen)


async def test_a_permission_request_for_a_link_shows_where_it_leads(
    server_factory: Start, script: Any, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    (project / "docs").mkdir(parents=True)
    (project / "config").mkdir()
    key, outside = tmp_path / "id_ed25519", bashrc(tmp_path)
    key.write_text(f"{SECRET}\n", encoding="utf-8")
    (project / "docs" / "notes.txt").symlink_to(key)
    (project / "config" / "settings.sh").symlink_to(outside)
    editor = FakeEditor(fs=False, terminal=False, choose=lambda params: "reject_once")
    rounds = [
        call("read_file", path="docs/notes.txt"),
        call("edit_file", path="config/settings.sh", edits=[{"old_text": "#", "new_text": "x"}]),
        {"text": "done"},
    ]
    server = await server_factory("--script", str(script(rounds)), env=env(tmp_path))
    session = await open_session(server, editor, project, mode="accept_edits")
    stop, _ = await run_prompt(server, session)

    assert stop == "end_turn"
    read, edit = (request["toolCall"] for request in editor.permission_requests)
    assert str(key) in read["title"] and read["locations"][0]["path"] == str(key)
    assert str(outside) in edit["title"] and edit["locations"][0]["path"] == str(outside)
    assert outside.read_text(encoding="utf-8") == ORIGINAL


async def test_update_plan_never_shows_a_key_a_plan_file_links_to(
    server_factory: Start, script: Any, tmp_path: Path
) -> None:
    home = tmp_path / "home"  # the session works in the user's home: the key is inside it
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text(f"{SECRET}\n", encoding="utf-8")
    (home / "plan.md").symlink_to(home / ".ssh" / "id_ed25519")
    editor = FakeEditor(fs=False, terminal=False)
    rounds = [call("update_plan", file="plan.md"), {"text": "done"}]
    at_home = env(tmp_path, HOME=str(home))
    server = await server_factory("--script", str(script(rounds)), env=at_home)
    session = await open_session(server, editor, home)
    stop, frames = await run_prompt(server, session)

    assert stop == "end_turn"
    (result,) = results(frames)
    assert '"failed"' in result and "keys and credentials" in result
    assert SECRET not in json.dumps(server.seen)
    assert SECRET not in _stored(tmp_path / "data")


def _stored(data: Path) -> str:
    """Every byte the agent's store wrote, as text (the session store must not hold it)."""
    return "".join(
        p.read_bytes().decode("utf-8", "replace") for p in data.rglob("*") if p.is_file()
    )


# -- what cannot be read ------------------------------------------------------------------------


class RegularFilesEditor(FakeEditor):
    """An editor that answers a read of anything but a regular file with an error (the test
    client must not hang where the agent, before the fix, asked it to read a FIFO)."""

    async def read_text_file(self, params: dict[str, Any]) -> dict[str, Any]:
        if not stat.S_ISREG(os.stat(params["path"]).st_mode):
            self.reads.append(params["path"])
            raise OSError(f"{params['path']} is not a regular file")
        return await super().read_text_file(params)


def _open_writer(fifo: Path) -> None:
    """End a reader's wait on `fifo` (a server stuck opening it), so a failure cannot hang."""
    with contextlib.suppress(OSError):
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))


@pytest.mark.parametrize("through_editor", [True, False], ids=["editor-fs", "local"])
async def test_reading_a_fifo_is_refused_at_once_and_the_server_keeps_answering(
    server_factory: Start, script: Any, tmp_path: Path, through_editor: bool
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    fifo = project / "pipe.txt"
    os.mkfifo(fifo)  # made by a sandboxed command; no writer ever comes
    editor = RegularFilesEditor(fs=through_editor, terminal=False)
    rounds = [call("read_file", path="pipe.txt"), {"text": "done"}]
    server = await server_factory("--script", str(script(rounds)), env=env(tmp_path))
    session = await open_session(server, editor, project)
    try:
        prompt = await server.call(
            "session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": "go"}]}
        )
        listed = await server.call("session/list", {})
        (answer, _) = await server.response(listed, timeout=10)
        assert "result" in answer
        (done, frames) = await server.response(prompt, timeout=10)
    finally:
        _open_writer(fifo)
    assert done["result"]["stopReason"] == "end_turn"
    (result,) = results(frames)
    assert "FIFO" in result and '"failed"' in result
    assert editor.reads == []


@pytest.mark.parametrize("through_editor", [True, False], ids=["editor-fs", "local"])
async def test_a_huge_sparse_file_is_refused_by_its_size_without_being_read(
    server_factory: Start, script: Any, tmp_path: Path, through_editor: bool
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    with open(project / "huge.log", "wb") as f:
        f.truncate(3 * 1024**3)  # 3 GiB of holes: no disk used, but read whole it is 3 GB
    editor = FakeEditor(fs=through_editor, terminal=False)
    rounds = [call("read_file", path="huge.log"), {"text": "done"}]
    server = await server_factory("--script", str(script(rounds)), env=env(tmp_path))
    session = await open_session(server, editor, project)
    started = time.monotonic()
    stop, frames = await run_prompt(server, session)

    assert stop == "end_turn"
    assert time.monotonic() - started < 20
    (result,) = results(frames)
    assert "3,072.0 MB" in result and "not read" in result
    assert _peak_rss_mb(server) < 1024
    assert editor.reads == []  # the editor is not asked either


def _peak_rss_mb(server: RawServer) -> float:
    """The server's peak resident memory so far, in MB (0 where /proc cannot tell)."""
    status = Path(f"/proc/{server.proc.pid}/status")
    with contextlib.suppress(OSError):
        for line in status.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


# -- odd names ----------------------------------------------------------------------------------


async def test_names_the_system_cannot_take_are_refused_in_words_and_the_session_goes_on(
    server_factory: Start, script: Any, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "notes.txt").write_text("alpha\n", encoding="utf-8")
    long = "n" * 300 + ".txt"
    editor = FakeEditor(fs=False, terminal=False)
    rounds = [
        call("write_file", path=long, content="x\n"),
        call("edit_file", path=long, edits=[{"old_text": "a", "new_text": "b"}]),
        call("run_command", command="echo hi", cwd="sub\u0000dir"),
        {"text": "first done"},
        call("read_file", path="notes.txt"),
        {"text": "second done"},
    ]
    server = await server_factory("--script", str(script(rounds)), env=env(tmp_path))
    session = await open_session(server, editor, project, mode="bypass")
    stop, frames = await run_prompt(server, session)

    assert stop == "end_turn"
    calls = tool_calls(frames)
    finals = final_updates(frames)
    said = {name: json.dumps(finals[update["toolCallId"]]) for name, update in calls.items()}
    assert "255 bytes" in said["write_file"] and "255 bytes" in said["edit_file"]
    assert "NUL byte" in said["run_command"]
    assert not any("unexpectedly" in text for text in said.values()), said
    stop, frames = await run_prompt(server, session, "again")
    assert stop == "end_turn"
    assert "alpha" in json.dumps(final_updates(frames))
