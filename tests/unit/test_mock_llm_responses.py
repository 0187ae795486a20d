"""The mock's Responses API: its stream is shaped like OpenAI's, a reasoning model's items carry
encrypted content only when asked, and a Responses body reads as the same conversation (and
token count) as the chat body of the same history."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from acp_server.backends.openai import wire as _openai_wire
from acp_server.backends.responses import wire as _responses_wire
from acp_server.messages import Message, ModelRequest, TextPart, ToolCall, ToolSpec, text_message
from tests.support.mock_llm import MockLLM, running_mock_llm
from tests.support.mock_llm.view import conversation, count_tokens, tool_names

TOOLS = (ToolSpec("read_file", "reads", {"type": "object"}),)
CALL = ToolCall("call_1", "read_file", {"path": "a"})
HISTORY = (
    text_message("user", "go"),
    Message("assistant", (TextPart("reading"),), (CALL,)),
    text_message("tool", "the text", tool_call_id="call_1"),
)


@pytest.fixture
async def llm() -> AsyncIterator[MockLLM]:
    async with running_mock_llm(strict_dialect=True) as server:
        yield server


async def events(llm: MockLLM, body: dict[str, Any]) -> list[dict[str, Any]]:
    async with httpx.AsyncClient() as client:
        answer = await client.post(f"{llm.url}/v1/responses", json=body)
    assert answer.status_code == 200, answer.text
    frames = [line[6:] for line in answer.text.splitlines() if line.startswith("data: ")]
    return [json.loads(frame) for frame in frames]


def body(model: str, **fields: Any) -> dict[str, Any]:
    text = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}
    return {"model": model, "input": [text], "store": False, "stream": True, **fields}


async def test_a_reasoning_models_stream(llm: MockLLM) -> None:
    llm.queue({"thought": "Hm.", "text": "Reading.", "tool_calls": [{"name": "read_file"}]})
    seen = await events(llm, body("gpt-5", include=["reasoning.encrypted_content"]))
    kinds = [e["type"] for e in seen]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] == "response.completed"
    assert [e["sequence_number"] for e in seen] == list(range(len(seen)))
    done = [e["item"] for e in seen if e["type"] == "response.output_item.done"]
    assert [item["type"] for item in done] == ["reasoning", "reasoning", "message", "function_call"]
    assert done[0]["summary"] == [{"type": "summary_text", "text": "Hm."}]
    assert done[0]["encrypted_content"] == llm.reasoning[done[0]["id"]]["encrypted_content"]
    assert llm.reasoning_calls[done[3]["call_id"]] == [done[0]["id"], done[1]["id"]]
    usage = seen[-1]["response"]["usage"]
    assert set(usage) >= {"input_tokens", "output_tokens", "input_tokens_details"}


async def test_no_encrypted_content_unless_asked_and_no_reasoning_for_other_models(
    llm: MockLLM,
) -> None:
    llm.queue({"text": "a"}, {"text": "b", "finish": "length"})
    first = await events(llm, body("o3"))
    (item,) = [e["item"] for e in first if e["type"] == "response.output_item.done"][:1]
    assert item["type"] == "reasoning" and "encrypted_content" not in item
    second = await events(llm, body("gpt-4.1"))
    assert not any(e.get("item", {}).get("type") == "reasoning" for e in second)
    assert second[-1]["type"] == "response.incomplete"
    assert second[-1]["response"]["incomplete_details"] == {"reason": "max_output_tokens"}


def test_a_responses_body_reads_as_the_chat_body_of_the_same_history() -> None:
    request = ModelRequest(HISTORY, TOOLS, system="sys")
    chat = _openai_wire.payload("m", request, stream=True, stream_options=False)
    responses = _responses_wire.payload("m", request, reasoning=False)
    assert conversation(responses) == conversation(chat)
    assert tool_names(responses) == tool_names(chat) == ["read_file"]
    assert abs(count_tokens(responses) - count_tokens(chat)) < count_tokens(chat) * 0.2
