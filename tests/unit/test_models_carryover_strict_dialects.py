"""The strict dialect checks reject what the real APIs reject; a check that accepts everything
would make every carry-over test pass for nothing."""

from __future__ import annotations

from typing import Any

from acp_server.backends.anthropic import wire as _anthropic_wire
from acp_server.backends.ollama import wire as _ollama_wire
from acp_server.backends.openai import wire as _openai_wire
from acp_server.backends.responses import wire as _responses_wire
from acp_server.messages import Message, ModelRequest, TextPart, ToolCall, ToolSpec, text_message
from tests.support.strict_dialects import anthropic_problems, ollama_problems, openai_problems
from tests.support.strict_gemini import gemini_problems
from tests.support.strict_responses import responses_problems

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


# ----- OpenAI Responses and Gemini 3 --------------------------------------------------------------

ISSUED = {
    "rs_1": {"model": "gpt-5", "encrypted_content": "enc-1"},
    "rs_2": {"model": "gpt-5", "encrypted_content": "enc-2"},
}
REASONED = {"call_1": ["rs_1", "rs_2"]}


def reasoned_reply() -> Message:
    items = [
        {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "enc-1"},
        {"type": "reasoning", "id": "rs_2", "summary": [], "encrypted_content": "enc-2"},
        {"type": "message"},
        {"type": "function_call", "call_id": "call_1"},
    ]
    extra = {"openai-responses": {"model": "gpt-5", "items": items}}
    return Message("assistant", (TextPart("reading"),), (CALL,), extra=extra)


def responses_body(*messages: Message, model: str = "gpt-5") -> dict[str, Any]:
    request = ModelRequest(messages, TOOLS, system="sys", max_tokens=1000)
    return _responses_wire.payload(model, request, reasoning=True)


def test_well_formed_histories_pass_the_responses_api_with_and_without_reasoning() -> None:
    assert responses_problems(responses_body(*GOOD)) == []
    kept = responses_body(GOOD[0], reasoned_reply(), *GOOD[2:])
    assert responses_problems(kept, ISSUED, REASONED) == []


def test_responses_rejects_a_round_that_lost_fused_or_reordered_its_reasoning() -> None:
    lost = responses_body(*GOOD[:4])  # the turn in progress: its calls need their reasoning
    assert any("without its reasoning" in p for p in responses_problems(lost, ISSUED, REASONED))
    assert responses_problems(responses_body(*GOOD), ISSUED, REASONED) == []  # an older turn
    body = responses_body(GOOD[0], reasoned_reply(), *GOOD[2:4])
    swapped = dict(
        body, input=[body["input"][0], body["input"][2], body["input"][1], *body["input"][3:]]
    )
    assert any("in order" in p for p in responses_problems(swapped, ISSUED, REASONED))
    fused = dict(body, input=[body["input"][0], *body["input"][2:]])
    assert any("in order" in p for p in responses_problems(fused, ISSUED, REASONED))


def test_responses_rejects_foreign_or_stripped_reasoning_and_chat_shapes() -> None:
    body = responses_body(GOOD[0], reasoned_reply(), *GOOD[2:])
    body["model"] = "gpt-5-mini"  # the wire never renders them so; the API would refuse them
    assert any("another model" in p for p in responses_problems(body, ISSUED))
    body = responses_body(GOOD[0], reasoned_reply(), *GOOD[2:])
    del body["input"][1]["encrypted_content"]
    assert any("not persisted" in p for p in responses_problems(body, ISSUED))
    chat = openai_body(*GOOD)
    problems = responses_problems({**chat, "max_tokens": 10, "temperature": 0.2, "model": "o3"})
    assert "Unsupported parameter: 'messages'." in problems
    assert "Unsupported parameter: 'max_tokens'." in problems
    assert any("'temperature' is not supported" in p for p in problems)


def test_responses_rejects_unanswered_calls_orphans_and_wrong_part_types() -> None:
    body = responses_body(GOOD[0], GOOD[1], GOOD[3])
    assert any("No tool output found" in p for p in responses_problems(body))
    body = responses_body(GOOD[0], GOOD[2], GOOD[3])
    assert any("No tool call found" in p for p in responses_problems(body))
    body = responses_body(*GOOD)
    body["input"][1]["content"][0]["type"] = "input_text"  # the assistant's text, as chat sends it
    assert any("Supported values are" in p for p in responses_problems(body))
    body["tools"] = [{"type": "function", "function": {"name": "read_file"}}]
    assert any("tools[0].name" in p for p in responses_problems(body))


def test_gemini_rejects_a_tool_round_of_the_current_turn_without_its_signature() -> None:
    kept = {"model": "gemini-3-pro", "extra_content": {"google": {"thought_signature": "gs"}}}
    signed = ToolCall("call_1", "read_file", {"path": "a"}, extra={"openai": kept})
    current = (GOOD[0], Message("assistant", (), (signed,)), GOOD[2])
    body = dict(openai_body(*current), model="gemini-3-pro")
    assert gemini_problems(body, {"gs": "gemini-3-pro"}) == []
    assert any("Corrupted" in p for p in gemini_problems(body, {"gs": "gemini-3-flash"}))
    unsigned = dict(openai_body(GOOD[0], GOOD[1], GOOD[2]), model="gemini-3-pro")
    assert any("missing a thought_signature" in p for p in gemini_problems(unsigned, {}))
    assert gemini_problems(dict(openai_body(*GOOD), model="gemini-3-pro"), {}) == []  # older turn
    assert gemini_problems(openai_body(GOOD[0], GOOD[1], GOOD[2]), {}) == []  # not Gemini 3
