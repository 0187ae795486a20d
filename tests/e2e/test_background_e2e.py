"""Background commands through the real console script: a tiny dev server is started through
the agent, its output read twice and stopped; after `session/close`, and after the agent is
killed (SIGKILL, SIGTERM, stdin EOF), no process of it is left (read from /proc). Once with an
editor that runs terminals (the fake editor really runs what terminal/create gets), once with
local process groups.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shlex
import signal
import sys
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_tools_e2e import call, final_updates, open_session, run_prompt, tool_calls
from tests.support.fake_editor import FakeEditor
from tests.support.raw import Frame

Start = Callable[..., Any]

SERVER = """
import http.server, threading, time
server = http.server.HTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
print(f"listening on port {server.server_address[1]}", flush=True)
def tick():
    n = 0
    while True:
        time.sleep(0.2)
        n += 1
        print(f"tick {n}", flush=True)
threading.Thread(target=tick, daemon=True).start()
server.serve_forever()
"""
MODES = pytest.mark.parametrize("terminal", [True, False], ids=["editor-terminal", "local"])


@pytest.fixture(autouse=True)
def _no_leftovers(tmp_path: Path) -> Iterator[None]:
    """Whatever a failing test leaves running is killed, so it cannot disturb the next ones."""
    yield
    markers = (tmp_path / "devserver.py", tmp_path / "keeper" / "devserver.py")
    for pid in [pid for marker in markers for pid in processes_running(str(marker))]:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def dev_server(tmp_path: Path) -> tuple[Path, str]:
    """The server script (its path marks its processes) and the command line that starts it."""
    script = tmp_path / "devserver.py"
    script.write_text(SERVER, encoding="utf-8")
    return script, f"{shlex.quote(sys.executable)} {shlex.quote(str(script))}"


def processes_running(marker: str) -> list[int]:
    """Live (not zombie) processes whose command line holds `marker`."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            stat = Path(f"/proc/{entry}/stat").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmdline and stat[stat.rfind(b")") + 2 :][:1] not in (b"Z", b"X"):
            found.append(int(entry))
    return found


async def until_gone(marker: str, seconds: float = 6.0) -> list[int]:
    """Wait until no process of `marker` runs; the ones still running after `seconds`."""
    for _ in range(int(seconds / 0.1)):
        if not processes_running(marker):
            return []
        await asyncio.sleep(0.1)
    return processes_running(marker)


def result_text(frames: list[Frame], name: str, nth: int = 0) -> str:
    """The text of the `nth` call of tool `name` (its final tool_call_update, else raw)."""
    finals = final_updates(frames)
    ids = [
        u["toolCallId"]
        for f in frames
        if f.get("method") == "session/update"
        and (u := f["params"]["update"])["sessionUpdate"] == "tool_call"
        and u.get("name") == name
    ]
    final = finals[ids[nth]]
    texts = [c["content"]["text"] for c in final.get("content", []) if c["type"] == "content"]
    return "\n".join(texts) or json.dumps(final.get("rawOutput"))


def start_rounds(command: str) -> list[dict[str, Any]]:
    return [
        call("run_command", command=command, background=True),
        call("command_output", id="bg_1", wait_seconds=10),
    ]


@MODES
async def test_a_dev_server_is_started_read_twice_and_stopped(
    server_factory: Start, script: Any, tmp_path: Path, terminal: bool
) -> None:
    marker, command = dev_server(tmp_path)
    rounds = [
        *start_rounds(command),
        call("command_output", id="bg_1", wait_seconds=10),
        call("command_output"),
        call("stop_command", id="bg_1"),
        call("command_output"),
        {"text": "done"},
    ]
    editor = FakeEditor(terminal=terminal)
    server = await server_factory("--script", str(script(rounds)))
    session = await open_session(server, editor, tmp_path)
    stop, frames = await run_prompt(server, session)

    assert stop == "end_turn"
    assert "Started in the background as bg_1" in result_text(frames, "run_command")
    assert tool_calls(frames)["run_command"]["title"].startswith("Start `")
    (asked,) = editor.permission_requests  # asked like any command, showing the command line
    assert str(marker) in asked["toolCall"]["content"][0]["content"]["text"]
    first = result_text(frames, "command_output", 0)
    assert re.search(r"listening on port \d+", first), first
    second = result_text(frames, "command_output", 1)
    assert "tick" in second and "listening" not in second, second  # only what is new
    assert "bg_1" in result_text(frames, "command_output", 2)
    assert "running" in result_text(frames, "command_output", 2)
    assert "Stopped" in result_text(frames, "stop_command")
    assert "ended" in result_text(frames, "command_output", 3)
    assert await until_gone(str(marker)) == []
    if terminal:
        start_call = tool_calls(frames)["run_command"]["toolCallId"]
        shown = [
            c
            for f in frames
            if f.get("method") == "session/update"
            and f["params"]["update"].get("toolCallId") == start_call
            for c in f["params"]["update"].get("content") or []
        ]
        assert {"type": "terminal", "terminalId": "term_1"} in shown  # the user sees it live
        assert editor.unreleased() == []
    await editor.close()


