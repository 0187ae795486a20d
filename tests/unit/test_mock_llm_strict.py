"""The strict mock (`strict_dialect=True`): each endpoint refuses what its real API refuses, with
the vendor's error body, and records why; thinking signatures belong to the model that made
them. Then the backend side of a session that switches models across vendors and back."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

from acp_server.backends._http import RetryPolicy
from acp_server.backends.anthropic.backend import AnthropicBackend
from acp_server.backends.ollama.backend import OllamaBackend
from acp_server.backends.openai.backend import OpenAIBackend
from acp_server.messages import (
    Message,
    ModelRequest,
    PrivateData,
    StreamError,
    TextDelta,
    TextPart,
    ThoughtDelta,
    ToolCallAssembler,
    ToolCallDelta,
    ToolSpec,
    text_message,
)
from acp_server.models.carryover import Target, carry_over
from tests.support.mock_llm import MockLLM, running_mock_llm

FAST = RetryPolicy(attempts=1)
READ = ToolSpec("read_file", "Read a file", {"type": "object", "properties": {}})
Backend = OpenAIBackend | AnthropicBackend | OllamaBackend


@pytest.fixture
async def strict() -> AsyncIterator[MockLLM]:
    async with running_mock_llm(strict_dialect=True) as server:
        yield server


async def post(llm: MockLLM, path: str, body: dict[str, Any]) -> httpx.Response:
    async with httpx.AsyncClient() as client:
        return await client.post(llm.url + path, json=body)


CALL = {"id": "call_1", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
SOUND: dict[str, dict[str, Any]] = {
    "/v1/chat/completions": {
        "model": "m",
        "messages": [
            {"role": "user", "content": "read it"},
            {"role": "assistant", "content": "", "tool_calls": [CALL]},
            {"role": "tool", "tool_call_id": "call_1", "content": "x = 1"},
        ],
        "tools": [{"type": "function", "function": {"name": "read_file", "parameters": {}}}],
    },
    "/v1/messages": {
        "model": "claude-a",
        "max_tokens": 1024,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
    },
    "/api/chat": {"model": "qwen3", "messages": [{"role": "user", "content": "hi"}]},
}
BROKEN: dict[str, dict[str, Any]] = {
    "/v1/chat/completions": {
        "model": "m",
        "messages": [
            {"role": "user", "content": "read it"},
            {"role": "tool", "tool_call_id": "call_1", "content": "x = 1"},
        ],
    },
    "/v1/messages": {
        "model": "claude-a",
        "max_tokens": 1024,
        "messages": [{"role": "user", "content": "hi"}, {"role": "user", "content": "again"}],
    },
    "/api/chat": {
        "model": "qwen3",
        "messages": [{"role": "user", "content": "hi"}, {"role": "tool", "content": "x = 1"}],
    },
}
# Where each vendor's error body has its message, and words it must say here.
ERROR_SHAPES: dict[str, tuple[Callable[[Any], str], str]] = {
    "/v1/chat/completions": (lambda body: str(body["error"]["message"]), "role 'tool'"),
    "/v1/messages": (lambda body: str(body["error"]["message"]), "roles must alternate"),
    "/api/chat": (lambda body: str(body["error"]), "no pending call"),
}


@pytest.mark.parametrize("path", list(SOUND))
async def test_a_sound_request_is_served(strict: MockLLM, path: str) -> None:
    strict.queue({"text": "fine"})
    response = await post(strict, path, SOUND[path])
    assert response.status_code == 200 and strict.invalid == []


@pytest.mark.parametrize("path", list(BROKEN))
async def test_a_request_the_real_api_refuses_gets_its_400(strict: MockLLM, path: str) -> None:
    strict.queue({"text": "never sent"})
    response = await post(strict, path, BROKEN[path])
    assert response.status_code == 400
    message_of, words = ERROR_SHAPES[path]
    assert words in message_of(response.json())
    [(request, reason)] = strict.invalid
    assert request.path == path and words in reason
    assert strict.pending == 1  # the refused request consumed no scripted reply


async def test_without_strict_dialect_the_same_request_is_served(mock_llm: MockLLM) -> None:
    response = await post(mock_llm, "/api/chat", BROKEN["/api/chat"])
    assert response.status_code == 200 and mock_llm.invalid == []


# ----- turns through the real backends --------------------------------------------------------


async def turn(backend: Backend, history: list[Message], level: str | None = None) -> None:
    """One prompt's rounds, as the agent loop runs them: tool calls answered until a reply."""
    while True:
        request = ModelRequest(tuple(history), (READ,), "Be brief.", thought_level=level)
        text, thought, calls, extra = [], [], ToolCallAssembler(), {}
        async for event in backend.stream(request):
            assert not isinstance(event, StreamError), event.message
            if isinstance(event, TextDelta):
                text.append(event.text)
            elif isinstance(event, ThoughtDelta):
                thought.append(event.text)
            elif isinstance(event, ToolCallDelta):
                calls.add(event)
            elif isinstance(event, PrivateData):
                extra.update(event.data)
        made = calls.calls("call_local_")
        content = (TextPart("".join(text)),) if text else ()
        history.append(
            Message("assistant", content, tuple(made), thought="".join(thought), extra=extra)
        )
        if not made:
            return
        history += [
            text_message("tool", f"contents of {c.arguments.get('path')}", tool_call_id=c.id)
            for c in made
        ]


