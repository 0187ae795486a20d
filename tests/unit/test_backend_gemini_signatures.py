"""Gemini 3 through its OpenAI-compatible API: the thought signature on a tool call is kept on
the neutral call and sent back with it; the strict mock refuses a round without it."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from acp_server.backends._http import RetryPolicy
from acp_server.backends.openai.backend import OpenAIBackend
from acp_server.backends.openai.wire import completion_events
from acp_server.messages import (
    Event,
    Message,
    ModelRequest,
    StreamError,
    TextDelta,
    ToolCall,
    ToolCallAssembler,
    ToolCallDelta,
    ToolSpec,
    text_message,
)
from acp_server.store.transcript import message_from_json, message_to_json
from tests.support.mock_llm import MockLLM, running_mock_llm

FAST = RetryPolicy(attempts=2, base_delay=0.001, max_delay=0.002, retry_after_cap=0.01)
READ = ToolSpec("read_file", "Read a file", {"type": "object", "properties": {}})
MODEL = "gemini-3-pro-preview"
ASK = (text_message("user", "read a.py"),)


@pytest.fixture
async def llm() -> AsyncIterator[MockLLM]:
    async with running_mock_llm(strict_dialect=True) as server:
        yield server


def calls_of(events: list[Event]) -> tuple[ToolCall, ...]:
    assembler = ToolCallAssembler()
    for event in events:
        if isinstance(event, ToolCallDelta):
            assembler.add(event)
    return tuple(assembler.calls("unused_"))


async def rounds(llm: MockLLM, *histories: tuple[Message, ...]) -> list[list[Event]]:
    backend = OpenAIBackend(f"{llm.url}/v1", MODEL, "key", retry=FAST)
    try:
        return [[e async for e in backend.stream(ModelRequest(h, (READ,)))] for h in histories]
    finally:
        await backend.aclose()


def reading(*paths: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": "read_file", "arguments": {"path": p}} for p in paths]}


async def test_the_signature_is_kept_on_the_call_and_sent_back(llm: MockLLM) -> None:
    llm.queue(reading("a.py", "b.py"), {"text": "done"})
    (first,) = await rounds(llm, ASK)
    calls = calls_of(first)
    (signature,) = llm.signatures
    assert calls[0].extra == {
        "openai": {"model": MODEL, "extra_content": {"google": {"thought_signature": signature}}}
    }
    assert calls[1].extra == {}  # Gemini signs the first call of a reply only
    reply = Message("assistant", (), calls)
    results = tuple(text_message("tool", "x", tool_call_id=c.id) for c in calls)
    (second,) = await rounds(llm, (*ASK, reply, *results))
    assert "".join(e.text for e in second if isinstance(e, TextDelta)) == "done"
    sent = llm.chat_requests[-1].json["messages"][1]["tool_calls"]
    assert sent[0]["extra_content"] == {"google": {"thought_signature": signature}}
    assert "extra_content" not in sent[1]
    assert llm.invalid == []


async def test_the_strict_mock_refuses_a_round_without_the_signature(llm: MockLLM) -> None:
    llm.queue(reading("a.py"), {"text": "done"})
    (first,) = await rounds(llm, ASK)
    bare = tuple(ToolCall(c.id, c.name, c.arguments) for c in calls_of(first))
    result = text_message("tool", "x", tool_call_id=bare[0].id)
    (second,) = await rounds(llm, (*ASK, Message("assistant", (), bare), result))
    (error,) = [e for e in second if isinstance(e, StreamError)]
    assert "missing a thought_signature" in error.message
    assert len(llm.invalid) == 1


async def test_earlier_turns_are_not_checked(llm: MockLLM) -> None:
    """A history carried over from another model has unsigned calls in earlier turns."""
    old = ToolCall("call_old", "read_file", {"path": "z"})
    history = (
        *ASK,
        Message("assistant", (), (old,)),
        text_message("tool", "z", tool_call_id="call_old"),
        text_message("assistant", "read z"),
        text_message("user", "now a.py"),
    )
    await rounds(llm, history)
    assert llm.invalid == []


def test_an_unstreamed_reply_keeps_the_signature_too() -> None:
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "read_file", "arguments": "{}"},
        "extra_content": {"google": {"thought_signature": "c2ln"}},
    }
    body = {"choices": [{"message": {"role": "assistant", "tool_calls": [call]}}]}
    (made,) = calls_of(completion_events(body, MODEL))
    assert made.extra["openai"]["extra_content"] == call["extra_content"]


def test_the_store_keeps_a_calls_private_data() -> None:
    extra = {"openai": {"model": MODEL, "extra_content": {"google": {"thought_signature": "s"}}}}
    message = Message("assistant", (), (ToolCall("c1", "read_file", {}, None, extra),))
    body = json.loads(json.dumps(message_to_json(message)))
    assert message_from_json(body, lambda key: None).tool_calls[0].extra == extra
    plain = Message("assistant", (), (ToolCall("c1", "read_file", {}),))
    assert "extra" not in message_to_json(plain)["tool_calls"][0]
