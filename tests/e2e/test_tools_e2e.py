"""Every tool through the real console script: once with a client that advertises fs and
terminal (work goes through the editor), once with a client that advertises neither (local).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.fake_editor import FakeEditor
from tests.support.progress import while_working
from tests.support.raw import Frame, RawServer

Start = Callable[..., Any]


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def updates_of(frames: list[Frame]) -> list[dict[str, Any]]:
    return [f["params"]["update"] for f in frames if f.get("method") == "session/update"]


def final_updates(frames: list[Frame]) -> dict[str, dict[str, Any]]:
    """toolCallId -> its last tool_call_update with a terminal status."""
    out: dict[str, dict[str, Any]] = {}
    for u in updates_of(frames):
        if u["sessionUpdate"] == "tool_call_update" and u.get("status") in ("completed", "failed"):
            out[u["toolCallId"]] = u
    return out


def tool_calls(frames: list[Frame]) -> dict[str, dict[str, Any]]:
    """tool name -> its tool_call update."""
    return {u["name"]: u for u in updates_of(frames) if u["sessionUpdate"] == "tool_call"}


async def open_session(
    server: RawServer, editor: FakeEditor, cwd: Path, mode: str | None = None
) -> str:
    editor.attach(server)
    await server.request(
        "initialize", {"protocolVersion": 1, "clientCapabilities": editor.capabilities()}
    )
    answer = await server.request("session/new", {"cwd": str(cwd), "mcpServers": []})
    session = str(answer["result"]["sessionId"])
    if mode:
        await server.request("session/set_mode", {"sessionId": session, "modeId": mode})
    return session


async def run_prompt(server: RawServer, session: str, text: str = "go") -> tuple[str, list[Frame]]:
    req = await server.call(
        "session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": text}]}
    )
    # Waited for while the agent works, not for a fixed time: on a machine busy with other
    # work a turn with commands or MCP servers to start took over 30 s (tests/support/progress).
    answer, before = await while_working(
        server.response(req, None), [server.proc.pid], what="a turn"
    )
    return answer["result"]["stopReason"], before


@pytest.mark.parametrize("through_editor", [True, False], ids=["editor-fs-terminal", "local"])
async def test_every_tool(
    server_factory: Start, script: Any, tmp_path: Path, through_editor: bool
) -> None:
    project = tmp_path / "project"
    (project / "docs").mkdir(parents=True)
    (project / "notes.txt").write_text("alpha\nbeta\n", encoding="utf-8")
    (project / "docs" / "guide.txt").write_text("see notes\n", encoding="utf-8")
    rounds = [
        call("read_file", path="notes.txt"),
        call("write_file", path="new.txt", content="hello\n"),
        call("edit_file", path="notes.txt", edits=[{"old_text": "beta", "new_text": "gamma"}]),
        call("list_directory", path="."),
        call("glob", pattern="**/*.txt"),
        call("grep", pattern="gam+a"),
        call("run_command", command="echo hi && echo there"),
        call(
            "update_plan",
            entries=[
                {"content": "Look around", "status": "completed"},
                {"content": "Edit notes", "status": "in_progress", "priority": "high"},
            ],
        ),
        {"text": "All done."},
    ]
    editor = FakeEditor(fs=through_editor, terminal=through_editor)
    server = await server_factory("--script", str(script(rounds)), env=_data_env(tmp_path))
    session = await open_session(server, editor, project)
    stop, frames = await run_prompt(server, session)
    await editor.close()

    assert stop == "end_turn"
    calls = tool_calls(frames)
    finals = final_updates(frames)
    assert set(calls) == {
        "read_file",
        "write_file",
        "edit_file",
        "list_directory",
        "glob",
        "grep",
        "run_command",
        "update_plan",
    }
    for name, update in calls.items():
        assert finals[update["toolCallId"]]["status"] == "completed", (
            name,
            finals[update["toolCallId"]],
        )

    def final(name: str) -> dict[str, Any]:
        return finals[calls[name]["toolCallId"]]

    assert calls["read_file"]["kind"] == "read"
    assert calls["read_file"]["locations"][0]["path"] == str(project / "notes.txt")
    assert "alpha" in final("read_file")["content"][0]["content"]["text"]

    (new_diff,) = final("write_file")["content"]
    assert new_diff == {"type": "diff", "path": str(project / "new.txt"), "newText": "hello\n"}
    (edit_diff,) = final("edit_file")["content"]
    assert edit_diff["path"] == str(project / "notes.txt")
    assert (edit_diff["oldText"], edit_diff["newText"]) == ("alpha\nbeta\n", "alpha\ngamma\n")
    assert (project / "notes.txt").read_text(encoding="utf-8") == "alpha\ngamma\n"
    assert (project / "new.txt").read_text(encoding="utf-8") == "hello\n"

    assert "docs/" in final("list_directory")["content"][0]["content"]["text"]
    assert "docs/guide.txt" in final("glob")["content"][0]["content"]["text"]
    assert "notes.txt:2" in final("grep")["content"][0]["content"]["text"]

    plans = [u for u in updates_of(frames) if u["sessionUpdate"] == "plan"]
    assert [e["content"] for e in plans[-1]["entries"]] == ["Look around", "Edit notes"]

    # Edits and the command asked first, showing the diff / the real command line.
    asked = {r["toolCall"]["toolCallId"]: r for r in editor.permission_requests}
    assert set(asked) == {
        calls[n]["toolCallId"] for n in ("write_file", "edit_file", "run_command")
    }
    assert asked[calls["edit_file"]["toolCallId"]]["toolCall"]["content"][0]["type"] == "diff"
    shown = asked[calls["run_command"]["toolCallId"]]["toolCall"]["content"][0]["content"]["text"]
    assert "echo hi && echo there" in shown

    command_content = final("run_command")["content"]
    if through_editor:
        assert command_content[0]["type"] == "terminal"
        assert editor.unreleased() == [] and len(editor.terminals) == 1
        assert str(project / "notes.txt") in editor.reads
        assert [p for p, _ in editor.writes] == [
            str(project / "new.txt"),
            str(project / "notes.txt"),
        ]
    else:
        assert "hi\nthere" in command_content[0]["content"]["text"]
        assert editor.terminals == {} and editor.reads == [] and editor.writes == []


def _data_env(tmp_path: Path) -> dict[str, str]:
    return {"ACP_SERVER_DATA_DIR": str(tmp_path / "data")}


async def test_always_allow_survives_into_a_new_session(
    server_factory: Start, script: Any, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    (project / "keep").mkdir(parents=True)
    env = _data_env(tmp_path)

    def choose(params: dict[str, Any]) -> str:
        command = params["toolCall"]["rawInput"]["command"]
        return "allow_always" if command == "git status" else "reject_once"

    first_editor = FakeEditor(fs=False, terminal=False, choose=choose)
    first = await server_factory(
        "--script",
        str(script([call("run_command", command="git status"), {"text": "ok"}])),
        env=env,
    )
    session = await open_session(first, first_editor, project)
    assert (await run_prompt(first, session))[0] == "end_turn"
    (request,) = first_editor.permission_requests
    kinds = [o["kind"] for o in request["options"]]
    assert kinds == ["allow_once", "allow_always", "reject_once", "reject_always"]
    always = next(o for o in request["options"] if o["kind"] == "allow_always")
    assert "git status" in always["name"]
    await first.close_stdin()
    await first.wait()

    second_editor = FakeEditor(fs=False, terminal=False, choose=choose)
    rounds = [
        call("run_command", command="git status --short"),
        call("run_command", command="rm -rf keep"),
        {"text": "ok"},
    ]
    second = await server_factory("--script", str(script(rounds)), env=env)
    session = await open_session(second, second_editor, project)
    stop, frames = await run_prompt(second, session)
    assert stop == "end_turn"
    asked = [r["toolCall"]["rawInput"]["command"] for r in second_editor.permission_requests]
    assert asked == ["rm -rf keep"]
    assert (project / "keep").is_dir()
    statuses = [u["status"] for u in final_updates(frames).values()]
    assert statuses.count("failed") >= 1


async def test_plan_mode_refuses_edits_with_an_explanation(
    server_factory: Start, script: Any, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    editor = FakeEditor(fs=False, terminal=False)
    rounds = [call("write_file", path="x.txt", content="x"), {"text": "understood"}]
    server = await server_factory("--script", str(script(rounds)), env=_data_env(tmp_path))
    session = await open_session(server, editor, project, mode="plan")
    stop, frames = await run_prompt(server, session)
    assert stop == "end_turn"
    (update,) = final_updates(frames).values()
    assert update["status"] == "failed"
    assert "Plan mode" in update["content"][0]["content"]["text"]
    assert not (project / "x.txt").exists() and editor.permission_requests == []


async def test_mode_changes_are_announced_both_ways(server_factory: Start, tmp_path: Path) -> None:
    server = await server_factory(env=_data_env(tmp_path))
    editor = FakeEditor(fs=False, terminal=False)
    await server.request("initialize", {"protocolVersion": 1})
    answer = await server.request("session/new", {"cwd": str(tmp_path), "mcpServers": []})
    result = answer["result"]
    session = result["sessionId"]
    assert result["modes"]["currentModeId"] == "ask"
    assert [o["id"] for o in result["configOptions"]] == ["mode"]
    editor.attach(server)
    req = await server.call(
        "session/set_config_option", {"sessionId": session, "configId": "mode", "value": "plan"}
    )
    answer, before = await server.response(req)
    assert answer["result"]["configOptions"][0]["currentValue"] == "plan"
    kinds = [u["sessionUpdate"] for u in updates_of(before)]
    assert kinds == ["current_mode_update", "config_option_update"]
    assert updates_of(before)[0]["currentModeId"] == "plan"
    bad = await server.request("session/set_mode", {"sessionId": session, "modeId": "yolo"})
    assert bad["error"]["code"] == -32602 and "modeId" in bad["error"]["message"]


async def test_sessions_on_one_connection_stay_apart(
    server_factory: Start, script: Any, tmp_path: Path
) -> None:
    """Two sessions prompt at once: every update and every permission request carries the
    session whose turn made it."""
    rounds = [
        {**call("write_file", path="a.txt", content="a"), "delay_ms": 5},
        {**call("write_file", path="b.txt", content="b"), "delay_ms": 5},
        {"text": "one done", "delay_ms": 5},
        {"text": "two done", "delay_ms": 5},
    ]
    server = await server_factory("--script", str(script(rounds)), env=_data_env(tmp_path))
    editor = FakeEditor(fs=True, terminal=False)
    dirs = [tmp_path / "one", tmp_path / "two"]
    for d in dirs:
        d.mkdir()
    first = await open_session(server, editor, dirs[0])
    answer = await server.request("session/new", {"cwd": str(dirs[1]), "mcpServers": []})
    second = answer["result"]["sessionId"]
    reqs = {}
    for session in (first, second):
        reqs[session] = await server.call(
            "session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": "go"}]}
        )
    frames = await server.until(lambda f: False if "method" in f else _both(f, reqs, server), 30)
    owner: dict[str, str] = {}
    for f in frames:
        if f.get("method") == "session/update":
            update = f["params"]["update"]
            if update["sessionUpdate"] == "tool_call":
                owner[update["toolCallId"]] = f["params"]["sessionId"]
    assert len(owner) == 2 and set(owner.values()) == {first, second}
    for request in editor.permission_requests:
        assert owner[request["toolCall"]["toolCallId"]] == request["sessionId"]
    for path, _ in editor.writes:
        session = first if path.startswith(str(dirs[0])) else second
        assert path.startswith(str(dirs[0] if session == first else dirs[1]))
    answers = [f for f in frames if f.get("id") in reqs.values() and "method" not in f]
    assert {a["result"]["stopReason"] for a in answers} == {"end_turn"}


def _both(frame: Frame, reqs: dict[str, Any], server: RawServer) -> bool:
    answered = {f.get("id") for f in server.seen if "method" not in f}
    return set(reqs.values()) <= answered


@pytest.mark.parametrize("mode", ["ask", "accept_edits", "bypass"])
async def test_reading_outside_the_project_always_asks(
    server_factory: Start, script: Any, tmp_path: Path, mode: str
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    secret = tmp_path / "secret.txt"
    secret.write_text("top secret\n", encoding="utf-8")
    (project / "link").symlink_to(tmp_path)
    rounds = [
        call("read_file", path="../secret.txt"),
        call("read_file", path="link/secret.txt"),
        call("read_file", path=str(secret)),
        {"text": "ok"},
    ]
    editor = FakeEditor(fs=False, terminal=False, choose=lambda params: "reject_once")
    server = await server_factory("--script", str(script(rounds)), env=_data_env(tmp_path))
    session = await open_session(server, editor, project, mode=mode)
    stop, frames = await run_prompt(server, session)
    assert stop == "end_turn"
    assert len(editor.permission_requests) == 3
    for update in final_updates(frames).values():
        assert update["status"] == "failed"
        assert "top secret" not in str(update)


@pytest.mark.parametrize("through_editor", [True, False], ids=["editor-fs", "local"])
async def test_searching_never_reads_through_a_link_out_of_the_project(
    server_factory: Start, script: Any, tmp_path: Path, through_editor: bool
) -> None:
    """grep and glob never follow links; list_directory shows where one leads; read_file on
    the same link asks, as reading outside always does."""
    project, outside = tmp_path / "project", tmp_path / "outside"
    project.mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_text("token TOPSECRET\n", encoding="utf-8")
    (project / "notes.txt").write_text("token here\n", encoding="utf-8")
    (project / "leak.txt").symlink_to(outside / "secret.txt")
    (project / "outdir").symlink_to(outside)
    rounds = [
        call("grep", pattern="token"),
        call("grep", pattern="token", path="outdir"),
        call("glob", pattern="**/*.txt"),
        call("list_directory"),
        call("read_file", path="leak.txt"),
        {"text": "ok"},
    ]
    editor = FakeEditor(fs=through_editor, terminal=False, choose=lambda params: "reject_once")
    server = await server_factory("--script", str(script(rounds)), env=_data_env(tmp_path))
    session = await open_session(server, editor, project, mode="bypass")
    stop, frames = await run_prompt(server, session)
    assert stop == "end_turn"
    assert "TOPSECRET" not in json.dumps(frames)
    finals = final_updates(frames)
    ids = [u["toolCallId"] for u in updates_of(frames) if u["sessionUpdate"] == "tool_call"]
    texts = [_text(finals[i]) for i in ids]
    assert texts[0] == "notes.txt:1: token here"
    asked = [r["toolCall"]["toolCallId"] for r in editor.permission_requests]
    assert asked == [ids[1], ids[4]]  # grep inside the linked directory, and read_file
    assert [finals[i]["status"] for i in (ids[1], ids[4])] == ["failed", "failed"]
    link_note = f"-> {outside / 'secret.txt'} (outside the project; reading it asks the user)"
    assert texts[2] == "notes.txt"
    assert f"leak.txt {link_note}" in texts[3].splitlines()
    assert editor.reads == []


def _text(update: dict[str, Any]) -> str:
    return str(update["content"][0]["content"]["text"])


async def test_grep_leaves_out_gitignored_folders_unless_asked(
    server_factory: Start, script: Any, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    for rel in ("src/app.py", "build/app.py", ".cache/app.py"):
        (project / rel).parent.mkdir(parents=True, exist_ok=True)
        (project / rel).write_text("needle\n", encoding="utf-8")
    (project / ".git").mkdir()
    (project / ".gitignore").write_text("build/\n", encoding="utf-8")
    rounds = [
        call("grep", pattern="needle", files_only=True),
        call("grep", pattern="needle", files_only=True, include_ignored=True, include_hidden=True),
        {"text": "ok"},
    ]
    server = await server_factory("--script", str(script(rounds)), env=_data_env(tmp_path))
    session = await open_session(server, FakeEditor(), project)
    stop, frames = await run_prompt(server, session)
    assert stop == "end_turn"
    finals = final_updates(frames)
    ids = [u["toolCallId"] for u in updates_of(frames) if u["sessionUpdate"] == "tool_call"]
    assert [_text(finals[i]).splitlines() for i in ids] == [
        ["src/app.py"],
        [".cache/app.py", "build/app.py", "src/app.py"],
    ]
