"""The conformance validator must be able to fail: wrong frames are caught."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.acp_schema import WireValidator, schema_path


@pytest.fixture(scope="module")
def validator() -> WireValidator:
    path = schema_path()
    if path is None:
        pytest.skip("the official ACP schema is not available")
    return WireValidator(path)


def traffic(*frames: tuple[str, object]) -> list[tuple[str, str]]:
    return [(side, json.dumps(frame)) for side, frame in frames]


INIT = (
    "client",
    {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}},
)


def test_good_frames_pass(validator: WireValidator) -> None:
    good = traffic(
        INIT,
        ("agent", {"jsonrpc": "2.0", "id": 1, "result": {"protocolVersion": 1}}),
        (
            "agent",
            {
                "jsonrpc": "2.0",
                "method": "session/update",
                "params": {
                    "sessionId": "s",
                    "update": {
                        "sessionUpdate": "agent_message_chunk",
                        "content": {"type": "text", "text": "hi"},
                    },
                },
            },
        ),
    )
    assert validator.check_traffic(good) == []


@pytest.mark.parametrize(
    "frame",
    [
        # `currentModeId` is the schema's field; the docs' `modeId` is a known trap.
        {
            "jsonrpc": "2.0",
            "method": "session/update",
            "params": {
                "sessionId": "s",
                "update": {"sessionUpdate": "current_mode_update", "modeId": "ask"},
            },
        },
        # A bare text block where ToolCallContent needs a {type: content} wrapper.
        {
            "jsonrpc": "2.0",
            "method": "session/update",
            "params": {
                "sessionId": "s",
                "update": {
                    "sessionUpdate": "tool_call",
                    "toolCallId": "t",
                    "title": "x",
                    "content": [{"type": "text", "text": "x"}],
                },
            },
        },
        {"jsonrpc": "2.0", "id": 1, "result": {"protocolVersion": "1"}},
        {"jsonrpc": "2.0", "id": 1, "result": {"protocolVersion": 70000}},
        {"jsonrpc": "2.0", "id": 99, "result": {}},
        {"jsonrpc": "2.0", "method": "session/made_up", "params": {}},
        {"id": 1, "result": {"protocolVersion": 1}},
    ],
)
def test_wrong_frames_fail(validator: WireValidator, frame: object) -> None:
    assert validator.check_traffic(traffic(INIT, ("agent", frame))) != []


def test_non_json_output_fails(validator: WireValidator) -> None:
    assert validator.check_traffic([("agent", "Loading model...")]) != []


FORK = (
    "client",
    {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "session/fork",
        "params": {"sessionId": "s", "cwd": "/tmp"},
    },
)


def test_fork_answers_use_the_unstable_schema(validator: WireValidator) -> None:
    if not validator.unstable_answers:
        pytest.skip("the unstable ACP schema is not available")
    assert "session/fork" not in validator.agent_answers  # only the unstable schema has it
    good = {
        "jsonrpc": "2.0",
        "id": 2,
        "result": {
            "sessionId": "s2",
            "modes": {
                "currentModeId": "ask",
                "availableModes": [{"id": "ask", "name": "Ask"}],
            },
        },
    }
    assert validator.check_traffic(traffic(INIT, FORK, ("agent", good))) == []


@pytest.mark.parametrize(
    "result",
    [
        {},  # `sessionId` is required
        {"sessionId": 7},
        {"sessionId": "s2", "modes": {"currentModeId": "ask"}},  # no availableModes
        {"sessionId": "s2", "configOptions": [{"id": "mode"}]},
        None,
    ],
)
def test_wrong_fork_answers_fail(validator: WireValidator, result: object) -> None:
    if not validator.unstable_answers:
        pytest.skip("the unstable ACP schema is not available")
    wrong = {"jsonrpc": "2.0", "id": 2, "result": result}
    problems = validator.check_traffic(traffic(INIT, FORK, ("agent", wrong)))
    assert problems and all("ForkSessionResponse (unstable schema)" in p for p in problems)


def test_fork_answers_fail_without_the_unstable_schema(tmp_path: Path) -> None:
    path = schema_path()
    if path is None:
        pytest.skip("the official ACP schema is not available")
    alone = tmp_path / "v1" / "schema.json"
    alone.parent.mkdir()
    alone.write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
    strict = WireValidator(alone)
    answer = {"jsonrpc": "2.0", "id": 2, "result": {"sessionId": "s2"}}
    assert strict.check_traffic(traffic(INIT, FORK, ("agent", answer))) != []


def test_stable_answers_stay_strict(validator: WireValidator) -> None:
    new = (
        "client",
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "session/new",
            "params": {"cwd": "/tmp", "mcpServers": []},
        },
    )
    wrong = {"jsonrpc": "2.0", "id": 3, "result": {"modes": None}}  # no sessionId
    problems = validator.check_traffic(traffic(INIT, new, ("agent", wrong)))
    assert problems and all("unstable" not in p for p in problems)
