"""The conformance validator must be able to fail: wrong frames are caught."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import pytest

from tests.support.acp_schema import (
    PINNED,
    SchemaMissing,
    WireValidator,
    _required,
    official_validator,
    pinned_schema_path,
    schema_path,
)


@pytest.fixture(scope="module")
def validator() -> WireValidator:
    return official_validator()


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
    wrong = {"jsonrpc": "2.0", "id": 2, "result": result}
    problems = validator.check_traffic(traffic(INIT, FORK, ("agent", wrong)))
    assert problems and all("ForkSessionResponse (unstable schema)" in p for p in problems)


def test_fork_answers_fail_without_the_unstable_schema(tmp_path: Path) -> None:
    path = pinned_schema_path()
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


def update(change: Mapping[str, object]) -> tuple[str, object]:
    frame = {"sessionId": "s", "update": change}
    return ("agent", {"jsonrpc": "2.0", "method": "session/update", "params": frame})


PLAN_UPDATE = {
    "sessionUpdate": "plan_update",
    "plan": {"type": "items", "planId": "p1", "entries": []},
}


def test_the_november_additions_are_valid(validator: WireValidator) -> None:
    """plan_update is stable since 2026-11-20: the current schema has it, the pinned one not."""
    assert validator.check_traffic(traffic(update(PLAN_UPDATE))) == []
    assert WireValidator(pinned_schema_path()).check_traffic(traffic(update(PLAN_UPDATE))) != []
    wrong = {**PLAN_UPDATE, "plan": {"type": "items", "entries": []}}  # no planId
    assert validator.check_traffic(traffic(update(wrong))) != []


def test_frames_without_additions_are_checked_against_the_pinned_schema_too(
    validator: WireValidator, tmp_path: Path
) -> None:
    # A pinned schema that knows no agent_message_chunk: the frame is still checked against it.
    schema = json.loads(pinned_schema_path().read_text(encoding="utf-8"))
    variants = schema["$defs"]["SessionUpdate"]["oneOf"]
    schema["$defs"]["SessionUpdate"]["oneOf"] = [
        v
        for v in variants
        if v["properties"]["sessionUpdate"].get("const") != "agent_message_chunk"
    ]
    narrowed = tmp_path / "v1" / "schema.json"
    narrowed.parent.mkdir()
    narrowed.write_text(json.dumps(schema), encoding="utf-8")
    strict = WireValidator(schema_path(), pinned=WireValidator(narrowed), markers=validator.markers)
    chunk = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "hi"}}
    problems = strict.check_traffic(traffic(update(chunk)))
    assert problems and all("pinned v1 schema" in p for p in problems)
    assert strict.check_traffic(traffic(update(PLAN_UPDATE))) == []  # uses an addition: not pinned


def test_a_missing_schema_fails_saying_where_it_looked(tmp_path: Path) -> None:
    with pytest.raises(SchemaMissing, match=r"expected .*schema\.json"):
        _required(tmp_path / "shared" / "acp-schema" / "v1" / "schema.json")
    assert _required(PINNED) == PINNED
