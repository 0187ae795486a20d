"""The mock LLM server as a small local server: an enforced window, a reported window, a silent
cut of the prompt, and a strict validator of tool messages."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from acp_server.backends.anthropic import wire as _anthropic_wire
from acp_server.backends.ollama import wire as _ollama_wire
from acp_server.backends.ollama.backend import OllamaBackend
from acp_server.backends.openai import wire as _openai_wire
from acp_server.backends.openai.backend import OpenAIBackend
from acp_server.context.tokens import Estimator
from acp_server.messages import (
    ImagePart,
    Message,
    ModelRequest,
    TextPart,
    ToolCall,
    ToolSpec,
    text_message,
)
from tests.support.mock_llm import MockLLM, running_mock_llm
from tests.support.mock_llm.view import IMAGE_TOKENS, count_tokens

OPENAI = "/v1/chat/completions"
ANTHROPIC = "/v1/messages"
OLLAMA = "/api/chat"
READ = ToolSpec(
    "read_file",
    "Read a text file.",
    {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
)
CODE = 'def main() -> None:\n    print("hello")\n' * 60


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=httpx.Timeout(3.0)) as http:
        yield http


def session(turns: int = 3) -> ModelRequest:
    """A tool-heavy history as the agent would send it."""
    messages: list[Message] = []
    for n in range(turns):
        call = ToolCall(f"c{n}", "read_file", {"path": f"src/f{n}.py"})
        messages += [
            text_message("user", f"What is in src/f{n}.py?"),
            Message("assistant", tool_calls=(call,)),
            text_message("tool", CODE, tool_call_id=f"c{n}"),
            text_message("assistant", f"It prints hello ({n})."),
        ]
    return ModelRequest(tuple(messages), tools=(READ,), system="You are a coding agent.")


def bodies(request: ModelRequest) -> dict[str, dict[str, Any]]:
    """The request as each backend puts it on the wire."""
    return {
        OPENAI: _openai_wire.payload("m", request, stream=False, stream_options=False),
        ANTHROPIC: {
            **_anthropic_wire.payload("m", request, max_tokens=100, thinking_budget=None),
            "stream": False,
        },
        OLLAMA: {**_ollama_wire.payload("m", request), "stream": False},
    }


# ----- counting ---------------------------------------------------------------------------------


@pytest.mark.parametrize("path", [OPENAI, ANTHROPIC, OLLAMA])
def test_the_count_is_stricter_than_the_agents_estimate(path: str) -> None:
    request = session()
    est = Estimator()
    estimate = est.messages(request.messages) + est.tools(request.tools)
    estimate += est.text(request.system)
    counted = count_tokens(bodies(request)[path])
    assert estimate < counted < estimate * 1.5


def test_an_image_counts_as_a_flat_number_of_tokens() -> None:
    image = ImagePart("A" * 400_000, "image/png")
    request = ModelRequest((Message("user", (TextPart("see"), image)),))
    plain = ModelRequest((text_message("user", "see"),))
    for path, body in bodies(request).items():
        extra = count_tokens(body) - count_tokens(bodies(plain)[path])
        assert IMAGE_TOKENS <= extra < IMAGE_TOKENS + 40, path


# ----- window -----------------------------------------------------------------------------------


async def test_an_over_window_request_gets_llama_cpp_error(client: httpx.AsyncClient) -> None:
    body = bodies(session())[OPENAI]
    tokens = count_tokens(body)
    async with running_mock_llm(window=tokens - 1) as llm:
        llm.queue({"text": "kept for later"})
        r = await client.post(llm.url + OPENAI, json=body)
        assert r.status_code == 400
        assert r.json() == {
            "error": {
                "code": 400,
                "message": "the request exceeds the available context size, try increasing it",
                "type": "exceed_context_size_error",
                "n_prompt_tokens": tokens,
                "n_ctx": tokens - 1,
            }
        }
        assert llm.overflows == llm.chat_requests and llm.pending == 1  # not consumed
        llm.window = tokens
        r = await client.post(llm.url + OPENAI, json=body)
        assert r.json()["choices"][0]["message"]["content"] == "kept for later"
        assert len(llm.overflows) == 1 and llm.counted == [tokens, tokens]


async def test_anthropic_and_ollama_overflow_errors(client: httpx.AsyncClient) -> None:
    async with running_mock_llm(window=100) as llm:
        body = bodies(session())
        r = await client.post(llm.url + ANTHROPIC, json=body[ANTHROPIC])
        tokens = count_tokens(body[ANTHROPIC])
        assert r.status_code == 400
        assert r.json() == {
            "type": "error",
            "error": {
                "type": "invalid_request_error",
                "message": f"prompt is too long: {tokens} tokens > 100 maximum",
            },
        }
        r = await client.post(llm.url + OLLAMA, json=body[OLLAMA])
        assert r.status_code == 400
        assert r.json() == {"error": "the input length exceeds the context length"}
        assert len(llm.overflows) == 2


async def test_the_reported_window(client: httpx.AsyncClient) -> None:
    async with running_mock_llm(report_window=8192) as llm:
        assert llm.report_window == 8192
        models = (await client.get(llm.url + "/v1/models")).json()
        assert models["data"][0]["context_length"] == 8192
        props = (await client.get(llm.url + "/props")).json()
        assert props["default_generation_settings"]["n_ctx"] == 8192
        show = (await client.post(llm.url + "/api/show", json={"model": "m"})).json()
        assert show["model_info"]["llama.context_length"] == 8192
        # Reported, not enforced: a request over it is served.
        r = await client.post(llm.url + OPENAI, json=bodies(session(40))[OPENAI])
        assert r.status_code == 200 and llm.counted[0] > 8192


# ----- a silent cut -----------------------------------------------------------------------------


async def test_capped_prompt_tokens_in_every_dialect(client: httpx.AsyncClient) -> None:
    async with running_mock_llm(cap_prompt_tokens=500) as llm:
        body = bodies(session())
        asked = {**body[OPENAI], "stream": True, "stream_options": {"include_usage": True}}
        r = await client.post(llm.url + OPENAI, json=asked)
        last = [line for line in r.text.splitlines() if line.startswith("data: {")][-1]
        assert json.loads(last[6:])["usage"]["prompt_tokens"] == 500
        r = await client.post(llm.url + ANTHROPIC, json=body[ANTHROPIC])
        assert r.json()["usage"]["input_tokens"] == 500
        r = await client.post(llm.url + OLLAMA, json=body[OLLAMA])
        assert r.json()["prompt_eval_count"] == 500
        assert all(n > 500 for n in llm.counted)
        llm.queue({"text": "small", "usage": {"prompt_tokens": 120, "completion_tokens": 1}})
        r = await client.post(llm.url + OPENAI, json=body[OPENAI])
        assert r.json()["usage"]["prompt_tokens"] == 120  # below the cap: as given


async def test_uncapped_usage_reports_the_count(client: httpx.AsyncClient) -> None:
    async with running_mock_llm() as llm:
        r = await client.post(llm.url + OPENAI, json=bodies(session())[OPENAI])
        assert r.json()["usage"]["prompt_tokens"] == llm.counted[0]


# ----- strict tool messages ---------------------------------------------------------------------


def broken(kind: str) -> ModelRequest:
    """A session with an orphaned tool result, or a tool call left without its result."""
    messages = list(session(2).messages)
    if kind == "orphan":
        del messages[1]  # the call; its result stays
    else:
        del messages[2]  # the result; its call stays
    return ModelRequest(tuple(messages), tools=(READ,))


@pytest.mark.parametrize("path", [OPENAI, ANTHROPIC, OLLAMA])
async def test_strict_tools_accept_a_sound_history(client: httpx.AsyncClient, path: str) -> None:
    async with running_mock_llm(strict_tools=True) as llm:
        r = await client.post(llm.url + path, json=bodies(session())[path])
        assert r.status_code == 200 and llm.invalid == []


@pytest.mark.parametrize("path", [OPENAI, ANTHROPIC, OLLAMA])
@pytest.mark.parametrize("kind", ["orphan", "unanswered"])
async def test_strict_tools_refuse_a_broken_history(
    client: httpx.AsyncClient, path: str, kind: str
) -> None:
    async with running_mock_llm(strict_tools=True) as llm:
        llm.queue({"text": "kept"})
        r = await client.post(llm.url + path, json=bodies(broken(kind))[path])
        assert r.status_code == 400
        [(request, reason)] = llm.invalid
        assert request is llm.requests[0] and reason.startswith("Invalid 'messages'")
        assert llm.pending == 1 and llm.counted == []


async def test_strict_tools_message_is_openai_style(client: httpx.AsyncClient) -> None:
    async with running_mock_llm(strict_tools=True) as llm:
        r = await client.post(llm.url + OPENAI, json=bodies(broken("unanswered"))[OPENAI])
        error = r.json()["error"]
        assert error["type"] == "invalid_request_error"
        assert "c0" in error["message"] and "tool_call" in error["message"]


async def test_without_strict_tools_a_broken_history_is_served(
    client: httpx.AsyncClient,
) -> None:
    async with running_mock_llm() as llm:
        r = await client.post(llm.url + OPENAI, json=bodies(broken("orphan"))[OPENAI])
        assert r.status_code == 200


async def test_options_are_attributes_of_a_running_server(
    mock_llm: MockLLM, client: httpx.AsyncClient
) -> None:
    mock_llm.window, mock_llm.strict_tools = 50, True
    r = await client.post(mock_llm.url + OPENAI, json=bodies(session())[OPENAI])
    assert r.status_code == 400 and len(mock_llm.overflows) == 1


# ----- what the backends read -------------------------------------------------------------------


async def test_the_backends_find_the_reported_window() -> None:
    async with running_mock_llm(report_window=6144) as llm:
        openai = OpenAIBackend(llm.url + "/v1", "whatever-name")
        ollama = OllamaBackend(llm.url, "qwen3:8b")
        try:
            assert await openai.context_window() == 6144
            assert await ollama.context_window() == 6144
        finally:
            await openai.aclose()
            await ollama.aclose()


async def test_llama_cpp_style_discovery_finds_the_runtime_window() -> None:
    """llama.cpp lists the trained length under /v1/models `meta` and the window it runs with
    under /props: the backend must budget for the runtime one."""
    async with running_mock_llm() as llm:
        llm.set(n_ctx=4096, n_ctx_train=131072)
        openai = OpenAIBackend(llm.url + "/v1", "m")
        try:
            assert await openai.context_window() == 4096
        finally:
            await openai.aclose()
