"""`acp-server sessions`: the list and both export formats, on sessions recorded the real way.

One session is made by the real server (a scripted turn that thinks, edits a file, runs a
command in the editor's terminal and updates the plan); a second one is written through
`transcript.Recorder` directly (a command run locally, a new file, an interrupted last turn).
The CLI runs as the installed `acp-server` script, in a subprocess.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from acp_server.messages import Message, TextPart, ToolCall, text_message
from acp_server.store.database import SessionRow, Store
from acp_server.store.transcript import Recorder
from tests.support.fake_editor import FakeEditor
from tests.support.raw import Frame, RawServer, console_script


class Quiet:
    def observe(self, side: str, line: str) -> None:
        pass


@dataclass
class Stored:
    data: Path
    project: Path
    other: Path
    real: str  # the session made by the real server
    direct: str  # the session written through the Recorder
    live_replay: list[dict[str, Any]]  # what session/load replayed for `real`


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


async def record_with_server(data: Path, project: Path, tmp_path: Path) -> tuple[str, list[Frame]]:
    """A real turn through the real server; then a second server loads it (the replay)."""
    rounds = [
        {
            "thought": "Let me look at app.py first.",
            "text": "I will change x.",
            **call("edit_file", path="app.py", edits=[{"old_text": "x = 1", "new_text": "x = 2"}]),
        },
        call("run_command", command="echo built ok"),
        call(
            "update_plan",
            entries=[
                {"content": "Change x", "status": "completed"},
                {"content": "Release", "status": "pending"},
            ],
        ),
        {"text": "Done: x is 2 now."},
    ]
    script = tmp_path / "script.json"
    script.write_text(json.dumps(rounds), encoding="utf-8")
    env = {"ACP_SERVER_DATA_DIR": str(data)}
    server = await RawServer.start(Quiet(), "--script", str(script), env=env)
    editor = FakeEditor(fs=False, terminal=True)
    editor.attach(server)
    try:
        caps = {"protocolVersion": 1, "clientCapabilities": editor.capabilities()}
        await server.request("initialize", caps)
        new = await server.request("session/new", {"cwd": str(project), "mcpServers": []})
        session = new["result"]["sessionId"]
        prompt = [{"type": "text", "text": "Please bump x"}]
        answer = await server.request(
            "session/prompt", {"sessionId": session, "prompt": prompt}, timeout=30
        )
        assert answer["result"]["stopReason"] == "end_turn"
        await server.close_stdin()
        assert await server.wait() == 0
    finally:
        await editor.close()
        await server.stop()
    # A second process loads it and runs one more turn; its call ids start over, so the new
    # command has the id the edit had (the export must still tell them apart).
    again = tmp_path / "script-again.json"
    again.write_text(
        json.dumps([call("run_command", command="echo second run"), {"text": "Ran it again."}]),
        encoding="utf-8",
    )
    second = await RawServer.start(Quiet(), "--script", str(again), env=env)
    editor = FakeEditor(fs=False, terminal=True)
    editor.attach(second)
    try:
        caps = {"protocolVersion": 1, "clientCapabilities": editor.capabilities()}
        await second.request("initialize", caps)
        req = await second.call(
            "session/load", {"sessionId": session, "cwd": str(project), "mcpServers": []}
        )
        loaded, before = await second.response(req)
        assert "result" in loaded
        prompt = [{"type": "text", "text": "Run the build again"}]
        answer = await second.request(
            "session/prompt", {"sessionId": session, "prompt": prompt}, timeout=30
        )
        assert answer["result"]["stopReason"] == "end_turn"
        await second.close_stdin()
        assert await second.wait() == 0
    finally:
        await editor.close()
        await second.stop()
    return session, [f["params"]["update"] for f in before if f.get("method") == "session/update"]


async def record_directly(store: Store, cwd: Path) -> str:
    """Written the way a live session writes: shown updates and messages through a Recorder."""
    session = "sess_direct"
    now = time.time()
    store.create(SessionRow(session, str(cwd), [], None, now, now, {"mode": "ask"}))
    store.update(session, title="Add the notes file")
    recorder = Recorder(store, session)
    recorder.shown(
        {
            "sessionUpdate": "user_message_chunk",
            "content": {"type": "text", "text": "Create NOTES.md and count the lines"},
            "messageId": "user_1",
        }
    )
    recorder.message(
        Message("user", (TextPart("Create NOTES.md and count the lines"),), message_id="user_1")
    )
    write = ToolCall("call_w", "write_file", {"path": "NOTES.md", "content": "hello\n"})
    count = ToolCall("call_c", "run_command", {"command": "wc -l NOTES.md"})
    for piece in ("Creating ", "the file."):
        recorder.shown(
            {
                "sessionUpdate": "agent_message_chunk",
                "content": {"type": "text", "text": piece},
                "messageId": "msg_1",
            }
        )
    recorder.message(
        Message("assistant", (TextPart("Creating the file."),), (write,), message_id="msg_1")
    )
    recorder.shown(
        {
            "sessionUpdate": "tool_call",
            "toolCallId": "call_w",
            "title": "Write NOTES.md",
            "name": "write_file",
            "kind": "edit",
            "status": "pending",
        }
    )
    diff = {"type": "diff", "path": str(cwd / "NOTES.md"), "newText": "hello\n"}
    recorder.shown(
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "call_w",
            "status": "completed",
            "content": [diff],
        }
    )
    recorder.message(text_message("tool", "Wrote NOTES.md.", tool_call_id="call_w"))
    recorder.message(Message("assistant", (), (count,), message_id="msg_2"))
    recorder.shown(
        {
            "sessionUpdate": "tool_call",
            "toolCallId": "call_c",
            "title": "Run `wc -l NOTES.md`",
            "name": "run_command",
            "kind": "execute",
            "status": "pending",
        }
    )
    shown = "Exit code 0\n```\n1 NOTES.md\n```"
    recorder.shown(
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "call_c",
            "status": "completed",
            "content": [{"type": "content", "content": {"type": "text", "text": shown}}],
        }
    )
    recorder.message(text_message("tool", "Exit code 0\n1 NOTES.md", tool_call_id="call_c"))
    recorder.turn_ended("end_turn")
    # A second prompt the agent never answered (it was stopped).
    recorder.shown(
        {
            "sessionUpdate": "user_message_chunk",
            "content": {"type": "text", "text": "Now delete it"},
            "messageId": "user_2",
        }
    )
    recorder.message(Message("user", (TextPart("Now delete it"),), message_id="user_2"))
    recorder.flush()
    await store.flush()
    return session


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> Stored:
    tmp_path = tmp_path_factory.mktemp("sessions-cli")
    data = tmp_path / "data"
    project = tmp_path / "project"
    other = tmp_path / "other"
    project.mkdir()
    other.mkdir()
    (project / "app.py").write_text("x = 1\n", encoding="utf-8")
    real, replay = asyncio.run(record_with_server(data, project, tmp_path))
    time.sleep(0.01)  # the direct session is the newer one

    async def direct() -> str:
        store = Store(data / "sessions.sqlite3")
        try:
            return await record_directly(store, other)
        finally:
            store.close()

    return Stored(data, project, other, real, asyncio.run(direct()), replay)


def sessions(data: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [console_script(), "sessions", *args],
        env={**os.environ, "ACP_SERVER_DATA_DIR": str(data)},
        capture_output=True,
        text=True,
        timeout=30,
    )


# ----- the list --------------------------------------------------------------------------------


def test_list_shows_every_session_newest_first(stored: Stored) -> None:
    done = sessions(stored.data)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split() == ["ID", "UPDATED", "MESSAGES", "CWD", "TITLE"]
    direct, real = lines[1], lines[2]
    assert direct.split()[0] == stored.direct and real.split()[0] == stored.real
    assert direct.endswith("Add the notes file") and real.endswith("Please bump x")
    # user, (assistant, tool) x 3, assistant; then user, assistant, tool, assistant
    assert real.split()[3] == "12" and direct.split()[3] == "6"
    assert str(stored.project).replace(os.path.expanduser("~"), "~") in real
    # the local time, minutes precision: "YYYY-MM-DD HH:MM"
    assert time.strftime("%Y-%m-%d", time.localtime()) in direct
    assert f"2 sessions in {stored.data / 'sessions.sqlite3'}" in done.stdout


def test_list_leaves_out_sessions_never_prompted(stored: Stored) -> None:
    # Editors open sessions they never use (CodeCompanion's resume picker filled with them).
    store = Store(stored.data / "sessions.sqlite3")
    now = time.time()
    store.create(SessionRow("sess_unused", str(stored.project), [], None, now, now, {}))
    asyncio.run(store.flush())
    store.close()
    done = sessions(stored.data)
    assert done.returncode == 0, done.stderr
    assert "sess_unused" not in done.stdout
    assert "2 sessions in" in done.stdout


def test_list_filters_by_directory_and_limits(stored: Stored) -> None:
    only = sessions(stored.data, "--cwd", str(stored.project))
    assert stored.real in only.stdout and stored.direct not in only.stdout
    assert f"1 session for {stored.project}" in only.stdout
    # A relative directory means the same as the absolute one.
    relative = subprocess.run(
        [console_script(), "sessions", "list", "--cwd", "."],
        env={**os.environ, "ACP_SERVER_DATA_DIR": str(stored.data)},
        cwd=stored.other,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert stored.direct in relative.stdout and stored.real not in relative.stdout
    first = sessions(stored.data, "--limit", "1")
    assert stored.direct in first.stdout and stored.real not in first.stdout
    assert "more exist" in first.stdout
    nothing = sessions(stored.data, "--cwd", str(stored.project / "nowhere"))
    assert nothing.returncode == 0
    assert "No stored sessions for" in nothing.stdout
    assert str(stored.data / "sessions.sqlite3") in nothing.stdout


def test_list_without_a_store_says_where_it_would_be(tmp_path: Path) -> None:
    done = sessions(tmp_path / "empty")
    assert done.returncode == 0
    assert "No stored sessions" in done.stdout
    assert str(tmp_path / "empty" / "sessions.sqlite3") in done.stdout
    assert not (tmp_path / "empty").exists()  # listing never creates a store


# ----- export ----------------------------------------------------------------------------------


def test_markdown_export_reads_like_the_conversation(stored: Stored) -> None:
    done = sessions(stored.data, "export", stored.real, "--format", "markdown")
    assert done.returncode == 0, done.stderr
    text = done.stdout
    assert text.startswith("# Please bump x\n")
    assert f"`{stored.real}`" in text and f"`{stored.project}`" in text
    order = [
        "## Turn 1",
        "### User",
        "Please bump x",
        "### Agent",
        "<details>\n<summary>Thinking</summary>\n\nLet me look at app.py first.\n\n</details>",
        "I will change x.",
        "#### Tool call: Edit app.py (completed)",
        "```diff\n--- a/app.py\n+++ b/app.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n```",
        "#### Tool call: Run `echo built ok` (completed)",
        "built ok",  # from the editor's terminal: the output comes from the tool result
        "#### Tool call: Update plan (completed)",
        "**Plan:**\n\n- [x] Change x\n- [ ] Release",
        "Done: x is 2 now.",
        "## Turn 2",
        "Run the build again",
        "#### Tool call: Run `echo second run` (completed)",
        "Output (from the editor's terminal):\n\n```\nExit code 0\nsecond run\n```",
        "Ran it again.",
    ]
    at = 0
    for piece in order:  # each one, in this order
        found = text.find(piece, at)
        assert found >= 0, f"{piece!r} missing after position {at} of:\n{text}"
        at = found + len(piece)
    assert text.count("#### Tool call:") == 4
    assert "Applied 1 edit" not in text  # the edit's result never stands in for the command's
    assert "interrupted" not in text and "stopped before" not in text


def test_markdown_export_of_new_files_local_output_and_an_interrupted_turn(
    stored: Stored,
) -> None:
    text = sessions(stored.data, "export", stored.direct).stdout
    assert "# Add the notes file" in text
    assert "Creating the file." in text  # streamed chunks merged
    assert "```diff\n--- /dev/null\n+++ b/NOTES.md\n@@ -0,0 +1 @@\n+hello\n```" in text
    assert "#### Tool call: Run `wc -l NOTES.md` (completed)" in text
    assert "```\nExit code 0\n1 NOTES.md\n```" in text  # status and output: one block
    assert text.count("## Turn ") == 2
    assert text.rstrip().endswith(
        "*The agent was stopped before it finished answering this prompt.*"
    )


def test_json_export_has_the_row_the_history_and_the_replay(stored: Stored, tmp_path: Path) -> None:
    out = tmp_path / "export.json"
    done = sessions(stored.data, "export", stored.real, "--format", "json", "-o", str(out))
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    assert str(out) in done.stderr
    exported = json.loads(out.read_text(encoding="utf-8"))
    assert set(exported) == {"session", "history", "updates"}
    row = exported["session"]
    assert row["id"] == stored.real and row["cwd"] == str(stored.project)
    assert row["title"] == "Please bump x" and row["state"]["mode"] == "ask"
    roles = [m["role"] for m in exported["history"]]
    first = ["user", "assistant", "tool", "assistant", "tool", "assistant", "tool", "assistant"]
    assert roles == [*first, "user", "assistant", "tool", "assistant"]
    assert exported["history"][0]["content"] == [{"type": "text", "text": "Please bump x"}]
    assert exported["history"][1]["thought"] == "Let me look at app.py first."
    assert exported["history"][1]["tool_calls"][0]["name"] == "edit_file"
    # what session/load replayed (the title notice aside, which is live-only), then the turn
    # that followed it
    replayed = [u for u in stored.live_replay if u["sessionUpdate"] != "session_info_update"]
    assert exported["updates"][: len(replayed)] == replayed
    later = exported["updates"][len(replayed) :]
    assert later[0]["content"] == {"type": "text", "text": "Run the build again"}
    assert later[-1]["content"] == {"type": "text", "text": "Ran it again."}
    diffs = [
        c
        for u in exported["updates"]
        for c in u.get("content", [])
        if isinstance(c, dict) and c.get("type") == "diff"
    ]
    assert diffs[0]["oldText"] == "x = 1\n" and diffs[0]["newText"] == "x = 2\n"


def test_unknown_session_is_an_error(stored: Stored, tmp_path: Path) -> None:
    for args in (["export", "sess_nope"], ["export", "sess_nope", "--format", "json"]):
        done = sessions(stored.data, *args)
        assert done.returncode == 1
        assert done.stdout == ""
        assert "unknown session 'sess_nope'" in done.stderr
        assert str(stored.data / "sessions.sqlite3") in done.stderr
    missing = sessions(tmp_path / "nothing-here", "export", "sess_nope")
    assert missing.returncode == 1 and "unknown session" in missing.stderr


def test_help_lists_the_command_and_serving_does_not_import_it() -> None:
    top = subprocess.run([console_script(), "--help"], capture_output=True, text=True, timeout=30)
    assert "sessions" in top.stdout
    probe = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from acp_server import cli; cli.build_parser().parse_args([]); "
            "print('acp_server.cli.sessions' in sys.modules, 'sqlite3' in sys.modules)",
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert probe.stdout.split() == ["False", "False"], probe.stderr
