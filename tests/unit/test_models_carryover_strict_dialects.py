"""The strict dialect checks reject what the real APIs reject; a check that accepts everything
would make every carry-over test pass for nothing."""

from __future__ import annotations

from typing import Any

from acp_server.backends import _anthropic_wire, _ollama_wire, _openai_wire
from acp_server.messages import Message, ModelRequest, TextPart, ToolCall, ToolSpec, text_message
from tests.support.strict_dialects import anthropic_problems, ollama_problems, openai_problems

TOOLS = (ToolSpec("read_file", "reads", {"type": "object"}),)
CALL = ToolCall("call_1", "read_file", {"path": "a"})
GOOD = (
    text_message("user", "go"),
    Message("assistant", (TextPart("reading"),), (CALL,)),
    text_message("tool", "text", tool_call_id="call_1"),
    text_message("assistant", "done"),
    text_message("user", "next"),
)


def openai_body(*messages: Message) -> dict[str, Any]:
    request = ModelRequest(messages, TOOLS, system="sys")
    return _openai_wire.payload("m", request, stream=True, stream_options=True)


def anthropic_body(*messages: Message, budget: int | None = None) -> dict[str, Any]:
    request = ModelRequest(messages, TOOLS, system="sys")
    return _anthropic_wire.payload("claude-a", request, max_tokens=4096, thinking_budget=budget)


def ollama_body(*messages: Message) -> dict[str, Any]:
    return _ollama_wire.payload("qwen3", ModelRequest(messages, TOOLS), num_ctx=4096, think=True)


def test_well_formed_histories_pass_all_three() -> None:
    assert openai_problems(openai_body(*GOOD)) == []
    assert anthropic_problems(anthropic_body(*GOOD)) == []
    assert ollama_problems(ollama_body(*GOOD)) == []


def test_openai_rejects_an_unanswered_call_and_a_result_without_its_call() -> None:
    unanswered = openai_body(GOOD[0], GOOD[1], GOOD[4])
    assert any("must be followed by tool messages" in p for p in openai_problems(unanswered))
    orphan = openai_body(GOOD[0], GOOD[2], GOOD[3])
    assert any("must be a response to a preceding" in p for p in openai_problems(orphan))


def test_openai_rejects_names_and_ids_out_of_shape() -> None:
    bad = ToolCall("c" * 41, "mcp.fs/read", {})
    body = openai_body(
        GOOD[0],
        Message("assistant", (), (bad,)),
        text_message("tool", "x", tool_call_id=bad.id),
    )
    problems = openai_problems(body)
    assert any(".id:" in p for p in problems) and any(".name:" in p for p in problems)


def test_anthropic_rejects_foreign_signatures_and_bad_ids() -> None:
    call = ToolCall("functions.read:0", "read_file", {})
    blocks = [
        {"type": "thinking", "thinking": "x", "signature": "sig-b"},
        {"type": "tool_use", "id": call.id, "name": call.name},
    ]
    reply = Message(
        "assistant", (), (call,), extra={"anthropic": {"model": "claude-a", "content": blocks}}
    )
    body = anthropic_body(
        GOOD[0], reply, text_message("tool", "x", tool_call_id=call.id), budget=2048
    )
    problems = anthropic_problems(body, {"sig-b": "claude-b"})
    assert any("Invalid `signature`" in p for p in problems)
    assert any("pattern" in p for p in problems)
    assert anthropic_problems(body, {"sig-b": "claude-a"}) == [
        p for p in problems if "signature" not in p
    ]


def test_anthropic_rejects_a_thinking_request_whose_tool_turn_lost_its_thinking() -> None:
    body = anthropic_body(*GOOD[:3])
    body["thinking"] = {"type": "enabled", "budget_tokens": 2048}
    body["max_tokens"] = 8192
    assert any("Expected `thinking`" in p for p in anthropic_problems(body))


def test_anthropic_rejects_roles_out_of_turn_and_results_without_their_use() -> None:
    body = {
        "model": "claude-a",
        "max_tokens": 10,
        "tools": [{"name": "read_file", "input_schema": {}}],
        "messages": [
            {"role": "assistant", "content": [{"type": "text", "text": "hi"}]},
            {"role": "assistant", "content": [{"type": "text", "text": "again"}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "x"}]},
        ],
    }
    problems = anthropic_problems(body)
    assert any("first message" in p for p in problems)
    assert any("alternate" in p for p in problems)
    assert any("unexpected tool_use_id" in p for p in problems)


def test_ollama_rejects_text_arguments_and_results_for_calls_never_made() -> None:
    body = ollama_body(*GOOD)
    body["messages"][1]["tool_calls"][0]["function"]["arguments"] = '{"path": "a"}'
    body["messages"].append({"role": "tool", "content": "x", "tool_name": "edit_file"})
    problems = ollama_problems(body)
    assert any("must be an object" in p for p in problems)
    assert any("no pending call made" in p for p in problems)