def tool_turn(path: str, thought: str = "") -> list[dict[str, Any]]:
    """A scripted prompt: read `path`, then answer."""
    call = {"tool_calls": [{"name": "read_file", "arguments": {"path": path}}]}
    return [{**call, "thought": thought} if thought else call, {"text": f"Read {path}."}]


async def test_thinking_signatures_belong_to_the_model_that_made_them(strict: MockLLM) -> None:
    sonnet = AnthropicBackend(strict.url, "claude-a", "sk-ant-test-key", retry=FAST)
    opus = AnthropicBackend(strict.url, "claude-b", "sk-ant-test-key", retry=FAST)
    history = [text_message("user", "read a.py")]
    strict.queue(*tool_turn("a.py", thought="I should read it."))
    await turn(sonnet, history, "low")  # the tool-using turn resent with its own thinking
    assert strict.invalid == [] and history[1].extra
    resent = strict.chat_requests[-1].json
    assert resent["messages"][1]["content"][0]["type"] == "thinking"
    strict.queue({"text": "never sent"})
    response = await post(strict, "/v1/messages", {**resent, "model": "claude-b"})
    assert response.status_code == 400  # claude-a's signature sent to claude-b
    assert "Invalid `signature`" in strict.invalid[-1][1]
    history.append(text_message("user", "and b.py?"))
    carried = carry_over(history, Target("anthropic", "claude-b"))
    strict.queue(*tool_turn("b.py", thought="Now b."))
    await turn(opus, carried, "low")
    assert len(strict.invalid) == 1
    for backend in (sonnet, opus):
        await backend.aclose()


async def test_a_conversation_switches_across_vendors_and_back(strict: MockLLM) -> None:
    gpt = OpenAIBackend(strict.url + "/v1", "model-a", retry=FAST)
    claude = AnthropicBackend(strict.url, "claude-b", "sk-ant-test-key", retry=FAST)
    llama = OllamaBackend(strict.url, "model-c", retry=FAST)
    history = [text_message("user", "Remember the word PELICAN, then read a.py.")]
    strict.queue(*tool_turn("a.py"))
    await turn(gpt, history)
    steps: list[tuple[Backend, Target, str]] = [
        (claude, Target("anthropic", "claude-b"), "b.py"),
        (llama, Target("ollama", "model-c"), "c.py"),
        (gpt, Target("openai", "model-a"), "d.py"),
    ]
    for backend, target, path in steps:
        history = carry_over(history, target)
        history.append(text_message("user", f"Now read {path}."))
        strict.queue(*tool_turn(path, thought="Thinking it over." if path == "b.py" else ""))
        await turn(backend, history, "low" if path == "b.py" else None)
    assert strict.invalid == []
    assert [r.path for r in strict.chat_requests] == [
        "/v1/chat/completions",
        "/v1/chat/completions",
        "/v1/messages",
        "/v1/messages",
        "/api/chat",
        "/api/chat",
        "/v1/chat/completions",
        "/v1/chat/completions",
    ]
    assert "PELICAN" in str(strict.chat_requests[-1].json)
    for backend in (gpt, claude, llama):
        await backend.aclose()
