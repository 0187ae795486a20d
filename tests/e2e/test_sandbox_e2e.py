"""The sandbox through the real console script: in `workspace-write` a command that writes
inside the project runs without a permission request; one that writes outside, reads
~/.ssh or connects to a server the test started on 127.0.0.1 fails, and its result says the
sandbox blocked it; asking to run it outside asks, and once allowed it works. `read-only`
blocks every write, `off` asks as before, and with no way to keep the sandbox every command
asks and the user is told once. Locally and in an editor terminal (the fake editor runs what
terminal/create gets), under bubblewrap and under Landlock (ACP_SERVER_SANDBOX_WITH).
"""

from __future__ import annotations

import os
import shlex
import socket
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_tools_e2e import call, final_updates, open_session, run_prompt, tool_calls
from tests.support.fake_editor import FakeEditor
from tests.unit.test_confine_sandbox import available

Start = Callable[..., Any]
REQUIRED = os.environ.get("ACP_REQUIRE_SANDBOX") == "1"


@pytest.fixture(
    params=[
        ("bubblewrap", True),
        ("bubblewrap", False),
        ("landlock", True),
        ("landlock", False),
    ],
    ids=["bwrap-editor-terminal", "bwrap-local", "landlock-editor-terminal", "landlock-local"],
)
def way(request: pytest.FixtureRequest) -> tuple[str, bool]:
    how, terminal = request.param
    if not available(how):
        if REQUIRED:
            pytest.fail(f"{how} is not available on this machine")
        pytest.skip(f"{how} is not available on this machine")
    return how, terminal


@pytest.fixture
def listener() -> Iterator[int]:
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                conn.sendall(b"!")

    threading.Thread(target=serve, daemon=True).start()
    yield port
    server.close()


def environment(tmp_path: Path, level: str, how: str) -> tuple[dict[str, str], Path]:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("PRIVATE KEY\n", encoding="utf-8")
    env = {
        "ACP_SERVER_DATA_DIR": str(tmp_path / "data"),
        "ACP_SERVER_SANDBOX": level,
        "ACP_SERVER_SANDBOX_WITH": how,
        "HOME": str(home),
    }
    return env, home


def connect(port: int) -> str:
    code = (
        f"import socket; s = socket.create_connection(('127.0.0.1', {port}), 5); print(s.recv(1))"
    )
    return f"{shlex.quote(sys.executable)} -c {shlex.quote(code)}"


def results(frames: list[dict[str, Any]]) -> dict[str, tuple[str, str]]:
    """Each command line -> (final status, text of its result)."""
    calls = {u["toolCallId"]: u["rawInput"]["command"] for u in tool_calls_in(frames)}
    out = {}
    for call_id, update in final_updates(frames).items():
        text = " ".join(
            str(item.get("content", {}).get("text", ""))
            for item in update.get("content") or []
            if isinstance(item, dict)
        )
        out[calls[call_id]] = (update["status"], text)
    return out


def tool_calls_in(frames: list[dict[str, Any]]) -> list[dict[str, Any]]:
    updates = [f["params"]["update"] for f in frames if f.get("method") == "session/update"]
    return [u for u in updates if u["sessionUpdate"] == "tool_call"]


async def test_workspace_write_runs_inside_without_asking_and_blocks_the_rest(
    server_factory: Start, script: Any, tmp_path: Path, way: tuple[str, bool], listener: int
) -> None:
    how, terminal = way
    project = tmp_path / "project"
    project.mkdir()
    outside = tmp_path / "outside.txt"
    env, home = environment(tmp_path, "workspace-write", how)
    inside, write_out = "echo in > inside.txt", f"echo out > {outside}"
    secret, home_write = f"cat {home}/.ssh/id_ed25519", f"echo x > {home}/x.txt"
    rounds = [
        call("run_command", command=inside),
        call("run_command", command=write_out),
        call("run_command", command=secret),
        call("run_command", command=home_write),
        call("run_command", command=connect(listener)),
        {"text": "Tried."},
    ]
    editor = FakeEditor(fs=False, terminal=terminal)
    server = await server_factory("--script", str(script(rounds)), env=env)
    session = await open_session(server, editor, project)
    stop, frames = await run_prompt(server, session)
    assert stop == "end_turn"
    assert editor.permission_requests == []  # nothing asked: everything ran in the sandbox
    done = results(frames)
    assert done[inside][0] == "completed" and (project / "inside.txt").read_text() == "in\n"
    for command in (write_out, home_write, connect(listener)):
        status, text = done[command]
        assert status == "failed" and "blocked by the sandbox" in text, (command, text)
    assert done[secret][0] == "failed" and "PRIVATE KEY" not in done[secret][1]
    assert not outside.exists() and not (home / "x.txt").exists()
    if terminal:
        assert editor.unreleased() == []


