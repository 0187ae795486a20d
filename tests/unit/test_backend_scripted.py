"""The scripted backend plays the same rounds from a list as from a script file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from acp_server.backends.scripted import EXHAUSTED, ScriptedBackend, ScriptError
from acp_server.messages import (
    Event,
    Finish,
    ModelRequest,
    TextDelta,
    ThoughtDelta,
    ToolCallDelta,
    text_message,
)

ROUNDS: list[dict[str, Any]] = [
    {
        "thought": "hm",
        "text": "Let me look.",
        "tool_calls": [{"id": "c1", "name": "read_file", "arguments": {"path": "a"}}],
    },
    {"text": "done"},
]
REQUEST = ModelRequest(messages=(text_message("user", "hi"),))


async def play(backend: ScriptedBackend) -> list[Event]:
    return [event async for event in backend.stream(REQUEST)]


async def test_rounds_from_a_list_play_like_the_same_rounds_from_a_file(tmp_path: Path) -> None:
    path = tmp_path / "script.json"
    path.write_text(json.dumps(ROUNDS), encoding="utf-8")
    from_file, from_list = ScriptedBackend(path), ScriptedBackend.from_rounds(ROUNDS)
    for _ in range(3):
        assert await play(from_list) == await play(from_file)


async def test_a_list_of_rounds_is_played_in_order() -> None:
    backend = ScriptedBackend.from_rounds(ROUNDS)
    first = await play(backend)
    assert first == [
        ThoughtDelta("hm"),
        TextDelta("Let "),
        TextDelta("me "),
        TextDelta("look."),
        ToolCallDelta(0, "c1", "read_file", '{"path": "a"}'),
        Finish("tool_calls"),
    ]
    assert await play(backend) == [TextDelta("done"), Finish("stop")]
    assert await play(backend) == [TextDelta(EXHAUSTED), Finish("stop")]
    assert len(backend.requests) == 3
    assert backend.label == "scripted:rounds"


def test_malformed_rounds_are_refused_at_once_saying_where() -> None:
    with pytest.raises(ScriptError, match=r"round \[1\].*finish"):
        ScriptedBackend.from_rounds([{"text": "ok"}, {"finish": "sometime"}])


async def test_the_servers_script_backend_keeps_no_request_it_answered(tmp_path: Path) -> None:
    """`acp-server --script` plays one backend for every session of the process: keeping each
    request (its whole history) made the server grow with every prompt it ever answered (seen
    by tests/e2e/test_load_churn.py). Only the in-process backend of tests records them."""
    path = tmp_path / "script.json"
    path.write_text(json.dumps(ROUNDS), encoding="utf-8")
    backend = ScriptedBackend(path)
    for _ in range(3):
        await play(backend)
    assert backend.requests == []
