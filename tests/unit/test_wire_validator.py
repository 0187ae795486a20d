"""The conformance validator must be able to fail: wrong frames are caught."""

from __future__ import annotations

import json

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