async def test_asking_to_run_outside_the_sandbox_asks_and_then_works(
    server_factory: Start, script: Any, tmp_path: Path, way: tuple[str, bool]
) -> None:
    how, terminal = way
    project = tmp_path / "project"
    project.mkdir()
    outside = tmp_path / "outside.txt"
    env, _ = environment(tmp_path, "workspace-write", how)
    command = f"echo out > {outside}"
    reason = "the user asked for the file next to the project"
    rounds = [
        call("run_command", command=command, outside_sandbox=True, reason=reason),
        {"text": "Done."},
    ]
    editor = FakeEditor(fs=False, terminal=terminal)
    server = await server_factory("--script", str(script(rounds)), env=env)
    session = await open_session(server, editor, project)
    stop, frames = await run_prompt(server, session)
    assert stop == "end_turn"
    (asked,) = editor.permission_requests
    shown = str(asked["toolCall"]["content"])
    assert reason in shown and "Outside the sandbox" in shown
    assert outside.read_text() == "out\n"
    assert next(iter(final_updates(frames).values()))["status"] == "completed"


@pytest.mark.parametrize("terminal", [True, False], ids=["editor-terminal", "local"])
async def test_read_only_blocks_every_write(
    server_factory: Start, script: Any, tmp_path: Path, terminal: bool
) -> None:
    if not available("bubblewrap") and not available("landlock"):
        pytest.skip("no sandbox on this machine")
    project = tmp_path / "project"
    project.mkdir()
    env, _ = environment(tmp_path, "read-only", "")
    rounds = [call("run_command", command="echo x > inside.txt"), {"text": "Tried."}]
    editor = FakeEditor(fs=False, terminal=terminal)
    server = await server_factory("--script", str(script(rounds)), env=env)
    session = await open_session(server, editor, project)
    _, frames = await run_prompt(server, session)
    assert not (project / "inside.txt").exists()
    ((status, text),) = results(frames).values()
    assert status == "failed" and "blocked by the sandbox" in text
    assert editor.permission_requests == []


@pytest.mark.parametrize("level, how", [("off", ""), ("workspace-write", "none")])
async def test_without_a_sandbox_every_command_asks(
    server_factory: Start, script: Any, tmp_path: Path, level: str, how: str
) -> None:
    """`off` behaves as before the sandbox; a level this machine cannot keep falls back to
    asking, and the user is told once."""
    project = tmp_path / "project"
    project.mkdir()
    env, _ = environment(tmp_path, level, how)
    rounds = [
        call("run_command", command="echo a > a.txt"),
        {"text": "One."},
        call("run_command", command="echo b > b.txt"),
        {"text": "Two."},
    ]
    editor = FakeEditor(fs=False, terminal=False)
    server = await server_factory("--script", str(script(rounds)), env=env)
    session = await open_session(server, editor, project)
    _, first = await run_prompt(server, session)
    _, second = await run_prompt(server, session)
    assert len(editor.permission_requests) == 2
    assert (project / "a.txt").exists() and (project / "b.txt").exists()
    said = [str(f) for f in first + second if "cannot be kept" in str(f)]
    assert len(said) == (1 if how == "none" else 0)


async def test_no_sandboxed_process_outlives_the_session(
    server_factory: Start, script: Any, tmp_path: Path, way: tuple[str, bool]
) -> None:
    from tests.e2e.test_background_e2e import dev_server, until_gone

    how, terminal = way
    project = tmp_path
    env, _ = environment(tmp_path, "workspace-write", how)
    marker, command = dev_server(tmp_path)
    rounds = [call("run_command", command=command, background=True), {"text": "Started."}]
    editor = FakeEditor(fs=False, terminal=terminal)
    server = await server_factory("--script", str(script(rounds)), env=env)
    session = await open_session(server, editor, project)
    stop, frames = await run_prompt(server, session)
    assert stop == "end_turn" and editor.permission_requests == []
    assert tool_calls(frames)["run_command"]
    await server.request("session/close", {"sessionId": session})
    assert await until_gone(str(marker)) == []
    await editor.close()


async def test_the_sandbox_temp_dir_goes_when_the_editor_leaves(
    server_factory: Start, script: Any, tmp_path: Path
) -> None:
    """Each session's commands get a private $TMPDIR; an editor that quits (stdin closed,
    sessions never closed one by one) leaves none behind (each session left one in /tmp)."""
    if not available("bubblewrap"):
        pytest.skip("bubblewrap is not available on this machine")
    temp = tmp_path / "tmp"
    temp.mkdir()
    env, _ = environment(tmp_path, "workspace-write", "bubblewrap")
    rounds = [call("run_command", command='echo kept > "$TMPDIR/x"'), {"text": "Done."}]
    editor = FakeEditor(fs=False, terminal=False)
    server = await server_factory("--script", str(script(rounds)), env={**env, "TMPDIR": str(temp)})
    session = await open_session(server, editor, tmp_path / "home")
    stop, _ = await run_prompt(server, session)
    made = sorted(p.name for p in temp.iterdir())  # the folder, and the lock file its server holds
    assert stop == "end_turn" and made[0].startswith("acp-sandbox-")
    assert made == [made[0], made[0] + ".lock"]
    await server.close_stdin()
    assert await server.wait(timeout=60) == 0
    assert list(temp.iterdir()) == []
    await editor.close()
