"""What a `session/prompt` may carry: content blocks the ACP schema allows and our
`promptCapabilities` admit are stored and replayed; anything else is -32602 naming the block,
and nothing of it is stored. An empty prompt ends at once, without the model."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from acp_server.store.database import Store
from tests.support.raw import Frame, RawServer, stop_reason

Start = Callable[..., Any]


def updates_of(frames: list[Frame]) -> list[dict[str, Any]]:
    return [f["params"]["update"] for f in frames if f.get("method") == "session/update"]


async def send(server: RawServer, session: str, blocks: list[Any]) -> tuple[Frame, list[Frame]]:
    req = await server.call("session/prompt", {"sessionId": session, "prompt": blocks})
    return await server.response(req, timeout=30)


async def replayed(server: RawServer, session: str, cwd: Path) -> list[dict[str, Any]]:
    """What session/load replays, on a fresh server over the same store."""
    req = await server.call(
        "session/load", {"sessionId": session, "cwd": str(cwd), "mcpServers": []}
    )
    answer, before = await server.response(req)
    assert "result" in answer, answer
    return updates_of(before)


async def test_an_empty_prompt_ends_at_once_without_the_model(
    server_factory: Start, script: Any, tmp_path: Path, private_data_dir: Path
) -> None:
    """CodeCompanion sends `"prompt": []` when a chat is submitted while it connects."""
    rounds = [{"text": "Hello.", "expect": {"roles": ["user"], "contains": ["real question"]}}]
    server: RawServer = await server_factory("--script", str(script(rounds)))
    session = await server.handshake(str(tmp_path))
    answer, before = await send(server, session, [])
    assert stop_reason(answer["result"]) == "end_turn"
    assert updates_of(before) == []  # no reply, no "Untitled" title
    await server.request("session/list", {})  # waits for the store's writes
    store = Store(private_data_dir / "sessions.sqlite3")
    try:
        assert list(store.events(session)) == []  # no turn stored
    finally:
        store.close()

    answer, before = await send(server, session, [{"type": "text", "text": "a real question"}])
    assert stop_reason(answer["result"]) == "end_turn"
    shown = updates_of(before)
    titles = [u["title"] for u in shown if u["sessionUpdate"] == "session_info_update"]
    assert titles == ["a real question"]
    agent = [u["content"]["text"] for u in shown if u["sessionUpdate"] == "agent_message_chunk"]
    assert "".join(agent) == "Hello."  # the script's first round: the empty prompt used none


# Images are accepted (promptCapabilities.image): tests/e2e/test_model_switching.py sends them.
BAD_BLOCKS = [
    ({"type": "video", "data": "AA=="}, "`prompt[1].type` must be one of"),
    ({"type": "text", "text": "hi", "annotations": "oops"}, "`prompt[1].annotations`"),
    ({"type": "resource", "resource": {"uri": "file:///a"}}, "`prompt[1].resource` must be"),
    ({"type": "resource_link", "uri": "file:///a"}, "`prompt[1].name` is required"),
    ({"type": "text", "text": "x", "_meta": 3}, "`prompt[1]._meta`"),
    ("text", "`prompt[1]` must be an object"),
    ({"type": "audio", "data": "AA==", "mimeType": "audio/wav"}, "`prompt[1]` is audio"),
]


@pytest.mark.parametrize(
    ("block", "named"),
    BAD_BLOCKS,
    ids=["video", "annotations", "resource", "link", "meta", "string", "audio"],
)
async def test_a_block_the_schema_or_our_capabilities_refuse_is_invalid_params(
    server_factory: Start, script: Any, tmp_path: Path, block: Any, named: str
) -> None:
    server: RawServer = await server_factory("--script", str(script([{"text": "Fine."}])))
    session = await server.handshake(str(tmp_path))
    answer, before = await send(server, session, [{"type": "text", "text": "look"}, block])
    assert answer["error"]["code"] == -32602, answer
    assert named in answer["error"]["message"], answer["error"]["message"]
    assert updates_of(before) == []
    answer, _ = await send(server, session, [{"type": "text", "text": "then this"}])
    assert stop_reason(answer["result"]) == "end_turn"
    await server.close_stdin()
    assert await server.wait() == 0

    again: RawServer = await server_factory("--script", str(script([])))
    await again.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    users = [u for u in await replayed(again, session, tmp_path) if "content" in u]
    assert [u["content"] for u in users if u["sessionUpdate"] == "user_message_chunk"] == [
        {"type": "text", "text": "then this"}
    ]


async def test_every_block_the_schema_allows_is_accepted(
    server_factory: Start, script: Any, tmp_path: Path
) -> None:
    blocks: list[dict[str, Any]] = [
        {"type": "text", "text": "see", "annotations": {"audience": ["user"], "priority": 0.5}},
        {"type": "text", "text": "null fields", "annotations": None, "_meta": None},
        {
            "type": "resource_link",
            "uri": "file:///a.py",
            "name": "a.py",
            "mimeType": "text/x-python",
            "title": None,
            "size": 12,
        },
        {"type": "resource", "resource": {"uri": "file:///b.txt", "text": "bee"}},
        {"type": "resource", "resource": {"uri": "file:///c.bin", "blob": "AA==", "_meta": None}},
        {"type": "text", "text": "newer field", "somethingNew": {"x": 1}},
    ]
    rounds = [{"text": "Got them.", "expect": {"contains": ["see", "a.py", "bee", "c.bin"]}}]
    server: RawServer = await server_factory("--script", str(script(rounds)))
    session = await server.handshake(str(tmp_path))
    answer, before = await send(server, session, blocks)
    assert stop_reason(answer["result"]) == "end_turn", answer
    agent = [u for u in updates_of(before) if u["sessionUpdate"] == "agent_message_chunk"]
    assert "".join(u["content"]["text"] for u in agent) == "Got them."
