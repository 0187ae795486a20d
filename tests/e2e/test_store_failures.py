"""A write the store cannot commit: the turn is answered as not saved, in words and in `_meta`,
and every later write still lands, in that session and in the others.

The failure is real: a trigger in the server's own database refuses events that carry a
marker, as a full disk or a body that cannot be encoded would."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support.raw import Frame, RawServer, stop_reason
from tests.support.store_faults import MARKER, refuse_marked_events

Start = Callable[..., Any]


async def prompt(server: RawServer, session: str, text: str) -> tuple[Frame, list[Frame]]:
    req = await server.call(
        "session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": text}]}
    )
    return await server.response(req, timeout=30)


def agent_text(frames: list[Frame]) -> str:
    return "".join(
        f["params"]["update"]["content"]["text"]
        for f in frames
        if f.get("method") == "session/update"
        and f["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
    )


def user_texts(frames: list[Frame]) -> list[str]:
    return [
        f["params"]["update"]["content"]["text"]
        for f in frames
        if f.get("method") == "session/update"
        and f["params"]["update"]["sessionUpdate"] == "user_message_chunk"
    ]


async def test_a_failed_write_is_reported_and_later_prompts_are_stored(
    server_factory: Start, script: Any, tmp_path: Path, private_data_dir: Path
) -> None:
    rounds = [{"text": "Noted."}, {"text": "Still here."}, {"text": "Hello B."}]
    server: RawServer = await server_factory("--script", str(script(rounds)))
    first = await server.handshake(str(tmp_path))
    created = await server.request("session/new", {"cwd": str(tmp_path), "mcpServers": []})
    other = str(created["result"]["sessionId"])
    await server.request("session/list", {})  # the store exists once this is answered
    refuse_marked_events(private_data_dir / "sessions.sqlite3")

    answer, before = await prompt(server, first, f"remember {MARKER}")
    result = answer["result"]
    assert result["stopReason"] == "end_turn"
    told = result["_meta"]["acpServer"]["notSaved"]
    assert "could not be saved" in told
    assert told in agent_text(before)  # the user is told in the chat, before the answer

    answer, _ = await prompt(server, first, "second prompt")
    assert stop_reason(answer["result"]) == "end_turn"
    answer, _ = await prompt(server, other, "third prompt")
    assert stop_reason(answer["result"]) == "end_turn"
    await server.close_stdin()
    assert await server.wait() == 0

    again: RawServer = await server_factory("--script", str(script([])))
    await again.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    for session, expected in ((first, "second prompt"), (other, "third prompt")):
        req = await again.call(
            "session/load", {"sessionId": session, "cwd": str(tmp_path), "mcpServers": []}
        )
        answer, replay = await again.response(req)
        assert "result" in answer, answer
        assert expected in user_texts(replay)


async def test_a_deletion_that_cannot_be_saved_is_an_error(
    server_factory: Start, script: Any, tmp_path: Path, private_data_dir: Path
) -> None:
    server: RawServer = await server_factory("--script", str(script([{"text": "Hi."}])))
    session = await server.handshake(str(tmp_path))
    await prompt(server, session, "hello")
    db = sqlite3.connect(private_data_dir / "sessions.sqlite3")
    db.execute(
        "CREATE TRIGGER keep_sessions BEFORE UPDATE OF deleted ON sessions"
        " BEGIN SELECT RAISE(ABORT, 'refused by the test'); END"
    )
    db.commit()
    db.close()
    answer = await server.request("session/delete", {"sessionId": session})
    assert answer["error"]["code"] == -32603
    assert "could not be saved" in answer["error"]["message"]
    listed = (await server.request("session/list", {}))["result"]["sessions"]
    assert [s["sessionId"] for s in listed] == [session]  # still there, as the error said
