"""Context overflows reported precisely: every backend turns a server's "the prompt is too long"
into `StreamError.overflow` (the window and the prompt size when the server gave them), so the
loop can compact and retry without reading a message meant for a person."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from acp_server.backends._http import (
    BackendError,
    RetryPolicy,
    error_from_payload,
    error_from_response,
    retrying,
)
from acp_server.backends.anthropic.backend import AnthropicBackend
from acp_server.backends.ollama.backend import OllamaBackend
from acp_server.backends.openai.backend import OpenAIBackend
from acp_server.backends.overflow import parse_overflow
from acp_server.backends.scripted import ScriptedBackend
from acp_server.messages import (
    ContextOverflow,
    Event,
    ModelRequest,
    StreamError,
    text_message,
)
from tests.support.mock_llm import MockLLM, running_mock_llm

FIXTURES = Path(__file__).parent.parent / "fixtures" / "llama_cpp"
FAST = RetryPolicy(attempts=3, base_delay=0.001, max_delay=0.002)
ASK = ModelRequest(messages=(text_message("user", "hi"),), system="Be brief.")
LLAMA_CPP_BODY = {
    "error": {
        "code": 400,
        "message": "request (18995 tokens) exceeds the available context size (4096 tokens), "
        "try increasing it",
        "type": "exceed_context_size_error",
        "n_prompt_tokens": 18995,
        "n_ctx": 4096,
    }
}


@pytest.fixture
async def llm() -> AsyncIterator[MockLLM]:
    async with running_mock_llm() as server:
        yield server


def stream_errors(events: list[Event]) -> list[StreamError]:
    return [e for e in events if isinstance(e, StreamError)]


# ----- reading the texts ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "This model's maximum context length is 8192 tokens. However, your messages "
            "resulted in 9000 tokens. Please reduce the length of the messages.",
            ContextOverflow(8192, 9000),
        ),
        (
            "'max_tokens' or 'max_completion_tokens' is too large: 2000. This model's maximum "
            "context length is 4096 tokens and your request has 2104 input tokens",
            ContextOverflow(4096, 2104),
        ),
        ("prompt is too long: 210000 tokens > 200000 maximum", ContextOverflow(200000, 210000)),
        ("Requested tokens (757) exceed context window of 512", ContextOverflow(512, 757)),
        (
            "Trying to keep the first 5000 tokens when context the overflows. However, the "
            "model is loaded with context length of only 4096 tokens, which is not enough.",
            ContextOverflow(4096, None),
        ),
        (
            "The input token count (40000) exceeds the maximum number of tokens allowed (32768).",
            ContextOverflow(32768, 40000),
        ),
        ("the input length exceeds the context length", ContextOverflow()),
        ("prompt too long; exceeded max context length by 10 tokens", ContextOverflow()),
        ("The conversation is too long for the model's context window: x", ContextOverflow()),
    ],
)
def test_overflow_texts(text: str, expected: ContextOverflow) -> None:
    assert parse_overflow(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "The model server answered HTTP 500 Internal Server Error.",
        "Invalid API key",
        '{"error": {"message": "model not found", "type": "invalid_request_error"}}',
        # About the reply's length, not the prompt's: compacting would not help.
        "max_tokens exceeds the model's output limit of 4096",
        "",
    ],
)
def test_other_errors_are_not_overflows(text: str) -> None:
    assert parse_overflow(text) is None


def test_llama_cpp_bodies_give_the_numbers_as_fields() -> None:
    assert parse_overflow(json.dumps(LLAMA_CPP_BODY)) == ContextOverflow(4096, 18995)
    older: dict[str, Any] = {"message": "the request exceeds the available context size"}
    older |= {"type": "exceed_context_size_error", "n_prompt_tokens": 9000, "n_ctx": 8192}
    assert parse_overflow(json.dumps({"error": older})) == ContextOverflow(8192, 9000)
    # Only the error type says it: still an overflow.
    bare = {"error": {"message": "bad request", "type": "exceed_context_size_error"}}
    assert parse_overflow("bad request", bare) == ContextOverflow()
    openai = {"error": {"message": "too big", "code": "context_length_exceeded"}}
    assert parse_overflow("too big", openai) == ContextOverflow()


# ----- the HTTP layer ---------------------------------------------------------------------------


def test_an_error_response_carries_the_overflow() -> None:
    failure = error_from_response(400, {}, json.dumps(LLAMA_CPP_BODY))
    assert failure.context_overflow == ContextOverflow(4096, 18995)
    assert not failure.transient
    assert failure.message.startswith("The conversation is too long for the model's context")
    assert error_from_response(400, {}, '{"error": {"message": "bad"}}').context_overflow is None
    # A server error that mentions a context is not an overflow of ours.
    assert error_from_response(500, {}, "context length lookup failed").context_overflow is None


def test_an_error_frame_inside_a_200_stream_carries_the_overflow() -> None:
    failure = error_from_payload({"error": {"message": "prompt is too long: 9000 tokens > 8192"}})
    assert failure is not None and failure.context_overflow == ContextOverflow(None, 9000)
    failure = error_from_payload(LLAMA_CPP_BODY)
    assert failure is not None and failure.context_overflow == ContextOverflow(4096, 18995)


async def test_the_final_stream_error_carries_the_overflow() -> None:
    async def attempt() -> AsyncGenerator[Event, None]:
        raise BackendError("too long", context_overflow=ContextOverflow(8192, 9000))
        yield  # pragma: no cover - makes this an async generator

    events = [e async for e in retrying(attempt, FAST)]
    assert events == [StreamError("too long", ContextOverflow(8192, 9000))]


# ----- every backend, against the mock server and recorded bodies -------------------------------


async def test_openai_backend_reports_llama_cpp_overflow(llm: MockLLM) -> None:
    llm.queue({"fault": "status", "status": 400, "body": LLAMA_CPP_BODY})
    backend = OpenAIBackend(llm.url + "/v1", "m", retry=FAST)
    try:
        [error] = stream_errors([e async for e in backend.stream(ASK)])
    finally:
        await backend.aclose()
    assert error.overflow == ContextOverflow(4096, 18995)
    assert "4096 tokens" in error.message
    assert len(llm.chat_requests) == 1  # an overflow is never retried as it is


async def test_openai_backend_reports_an_overflow_inside_the_stream(llm: MockLLM) -> None:
    message = "This model's maximum context length is 2048 tokens."
    llm.queue({"fault": "error_frame", "message": message})
    backend = OpenAIBackend(llm.url + "/v1", "m", retry=FAST)
    try:
        [error] = stream_errors([e async for e in backend.stream(ASK)])
    finally:
        await backend.aclose()
    assert error.overflow == ContextOverflow(2048, None)


async def test_anthropic_backend_reports_the_overflow(llm: MockLLM) -> None:
    message = "prompt is too long: 210000 tokens > 200000 maximum"
    llm.queue({"fault": "status", "status": 400, "message": message})
    backend = AnthropicBackend(llm.url, "claude-sonnet-4-5", "sk-ant", retry=FAST)
    try:
        [error] = stream_errors([e async for e in backend.stream(ASK)])
    finally:
        await backend.aclose()
    assert error.overflow == ContextOverflow(200000, 210000)


async def test_ollama_backend_reports_the_overflow(llm: MockLLM) -> None:
    llm.queue({"fault": "status", "status": 400, "message": "the input length exceeds the context"})
    backend = OllamaBackend(llm.url, "qwen3:8b", retry=FAST)
    try:
        [error] = stream_errors([e async for e in backend.stream(ASK)])
    finally:
        await backend.aclose()
    assert error.overflow == ContextOverflow()
    assert len(llm.chat_requests) == 1


async def test_the_recorded_llama_cpp_python_overflow() -> None:
    recorded = json.loads((FIXTURES / "chat_context_overflow_error.json").read_text())["response"]

    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/chat/completions"):
            return httpx.Response(recorded["status"], json=recorded["json"])
        return httpx.Response(404)

    transport = httpx.MockTransport(answer)
    backend = OpenAIBackend("http://127.0.0.1:1/v1", "m", retry=FAST, transport=transport)
    try:
        [error] = stream_errors([e async for e in backend.stream(ASK)])
    finally:
        await backend.aclose()
    assert error.overflow == ContextOverflow(window=2048, prompt_tokens=2110)


async def test_a_scripted_overflow_is_reported_as_one() -> None:
    rounds: list[dict[str, Any]] = [
        {"error": "This model's maximum context length is 4096 tokens."},
        {"error": "The script says no."},
    ]
    backend = ScriptedBackend.from_rounds(rounds)
    [first] = stream_errors([e async for e in backend.stream(ASK)])
    [second] = stream_errors([e async for e in backend.stream(ASK)])
    assert first.overflow == ContextOverflow(4096, None)
    assert second.overflow is None


async def test_every_backend_against_an_enforced_window() -> None:
    """The mock refusing for its window the way each server does; each backend reports the
    overflow with what the server said (Ollama says no numbers)."""
    async with running_mock_llm(window=10) as llm:
        backends: list[OpenAIBackend | AnthropicBackend | OllamaBackend] = [
            OpenAIBackend(llm.url + "/v1", "m", retry=FAST),
            AnthropicBackend(llm.url, "claude-sonnet-4-5", "sk-ant", retry=FAST),
            OllamaBackend(llm.url, "qwen3:8b", retry=FAST),
        ]
        found = []
        try:
            for backend in backends:
                [error] = stream_errors([e async for e in backend.stream(ASK)])
                found.append(error.overflow)
        finally:
            for backend in backends:
                await backend.aclose()
        openai, anthropic, _ = llm.counted
        assert found == [
            ContextOverflow(10, openai),
            ContextOverflow(10, anthropic),
            ContextOverflow(),
        ]
        assert len(llm.overflows) == 3
