"""Sessions that last: load replays what the editor saw, across server restarts; list, resume,
close, delete and fork behave as ACP says."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support.fake_editor import FakeEditor
from tests.support.raw import Frame, RawServer

Start = Callable[..., Any]
LIVE_ONLY = {
    "session_info_update",
    "notice",
    "usage_update",
    "current_mode_update",
    "config_option_update",
    "available_commands_update",
}


def updates_of(frames: list[Frame]) -> list[dict[str, Any]]:
    return [f["params"]["update"] for f in frames if f.get("method") == "session/update"]


def normalized(updates: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What the user saw, independent of how it was chunked: text merged per message, each
    tool call folded into its announcement and final state."""
    out: list[dict[str, Any]] = []
    calls: dict[str, dict[str, Any]] = {}
    for u in updates:
        kind = u["sessionUpdate"]
        if kind in LIVE_ONLY:
            continue
        if kind.endswith("_chunk"):
            last = out[-1] if out else None
            if (
                last
                and last.get("sessionUpdate") == kind
                and last.get("messageId") == u.get("messageId")
            ):
                last["content"]["text"] += u["content"]["text"]
                continue
            out.append({**u, "content": dict(u["content"])})
        elif kind == "tool_call":
            calls[u["toolCallId"]] = {"announce": {k: v for k, v in u.items() if k != "status"}}
            out.append({"call": u["toolCallId"]})
        elif kind == "tool_call_update":
            final = calls[u["toolCallId"]].setdefault("final", {})
            final.update({k: v for k, v in u.items() if k != "sessionUpdate"})
        else:
            out.append(u)
    return [calls[x["call"]] if "call" in x else x for x in out]


async def connect(server: RawServer, editor: FakeEditor) -> None:
    editor.attach(server)
    answer = await server.request(
        "initialize", {"protocolVersion": 1, "clientCapabilities": editor.capabilities()}
    )
    caps = answer["result"]["agentCapabilities"]
    assert caps["loadSession"] is True
    assert set(caps["sessionCapabilities"]) >= {"list", "resume", "close", "delete"}


async def prompt(server: RawServer, session: str, text: str) -> tuple[str, list[Frame]]:
    req = await server.call(
        "session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": text}]}
    )
    answer, before = await server.response(req, timeout=30)
    return answer["result"]["stopReason"], before


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


async def test_load_replays_what_was_seen_and_history_continues(
    server_factory: Start, script: Any, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "app.py").write_text("x = 1\n", encoding="utf-8")
    rounds = [
        {
            "thought": "Let me look.",
            "text": "I will change x.",
            **call("edit_file", path="app.py", edits=[{"old_text": "x = 1", "new_text": "x = 2"}]),
        },
        call("run_command", command="echo built ok"),
        call("update_plan", entries=[{"content": "Change x", "status": "completed"}]),
        {"text": "Done: x is 2 now."},
        {
            "text": "Yes, I remember.",
            "expect": {
                "roles": [
                    "user",
                    "assistant",
                    "tool",
                    "assistant",
                    "tool",
                    "assistant",
                    "tool",
                    "assistant",
                    "user",
                ],
                "contains": [
                    "Please bump x",
                    "x = 2",
                    "built ok",
                    "Done: x is 2 now.",
                    "Do you remember?",
                ],
            },
        },
    ]
    path = script(rounds)
    first = await server_factory("--script", str(path))
    editor = FakeEditor(fs=False, terminal=False, choose=lambda p: "allow_once")
    await connect(first, editor)
    answer = await first.request("session/new", {"cwd": str(project), "mcpServers": []})
    session = answer["result"]["sessionId"]
    stop, live = await prompt(first, session, "Please bump x")
    assert stop == "end_turn"
    await first.close_stdin()
    assert await first.wait() == 0

    # A new server, with a script that checks the request it gets.
    rest = script([rounds[4]])
    second = await server_factory("--script", str(rest))
    await connect(second, FakeEditor(fs=False, terminal=False))
    req = await second.call(
        "session/load", {"sessionId": session, "cwd": str(project), "mcpServers": []}
    )
    answer, replay = await second.response(req)
    assert answer["result"]["modes"]["currentModeId"] == "ask"
    replayed = updates_of(replay)
    assert all(f["params"]["sessionId"] == session for f in replay)
    assert replayed[0] == {
        "sessionUpdate": "user_message_chunk",
        "content": {"type": "text", "text": "Please bump x"},
        "messageId": replayed[0]["messageId"],
    }
    assert normalized(replayed[1:]) == normalized(updates_of(live))
    kinds = {u["sessionUpdate"] for u in replayed}
    assert {"agent_thought_chunk", "tool_call", "tool_call_update", "plan"} <= kinds
    finals = [u for u in replayed if u["sessionUpdate"] == "tool_call_update"]
    diffs = [c for u in finals for c in u.get("content", []) if c["type"] == "diff"]
    assert diffs and diffs[0]["newText"] == "x = 2\n"

    # The script's `expect` fails the round unless the model sees the whole history.
    stop, before = await prompt(second, session, "Do you remember?")
    text = "".join(
        u["content"]["text"]
        for u in updates_of(before)
        if u["sessionUpdate"] == "agent_message_chunk"
    )
    assert (stop, text) == ("end_turn", "Yes, I remember.")
