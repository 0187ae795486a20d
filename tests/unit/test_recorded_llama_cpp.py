"""The OpenAI backend against responses recorded from a real llama-cpp-python server
(tests/fixtures/llama_cpp/, SmolLM2-135M): window discovery, a streamed tool call whose every
delta repeats id and name, an unstreamed tool call, and a context overflow error."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx

from acp_server.backends._http import RetryPolicy
from acp_server.backends.openai.backend import OpenAIBackend
from acp_server.messages import (
    Event,
    ModelRequest,
    StreamError,
    ToolCallAssembler,
    ToolCallDelta,
    ToolSpec,
    text_message,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "llama_cpp"
TOOLS = (ToolSpec("read_file", "Read a file", {"type": "object", "properties": {}}),)


def recorded(name: str) -> dict[str, Any]:
    body: dict[str, Any] = json.loads((FIXTURES / f"{name}.json").read_text("utf-8"))["response"]
    return body


def replay(chat: str, seen: list[httpx.Request]) -> httpx.MockTransport:
    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if request.url.path.endswith("/models"):
            return httpx.Response(200, json=recorded("models")["json"])
        if request.url.path.endswith("/props"):
            return httpx.Response(404, json=recorded("props_not_found")["json"])
        answer = recorded(chat)
        if "sse_body" in answer:
            headers = {"content-type": answer["content_type"]}
            return httpx.Response(answer["status"], content=answer["sse_body"], headers=headers)
        return httpx.Response(answer["status"], json=answer["json"])

    return httpx.MockTransport(handle)


async def run(chat: str, tools: tuple[ToolSpec, ...] = TOOLS) -> tuple[list[Event], list[Any]]:
    seen: list[httpx.Request] = []
    backend = OpenAIBackend(
        "http://127.0.0.1:1/v1",
        "SmolLM2-135M-Instruct.Q4_1",
        retry=RetryPolicy(attempts=3, base_delay=0.0),
        transport=replay(chat, seen),
    )
    try:
        request = ModelRequest((text_message("user", "read notes.txt"),), tools=tools)
        events = [e async for e in backend.stream(request)]
        window = await backend.context_window()
    finally:
        await backend.aclose()
    return events, [window, seen]


async def test_streamed_tool_call_with_repeated_ids_becomes_one_call() -> None:
    events, (window, _seen) = await run("chat_tool_call_stream")
    assembler = ToolCallAssembler()
    for event in events:
        if isinstance(event, ToolCallDelta):
            assembler.add(event)
    (call,) = assembler.calls("x")
    assert call.name.startswith("read_file") and call.invalid_arguments is None
    assert window is None  # this server tells no context size: unknown, never unlimited


async def test_unstreamed_tool_call_parses() -> None:
    events, _ = await run("chat_tool_call")
    assert any(isinstance(e, ToolCallDelta) and e.name for e in events)


async def test_context_overflow_is_reported_and_not_retried() -> None:
    events, (_window, seen) = await run("chat_context_overflow_error")
    errors = [e for e in events if isinstance(e, StreamError)]
    assert len(errors) == 1 and "2048 tokens" in errors[0].message
    chats = [r for r in seen if r.url.path.endswith("/chat/completions")]
    assert len(chats) == 1
