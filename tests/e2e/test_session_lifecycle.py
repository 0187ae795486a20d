"""The session lifecycle over the real console script: list, resume, close, delete, fork, load
of unknown ids, titles and modes that outlive the process. Every frame is schema-checked by
the conformance fixture (session/fork answers against the unstable schema)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from acp_server.store.database import SessionRow, Store
from tests.support.raw import Frame, RawServer
from tests.support.raw import stop_reason as result_stop

Start = Callable[..., Any]
SLOW_TEXT = " ".join(f"word{i}" for i in range(200))


def updates_of(frames: list[Frame]) -> list[dict[str, Any]]:
    return [f["params"]["update"] for f in frames if f.get("method") == "session/update"]


def agent_text(frames: list[Frame]) -> str:
    return "".join(
        u["content"]["text"]
        for u in updates_of(frames)
        if u["sessionUpdate"] == "agent_message_chunk"
    )


def is_agent_chunk(frame: Frame) -> bool:
    return bool(
        frame.get("method") == "session/update"
        and frame["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
    )


def user_texts(frames: list[Frame]) -> list[str]:
    return [
        u["content"]["text"]
        for u in updates_of(frames)
        if u["sessionUpdate"] == "user_message_chunk"
    ]


def when(stamp: str) -> datetime:
    parsed = datetime.fromisoformat(stamp)
    assert parsed.tzinfo is not None, f"updatedAt {stamp!r} has no time zone"
    return parsed


async def start(server_factory: Start, path: Path) -> RawServer:
    server: RawServer = await server_factory("--script", str(path))
    answer = await server.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    caps = answer["result"]["agentCapabilities"]
    assert caps["loadSession"] is True
    assert set(caps["sessionCapabilities"]) >= {"list", "resume", "close", "delete", "fork"}
    return server


async def stop(server: RawServer) -> None:
    await server.close_stdin()
    assert await server.wait() == 0


async def new(server: RawServer, cwd: Path) -> str:
    answer = await server.request("session/new", {"cwd": str(cwd), "mcpServers": []})
    return str(answer["result"]["sessionId"])


async def prompt(server: RawServer, session: str, text: str) -> tuple[str, list[Frame]]:
    req = await server.call(
        "session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": text}]}
    )
    answer, before = await server.response(req, timeout=30)
    assert "result" in answer, answer
    return answer["result"]["stopReason"], before


async def listed(server: RawServer, **params: Any) -> list[dict[str, Any]]:
    answer = await server.request("session/list", params)
    assert "nextCursor" not in answer["result"]
    sessions: list[dict[str, Any]] = answer["result"]["sessions"]
    return sessions


async def answers(server: RawServer, *ids: int, timeout: float = 20) -> dict[int, Frame]:
    """The answers to all of `ids`, in whatever order they come."""
    got: dict[int, Frame] = {}

    def done(frame: Frame) -> bool:
        if "method" not in frame and frame.get("id") in ids:
            got[frame["id"]] = frame
        return len(got) == len(ids)

    await server.until(done, timeout)
    return got


def not_found(answer: Frame) -> dict[str, Any]:
    assert "error" in answer, answer
    assert answer["error"]["code"] == -32002, answer
    error: dict[str, Any] = answer["error"]
    return error


# ----- session/list ------------------------------------------------------------------------


async def test_list_filters_by_cwd_titles_from_first_prompt_and_updates_stamps(
    server_factory: Start, script: Any, tmp_path: Path
) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    server = await start(server_factory, script([{"text": "On it."}] * 3))
    assert await listed(server) == []  # empty params: the first (and only, empty) page
    first = await new(server, a)
    second = await new(server, b)
    # Never prompted: not listed (CodeCompanion's resume picker filled up with them).
    assert await listed(server) == []

    stop_reason, _ = await prompt(server, second, "Look at b")
    sessions = await listed(server)
    assert [s["sessionId"] for s in sessions] == [second]
    before = when(sessions[0]["updatedAt"])
    await asyncio.sleep(0.01)
    stop_reason, _ = await prompt(server, first, "Fix the flaky login test")
    assert stop_reason == "end_turn"
    sessions = await listed(server)
    assert [s["sessionId"] for s in sessions] == [first, second]  # the prompt made it newest
    assert [s["cwd"] for s in sessions] == [str(a), str(b)]
    info = sessions[0]
    assert info["title"] == "Fix the flaky login test"
    assert when(info["updatedAt"]) > before
    assert when(sessions[1]["updatedAt"]) == before

    assert [s["sessionId"] for s in await listed(server, cwd=str(a))] == [first]
    assert [s["sessionId"] for s in await listed(server, cwd=str(b) + "/")] == [second]
    assert await listed(server, cwd=str(tmp_path / "elsewhere")) == []

    # A later prompt keeps the title and moves the stamp on again.
    await asyncio.sleep(0.01)
    stop_reason, _ = await prompt(server, first, "And the signup test too")
    assert stop_reason == "end_turn"
    again = (await listed(server, cwd=str(a)))[0]
    assert again["title"] == "Fix the flaky login test"
    assert when(again["updatedAt"]) > when(info["updatedAt"])
    await stop(server)


async def seed(data_dir: Path, cwds: list[Path]) -> list[str]:
    """Sessions with one prompt each, in this order (oldest first), written as the server
    would; faster than prompting over the wire."""
    store = Store(data_dir / "sessions.sqlite3")
    ids = [f"sess_{i:04d}" for i in range(len(cwds))]
    try:
        for session, cwd in zip(ids, cwds, strict=True):
            now = time.time()
            store.create(SessionRow(session, str(cwd), [], "seeded", now, now, {"mode": "ask"}))
            store.append(session, "message", {"role": "user", "content": []})
        await store.flush()
    finally:
        store.close()
    return ids


async def test_list_pages_through_many_sessions_newest_first(
    server_factory: Start, script: Any, tmp_path: Path, private_data_dir: Path
) -> None:
    other = tmp_path / "other"
    other.mkdir()
    created = await seed(private_data_dir, [tmp_path if i % 4 else other for i in range(121)])
    server = await start(server_factory, script([]))

    seen: list[str] = []
    pages: list[int] = []
    params: dict[str, Any] = {}
    while True:
        answer = await server.request("session/list", params)
        result = answer["result"]
        pages.append(len(result["sessions"]))
        seen += [s["sessionId"] for s in result["sessions"]]
        if "nextCursor" not in result:
            break
        assert isinstance(result["nextCursor"], str) and result["nextCursor"]
        params = {"cursor": result["nextCursor"]}
        assert len(pages) < 10, "the cursor never ends"
    assert pages == [50, 50, 21]
    assert len(set(seen)) == len(seen), "a session was listed twice"
    assert seen == created[::-1]

    # The cwd filter pages the same way.
    seen = []
    params = {"cwd": str(tmp_path)}
    while True:
        result = (await server.request("session/list", params))["result"]
        seen += [s["sessionId"] for s in result["sessions"]]
        if "nextCursor" not in result:
            break
        params = {"cwd": str(tmp_path), "cursor": result["nextCursor"]}
    assert seen == [s for i, s in enumerate(created) if i % 4][::-1]
    await stop(server)


@pytest.mark.parametrize(
    "cursor",
    ["not a cursor!", "%%%", "eyJ4IjogMX0", "bnVsbA", "é", 42],
    ids=["junk", "symbols", "json-object", "json-null", "non-ascii", "number"],
)
async def test_an_invalid_cursor_is_invalid_params(
    server_factory: Start, script: Any, tmp_path: Path, cursor: Any
) -> None:
    server = await start(server_factory, script([]))
    await prompt(server, await new(server, tmp_path), "hello")
    answer = await server.request("session/list", {"cursor": cursor})
    assert answer["error"]["code"] == -32602, answer
    assert "cursor" in answer["error"]["message"]
    assert len((await server.request("session/list", {}))["result"]["sessions"]) == 1
    await stop(server)


async def test_the_first_prompt_titles_the_session_with_session_info_update(
    server_factory: Start, script: Any, tmp_path: Path
) -> None:
    server = await start(server_factory, script([{"text": "Sure."}, {"text": "Sure."}] * 2))
    session = await new(server, tmp_path)
    _, before = await prompt(server, session, "Add a dark mode toggle")
    infos = [u for u in updates_of(before) if u["sessionUpdate"] == "session_info_update"]
    assert [u["title"] for u in infos] == ["Add a dark mode toggle"]
    assert when(infos[0]["updatedAt"])
    _, before = await prompt(server, session, "Make it the default")
    assert not [u for u in updates_of(before) if u["sessionUpdate"] == "session_info_update"]

    long_prompt = "Please refactor " + "the payment module and its tests " * 5
    other = await new(server, tmp_path)
    _, before = await prompt(server, other, long_prompt)
    (info,) = [u for u in updates_of(before) if u["sessionUpdate"] == "session_info_update"]
    assert info["title"].endswith("…") and len(info["title"]) <= 61
    assert long_prompt.startswith(info["title"][:-1])
    titles = {s["sessionId"]: s.get("title") for s in await listed(server)}
    assert titles == {session: "Add a dark mode toggle", other: info["title"]}
    await stop(server)


# ----- session/resume ----------------------------------------------------------------------


async def test_resume_restores_without_replay_and_the_history_continues(
    server_factory: Start, script: Any, tmp_path: Path
) -> None:
    first = await start(server_factory, script([{"text": "Noted: 42."}]))
    session = await new(first, tmp_path)
    assert (await prompt(first, session, "Remember the number 42"))[0] == "end_turn"
    await stop(first)

    check = {
        "text": "It was 42.",
        "expect": {
            "roles": ["user", "assistant", "user"],
            "contains": ["Remember the number 42", "Noted: 42.", "Which number was it?"],
        },
    }
    second = await start(server_factory, script([check]))
    req = await second.call("session/resume", {"sessionId": session, "cwd": str(tmp_path)})
    answer, before = await second.response(req)
    assert before == [], "session/resume must not replay anything"
    assert answer["result"]["modes"]["currentModeId"] == "ask"
    stop_reason, frames = await prompt(second, session, "Which number was it?")
    assert (stop_reason, agent_text(frames)) == ("end_turn", "It was 42.")
    # The title came back with the session: the prompt does not announce a new one.
    assert not [u for u in updates_of(frames) if u["sessionUpdate"] == "session_info_update"]

    unknown = await second.request(
        "session/resume", {"sessionId": "sess_missing", "cwd": str(tmp_path)}
    )
    assert "sess_missing" in not_found(unknown)["message"]
    await stop(second)


# ----- session/close -----------------------------------------------------------------------


async def test_close_cancels_the_running_prompt_and_the_session_can_be_loaded_again(
    server_factory: Start, script: Any, tmp_path: Path
) -> None:
    back = {
        "text": "Back again.",
        "expect": {"contains": ["Write a long story", "word0", "Go on"]},
    }
    path = script([{"text": SLOW_TEXT, "delay_ms": 20}, back])
    server = await start(server_factory, path)
    session = await new(server, tmp_path)
    running = await server.call(
        "session/prompt",
        {"sessionId": session, "prompt": [{"type": "text", "text": "Write a long story"}]},
    )
    await server.until(is_agent_chunk)
    closing = await server.call("session/close", {"sessionId": session})
    got = await answers(server, running, closing)
    assert got[closing]["result"] == {}
    assert result_stop(got[running]["result"]) == "cancelled"
    await asyncio.sleep(0.2)
    assert server.frames.empty(), "nothing may follow the cancelled turn's answer"

    # Gone from the live set ...
    req = await server.call(
        "session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": "Hello?"}]}
    )
    answer, _ = await server.response(req)
    not_found(answer)
    again = await server.request("session/close", {"sessionId": session})
    assert again["result"] == {}, "a stored, inactive session may be closed again"
    # ... but still stored: it is listed, and loads with what was said.
    assert [s["sessionId"] for s in await listed(server)] == [session]
    req = await server.call(
        "session/load", {"sessionId": session, "cwd": str(tmp_path), "mcpServers": []}
    )
    answer, replay = await server.response(req)
    assert "result" in answer
    assert user_texts(replay) == ["Write a long story"]
    assert agent_text(replay).startswith("word0 ")
    stop_reason, frames = await prompt(server, session, "Go on")
    assert (stop_reason, agent_text(frames)) == ("end_turn", "Back again.")

    unknown = await server.request("session/close", {"sessionId": "sess_missing"})
    assert "sess_missing" in not_found(unknown)["message"]
    await stop(server)


# ----- session/delete ----------------------------------------------------------------------


async def test_delete_removes_the_session_for_good(
    server_factory: Start, script: Any, tmp_path: Path
) -> None:
    server = await start(server_factory, script([{"text": "Done."}] * 2))
    doomed = await new(server, tmp_path)
    kept = await new(server, tmp_path)
    assert (await prompt(server, kept, "Something to keep"))[0] == "end_turn"
    assert (await prompt(server, doomed, "Something to forget"))[0] == "end_turn"
    assert (await server.request("session/delete", {"sessionId": doomed}))["result"] == {}
    assert [s["sessionId"] for s in await listed(server)] == [kept]
    load = {"sessionId": doomed, "cwd": str(tmp_path), "mcpServers": []}
    req = await server.call("session/load", load)
    answer, before = await server.response(req)
    assert doomed in not_found(answer)["message"]
    assert before == []
    # Deleting again, or an id never seen, succeeds silently.
    assert (await server.request("session/delete", {"sessionId": doomed}))["result"] == {}
    assert (await server.request("session/delete", {"sessionId": "sess_x"}))["result"] == {}
    await stop(server)

    # It stays deleted for the next process.
    later = await start(server_factory, script([]))
    assert [s["sessionId"] for s in await listed(later)] == [kept]
    not_found(await later.request("session/load", load))
    not_found(await later.request("session/resume", load))
    await stop(later)


# ----- session/fork (unstable) -------------------------------------------------------------


async def test_fork_copies_the_history_and_leaves_the_original_alone(
    server_factory: Start, script: Any, tmp_path: Path
) -> None:
    fork_round = {
        "text": "Fork answer.",
        "expect": {
            "roles": ["user", "assistant", "user"],
            "contains": ["Plan the release", "Tag, build, publish.", "Write the PR text"],
        },
    }
    original_round = {
        "text": "Original answer.",
        "expect": {
            "roles": ["user", "assistant", "user"],
            "contains": ["Plan the release", "Tag, build, publish.", "Ship it"],
        },
    }
    path = script([{"text": "Tag, build, publish."}, fork_round, original_round])
    server = await start(server_factory, path)
    session = await new(server, tmp_path)
    assert (await prompt(server, session, "Plan the release"))[0] == "end_turn"

    req = await server.call("session/fork", {"sessionId": session, "cwd": str(tmp_path)})
    answer, before = await server.response(req)
    forked = answer["result"]["sessionId"]
    assert forked != session
    assert before == [], "a fork does not replay"
    assert answer["result"]["modes"]["currentModeId"] == "ask"

    stop_reason, frames = await prompt(server, forked, "Write the PR text")
    assert (stop_reason, agent_text(frames)) == ("end_turn", "Fork answer.")
    # `roles` is exact: the original does not see the fork's turn.
    stop_reason, frames = await prompt(server, session, "Ship it")
    assert (stop_reason, agent_text(frames)) == ("end_turn", "Original answer.")

    titles = {s["sessionId"]: s.get("title") for s in await listed(server)}
    assert titles == {session: "Plan the release", forked: "Plan the release (fork)"}
    await stop(server)

    later = await start(server_factory, script([]))
    for sid, expected in (
        (session, ["Plan the release", "Ship it"]),
        (forked, ["Plan the release", "Write the PR text"]),
    ):
        req = await later.call(
            "session/load", {"sessionId": sid, "cwd": str(tmp_path), "mcpServers": []}
        )
        answer, replay = await later.response(req)
        assert "result" in answer
        assert user_texts(replay) == expected
    unknown = await later.request("session/fork", {"sessionId": "sess_gone", "cwd": "/"})
    not_found(unknown)
    await stop(later)


# ----- session/load of unknown ids, modes across restarts ----------------------------------


async def test_load_of_an_unknown_session_is_not_found_with_a_clear_message(
    server_factory: Start, script: Any, tmp_path: Path
) -> None:
    server = await start(server_factory, script([]))
    req = await server.call(
        "session/load", {"sessionId": "sess_nope", "cwd": str(tmp_path), "mcpServers": []}
    )
    answer, before = await server.response(req)
    error = not_found(answer)
    assert before == []
    assert "sess_nope" in error["message"] and "Unknown session" in error["message"]
    assert error.get("data", {}).get("sessionId") == "sess_nope"
    await stop(server)


async def test_the_chosen_mode_survives_a_restart(
    server_factory: Start, script: Any, tmp_path: Path
) -> None:
    first = await start(server_factory, script([]))
    session = await new(first, tmp_path)
    req = await first.call("session/set_mode", {"sessionId": session, "modeId": "plan"})
    answer, before = await first.response(req)
    assert answer["result"] == {}
    assert {"sessionUpdate": "current_mode_update", "currentModeId": "plan"} in updates_of(before)
    await stop(first)

    second = await start(server_factory, script([]))
    load = {"sessionId": session, "cwd": str(tmp_path), "mcpServers": []}
    answer = await second.request("session/load", load)
    assert answer["result"]["modes"]["currentModeId"] == "plan"
    assert answer["result"]["configOptions"][0]["currentValue"] == "plan"
    # Changed through the config option this time; resume reports it after the next restart.
    answer = await second.request(
        "session/set_config_option",
        {"sessionId": session, "configId": "mode", "value": "accept_edits"},
    )
    assert answer["result"]["configOptions"][0]["currentValue"] == "accept_edits"
    await stop(second)

    third = await start(server_factory, script([]))
    answer = await third.request("session/resume", {"sessionId": session, "cwd": str(tmp_path)})
    assert answer["result"]["modes"]["currentModeId"] == "accept_edits"
    await stop(third)


@pytest.mark.timeout(120)
def test_a_client_that_is_gone_ends_the_turn_in_progress(
    script: Callable[[list[dict[str, Any]]], Path], tmp_path: Path
) -> None:
    """An editor killed mid-turn closes both pipes: the server stops the turn (and the command it
    runs) and exits, where it ran the turn to its end unseen. A client that only closes its
    input (a piped script) still gets its answers: tests/unit/test_wire_jsonrpc.py."""
    import json
    import os
    import subprocess

    from tests.support.raw import console_script

    rounds: list[dict[str, Any]] = [
        {"tool_calls": [{"name": "run_command", "arguments": {"command": "sleep 60"}}]},
        {"text": "Done."},
    ]
    project = tmp_path / "project"
    project.mkdir()
    env = {
        **os.environ,
        "ACP_SERVER_DATA_DIR": str(tmp_path / "data"),
        "HOME": str(tmp_path),
        "ACP_SERVER_SANDBOX": "workspace-write",  # the command runs without asking
    }
    proc = subprocess.Popen(
        [console_script(), "--script", str(script(rounds))],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    assert proc.stdin is not None and proc.stdout is not None

    def send(req_id: int, method: str, params: dict[str, Any]) -> None:
        frame = {"jsonrpc": "2.0", "id": req_id, "method": method, "params": params}
        proc.stdin.write(json.dumps(frame).encode() + b"\n")  # type: ignore[union-attr]
        proc.stdin.flush()  # type: ignore[union-attr]

    def until(marker: bytes) -> bytes:
        while marker not in (line := proc.stdout.readline()):  # type: ignore[union-attr]
            assert line, "the server closed its output"
        return line

    send(1, "initialize", {"protocolVersion": 1})
    until(b'"id":1')
    send(2, "session/new", {"cwd": str(project), "mcpServers": []})
    session = json.loads(until(b'"id":2'))["result"]["sessionId"]
    send(3, "session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": "go"}]})
    until(b'"status":"in_progress"')  # the command runs
    start = time.monotonic()
    proc.stdout.close()
    proc.stdin.close()
    assert proc.wait(timeout=50) == 0  # the command alone would have taken 60 s
    assert time.monotonic() - start < 50