@MODES
async def test_session_close_leaves_no_process(
    server_factory: Start, script: Any, tmp_path: Path, terminal: bool
) -> None:
    marker, command = dev_server(tmp_path)
    editor = FakeEditor(terminal=terminal)
    server = await server_factory("--script", str(script([*start_rounds(command), {"text": "up"}])))
    session = await open_session(server, editor, tmp_path)
    _, frames = await run_prompt(server, session)
    port = re.search(r"listening on port (\d+)", result_text(frames, "command_output"))
    assert port is not None
    assert await _get(f"http://127.0.0.1:{port[1]}/") == 200  # it really serves, between turns
    assert processes_running(str(marker))

    answer = await server.request("session/close", {"sessionId": session})
    assert "result" in answer
    assert await until_gone(str(marker)) == []
    if terminal:
        assert editor.unreleased() == []
    await editor.close()


@pytest.mark.parametrize(
    ("how", "terminal"),
    [("sigkill", False), ("sigterm", False), ("eof", False), ("sigterm", True)],
    ids=["sigkill-local", "sigterm-local", "eof-local", "sigterm-editor-terminal"],
)
async def test_no_process_outlives_the_agent(
    server_factory: Start, script: Any, tmp_path: Path, how: str, terminal: bool
) -> None:
    """(An editor terminal outliving an agent killed with SIGKILL, or whose stdin the editor
    closed, is the editor's to end: the agent can no longer ask it to.)"""
    marker, command = dev_server(tmp_path)
    editor = FakeEditor(terminal=terminal)
    server = await server_factory("--script", str(script([*start_rounds(command), {"text": "up"}])))
    session = await open_session(server, editor, tmp_path)
    _, frames = await run_prompt(server, session)
    assert "listening on port" in result_text(frames, "command_output")
    assert processes_running(str(marker))

    if how == "sigkill":
        server.proc.kill()  # no cleanup runs: the watchdog ends the group
    elif how == "sigterm":
        server.terminate()
    else:
        await server.close_stdin()
    await server.wait(timeout=10)
    assert await until_gone(str(marker)) == []
    if terminal:
        assert editor.unreleased() == []
    await editor.close()


async def _get(url: str) -> int:
    def fetch() -> int:
        with urllib.request.urlopen(url, timeout=5) as response:
            return int(response.status)

    return await asyncio.to_thread(fetch)


@MODES
async def test_a_cancel_stops_only_the_commands_that_asked_for_it(
    server_factory: Start, script: Any, tmp_path: Path, terminal: bool
) -> None:
    marker, command = dev_server(tmp_path)
    keeper = tmp_path / "keeper"
    keeper.mkdir()
    (keeper / "devserver.py").write_text(SERVER, encoding="utf-8")
    kept = f"{shlex.quote(sys.executable)} {shlex.quote(str(keeper / 'devserver.py'))}"
    rounds = [
        call("run_command", command=command, background=True, stop_on_cancel=True),
        call("run_command", command=kept, background=True),
        call("command_output", id="bg_1", wait_seconds=10),
        call("run_command", command="sleep 30"),
    ]
    editor = FakeEditor(terminal=terminal)
    server = await server_factory("--script", str(script(rounds)))
    session = await open_session(server, editor, tmp_path)
    req = await server.call(
        "session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": "go"}]}
    )

    def sleeping(frame: Frame) -> bool:
        update = frame.get("params", {}).get("update", {})
        return update.get("sessionUpdate") == "tool_call" and "sleep 30" in update.get("title", "")

    await server.until(sleeping, timeout=20)
    await server.notify("session/cancel", {"sessionId": session})
    answer, _ = await server.response(req, timeout=20)
    assert answer["result"]["stopReason"] == "cancelled"
    assert await until_gone(str(marker)) == []  # it asked to be stopped with the turn
    assert processes_running(str(keeper / "devserver.py"))  # this one keeps running

    await server.request("session/close", {"sessionId": session})
    assert await until_gone(str(keeper / "devserver.py")) == []
    await editor.close()


async def test_cancelling_at_a_permission_request_stops_what_asked_for_it(
    server_factory: Start, script: Any, tmp_path: Path
) -> None:
    marker, command = dev_server(tmp_path)
    rounds = [
        call("run_command", command=command, background=True, stop_on_cancel=True),
        call("command_output", id="bg_1", wait_seconds=10),
        call("run_command", command="echo next"),
    ]
    answers = iter(["allow_once", None])  # the second request is answered "cancelled"
    editor = FakeEditor(terminal=False, choose=lambda params: next(answers))
    server = await server_factory("--script", str(script(rounds)))
    session = await open_session(server, editor, tmp_path)
    stop, frames = await run_prompt(server, session)
    assert stop == "cancelled"
    assert "listening on port" in result_text(frames, "command_output")
    assert await until_gone(str(marker)) == []
